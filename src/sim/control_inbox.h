// The simulator's control files under <state-dir>/control/. `gpufleet sim inject` validates
// an event and drops it into inbox/ (written aside and renamed in, so the simulator never
// reads half an event); the running simulator applies inbox files in name order and moves
// each to done/ with a result line appended ("# applied: ..." or "# error: ...").
#pragma once

#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::sim {

// Writes one event document; returns the inbox file's path.
std::string submit_control_event(const std::string& state_dir, const core::Value& event);

// Inbox file names, oldest first.
std::vector<std::string> list_control_inbox(const std::string& state_dir);

// Reads an inbox file (YAML).
core::Value read_control_event(const std::string& state_dir, const std::string& file_name);

// Moves the file to done/ with `result` appended as a comment line.
void complete_control_event(const std::string& state_dir, const std::string& file_name,
                            const std::string& result);

// <state-dir>/status.json: the running simulator's summary (written atomically).
std::string status_file_path(const std::string& state_dir);

}  // namespace gpufleet::sim
