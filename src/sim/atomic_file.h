// File helpers for the simulator's host signal tree. Every write goes to a temporary file in
// the same directory and is renamed over the target, so a reader (the node agent) never
// sees half a file: it reads either the old content or the new one.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::sim {

// Whole file as a string; throws core::InvalidInput naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

// Creates parent directories, writes `content` to "<path>.tmp-<pid>" and renames it over
// `path`. Throws std::runtime_error with the path and errno text on failure.
void write_file_atomic(const std::string& path, std::string_view content);

// Like write_file_atomic, but does nothing when the file already holds `content` (saves
// renames for the thousands of counters that rarely change). Returns true when written.
bool write_file_if_changed(const std::string& path, std::string_view content);

}  // namespace gpufleet::sim
