// The one way gpufleet reads an input file: refuses, by name and before reading, anything
// that is not a regular file of bounded size (a directory, a FIFO that would block forever,
// a device that never ends, a file over the limit), then reads with a cap so a file that
// grows while being read cannot slip past it.
#pragma once

#include <string>

#include "core/input_limits.h"

namespace gpufleet::core {

// Whole content of the regular file `path`, at most limits.max_bytes. Throws InvalidInput
// whose message starts with the path and says what is wrong and what to do: "is a
// directory", "is a FIFO", "is a character device", "does not exist", "cannot be read:
// permission denied", "is N bytes, over the limit of M". Never blocks on a FIFO.
std::string read_file(const std::string& path, const InputLimits& limits = input_limits());

}  // namespace gpufleet::core
