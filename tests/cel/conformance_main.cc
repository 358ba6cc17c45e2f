// cel_conformance [FOLDER] [--skip FILE] [--verbose]: runs the CEL conformance suite and
// exits non-zero when any test outside the skip list fails.
#include <cstring>
#include <iostream>

#include "conformance.h"
#include "support/source_paths.h"

int main(int argc, char** argv) {
  using namespace gpufleet::cel::conformance;
  std::string folder = GPUFLEET_SHARED_DIR + "/cel-spec/testdata";
  std::string skip_path = GPUFLEET_SOURCE_DIR + "/tests/cel/conformance_skip.txt";
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--skip") == 0 && i + 1 < argc) {
      skip_path = argv[++i];
    } else if (std::strcmp(argv[i], "--verbose") == 0 || std::strcmp(argv[i], "-v") == 0) {
      verbose = true;
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::cout << "usage: cel_conformance [FOLDER] [--skip FILE] [--verbose]\n";
      return 0;
    } else {
      folder = argv[i];
    }
  }
  try {
    auto skips = read_skip_list(skip_path);
    auto results = run_folder(folder, skips);
    int passed = 0, failed = 0, skipped = 0, stale = 0;
    for (const auto& r : results) {
      std::cout << r.file << ": " << r.passed << " passed, " << r.failed << " failed, " << r.skipped
                << " skipped" << (r.failed == 0 ? "  PASS" : "  FAIL") << "\n";
      if (verbose || r.failed > 0) {
        for (const auto& f : r.failures) std::cout << "  FAIL " << f << "\n";
      }
      passed += r.passed;
      failed += r.failed;
      skipped += r.skipped;
      stale += r.skipped_but_passing;
    }
    std::cout << "TOTAL: " << passed << " passed, " << failed << " failed, " << skipped
              << " skipped";
    if (stale > 0) std::cout << " (" << stale << " skipped tests now pass: trim the skip list)";
    std::cout << "\n";
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "cel_conformance: " << e.what() << "\n";
    return 2;
  }
}
