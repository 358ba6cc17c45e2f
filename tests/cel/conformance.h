// Runs the CEL conformance suite (cel-spec test data converted to JSON) against gpufleet's
// CEL engine: one result per test, grouped by file, with an explicit skip list.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace gpufleet::cel::conformance {

struct FileResult {
  std::string file;
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  int skipped_but_passing = 0;        // skip-list entries that no longer fail
  std::vector<std::string> failures;  // "section/test: reason"
};

// Skip list lines: "file/section/test  reason" ('#' starts a comment). Throws
// core::InvalidInput for a line without a reason.
std::map<std::string, std::string> read_skip_list(const std::string& path);

// Runs every *.json file in `folder` (sorted by name).
std::vector<FileResult> run_folder(const std::string& folder,
                                   const std::map<std::string, std::string>& skips);

}  // namespace gpufleet::cel::conformance
