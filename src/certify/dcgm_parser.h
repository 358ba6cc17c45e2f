// DCGM diagnostic results (`dcgmi diag -r <level> -j`), both JSON layouts:
//   3.x  {"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
//         "results": [{"gpu_ids": "0", "status": "Pass", "warnings": [...], "info": [...]}]}]}],
//         "version"}}
//   4.x  {"DCGM Diagnostic": {"test_categories": [... "results": [{"entity_group": "GPU",
//         "entity_id": 0, "status", "warnings": [{"warning", "error_id", "error_category",
//         "error_severity"}]}], "test_summary": {"status"}]}], "version"}}
// Warnings may be plain strings (older 3.x) or objects with error ids. A Warn result that a
// 4.x summary shows as "Fail" stays a warning: per-entity results are the verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/verdict.h"

namespace gpufleet::certify {

enum class DcgmStatus { Pass, Fail, Warn, Skip, NotRun };
std::string_view dcgm_status_name(DcgmStatus s) noexcept;

struct DcgmWarning {
  std::string text;
  std::optional<std::int64_t> error_id;
  std::optional<std::int64_t> category;
  std::optional<std::int64_t> severity;  // DCGM error severity (1 monitor .. 6 reset, ...)
};

struct DcgmResult {
  std::string category;  // "Hardware", "Stress", ...; empty in layouts without categories
  std::string test;      // "Memory", "SM Stress", "Targeted Power", ...
  std::string entity_group = "GPU";
  std::vector<int> gpus;  // one entry per GPU result; several for "0,1,2" (deployment tests)
  DcgmStatus status = DcgmStatus::NotRun;
  std::vector<DcgmWarning> warnings;
  std::vector<std::string> info;
};

struct DcgmReport {
  int major_version = 0;  // 3 or 4, from the top-level key
  std::string version;    // "4.1.1" when present
  std::vector<DcgmResult> results;

  [[nodiscard]] int failures() const noexcept;  // results with status Fail
  [[nodiscard]] int warnings() const noexcept;  // results with status Warn
  // GPU ids with a failed result, sorted, unique.
  [[nodiscard]] std::vector<int> failed_gpus() const;
};

// Text before the JSON (dcgmi may print a warning line first) is skipped. Throws
// OutputError with the line that broke: a JSON syntax error, neither top-level key, a result
// without a readable status, a status that is no DCGM status, no results at all, or output
// over kMaxOutputBytes.
DcgmReport parse_dcgm(std::string_view text);

}  // namespace gpufleet::certify
