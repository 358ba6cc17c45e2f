// Writing files so that a reader never sees half of one: every write goes to a temporary
// file in the same directory and is renamed over the target, so a concurrent reader (the
// node agent, a CI job reading a bundle) gets either the old content or the new one.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::core {

// Creates parent directories, writes `content` to "<path>.tmp-<pid>" and renames it over
// `path` (mode 0644). Throws std::runtime_error with the path and errno text on failure.
void write_file_atomic(const std::string& path, std::string_view content);

// Like write_file_atomic, but does nothing when the file already holds `content` (saves
// renames for the thousands of counters that rarely change). Returns true when written.
bool write_file_if_changed(const std::string& path, std::string_view content);

}  // namespace gpufleet::core
