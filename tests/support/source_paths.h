// Where the checkout (and ../shared beside it) lies, for tests and benchmarks that read data
// files from it. The paths are compiled into one generated file of the build tree
// (source_paths.cc.in) instead of a -D on every test's compile line: an absolute path in the
// compile line or the preprocessed text defeats ccache, so a clone in another folder (every
// CI run) would recompile every test file.
#pragma once

#include <string>

namespace gpufleet::testing {
const std::string& source_dir();  // the checkout's root
const std::string& shared_dir();  // <checkout>/../shared
}  // namespace gpufleet::testing

#define GPUFLEET_SOURCE_DIR (::gpufleet::testing::source_dir())
#define GPUFLEET_SHARED_DIR (::gpufleet::testing::shared_dir())
