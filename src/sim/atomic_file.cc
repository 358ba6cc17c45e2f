#include "sim/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/errors.h"

namespace gpufleet::sim {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw core::InvalidInput(path + ": cannot read file: " + std::strerror(errno) +
                             " (check the path)");
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace gpufleet::sim
