// alias_bomb_probe LEVELS [--unbounded]: parses the "billion laughs" YAML document with
// LEVELS nested anchors (ten aliases each) and prints the time taken and the outcome. With
// --unbounded the alias budget is lifted, which is how the reader behaved before it had one;
// run it under `/usr/bin/time -v` (and a ulimit) for the peak memory. Figures: docs/security.md.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>

#include "core/errors.h"
#include "core/yaml.h"

int main(int argc, char** argv) {
  using namespace gpufleet;
  if (argc < 2) {
    std::cerr << "usage: alias_bomb_probe LEVELS [--unbounded]\n";
    return 64;
  }
  int levels = std::atoi(argv[1]);
  core::InputLimits limits = core::input_limits();
  if (argc > 2 && std::string(argv[2]) == "--unbounded") {
    limits.max_alias_nodes = std::numeric_limits<std::size_t>::max();
    limits.max_alias_bytes = std::numeric_limits<std::size_t>::max();
  }
  std::string doc = "- &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    doc += "- &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) doc += (j ? ", " : "") + prev;
    doc += "]\n";
  }
  auto start = std::chrono::steady_clock::now();
  int rc = 0;
  try {
    core::Value v = core::parse_yaml(doc, "bomb.yaml", limits);
    std::cout << "parsed " << doc.size() << " bytes into " << v.size() << " top-level items";
  } catch (const core::InvalidInput& e) {
    std::cout << "refused: " << e.what();
    rc = 2;
  } catch (const std::bad_alloc&) {
    std::cout << "std::bad_alloc";
    rc = 3;
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << " (" << ms << " ms)\n";
  return rc;
}
