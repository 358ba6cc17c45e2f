// File helpers for the simulator's host signal tree. Writes are core's atomic writes
// (core/atomic_file.h), named here so the simulator's files read as before.
#pragma once

#include <string>
#include <string_view>

#include "core/atomic_file.h"

namespace gpufleet::sim {

// Whole file as a string; throws core::InvalidInput naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

using core::write_file_atomic;
using core::write_file_if_changed;

}  // namespace gpufleet::sim
