// A minimal host root for step runner tests: this machine's binaries and their libraries
// (found with ldd) copied to the same paths under a temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gpufleet::hostpkg::testing {

namespace fs = std::filesystem;

inline std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << data;
}

// Copies a binary and every library ldd names into the root, at the same paths.
inline void install_binary(const fs::path& root, const std::string& binary) {
  auto copy = [&](const std::string& src) {
    fs::path dst = root / fs::path(src).relative_path();
    fs::create_directories(dst.parent_path());
    fs::copy_file(fs::canonical(src), dst, fs::copy_options::overwrite_existing);
    fs::permissions(dst, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
  };
  copy(binary);
  FILE* p = popen(("ldd " + binary).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string a, arrow, b;
    in >> a >> arrow >> b;
    if (arrow == "=>" && b.front() == '/')
      copy(b);
    else if (a.front() == '/')
      copy(a);
  }
  pclose(p);
}

}  // namespace gpufleet::hostpkg::testing
