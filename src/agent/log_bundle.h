// The log bundle the agent collects before the first remediation action of an incident
// (docs/agent.md, "Log bundle"): what a person needs afterwards to tell why the node was
// rebooted or its GPUs reset, since the reboot itself wipes the kernel ring and the volatile
// GPU state. One gzip'd JSON document on the node, bounded in size and time:
//
//   {"node", "incident", "collectedAt", "sections": {"kmsg": "<the last GPU/NIC kernel lines>",
//    "nvidia-smi/query-gpu.csv": ..., "nvidia-smi -q": ..., "infiniband": {"mlx5_0/1": {...}},
//    "nodehealth": {...}}, "truncated": [...], "errors": [...]}
//
// A section that cannot be read is named in "errors" and the rest is still written; only a
// bundle that cannot be written at all fails. Nothing here blocks past `deadline`: the
// sections are read in order and those left when it passes are named in "errors".
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::agent {

struct LogBundleOptions {
  std::size_t kmsg_bytes = 256 << 10;      // the newest kernel lines about GPUs, NICs, PCIe
  std::size_t section_bytes = 256 << 10;   // each file or command output (its tail)
  std::size_t max_bundle_bytes = 1 << 20;  // compressed; sections are cut to fit
  std::chrono::milliseconds deadline{std::chrono::seconds(30)};
  // nvidia-smi -q on a real node (empty: none; the simulator writes its state as files).
  std::vector<std::string> gpu_state_command;
  std::size_t keep = 16;  // bundles kept in the directory (the oldest go)
};

struct LogBundleSource {
  std::filesystem::path host_root = "/";  // host paths are read below it (simulation: the node dir)
  // The node's NodeHealth as the API has it (history, checks); may throw (recorded as an error).
  std::function<core::Value()> node_health;
};

struct LogBundle {
  bool ok = false;          // written (possibly with sections in `errors`)
  std::string path;         // <dir>/<incident>.json.gz
  std::string sha256;       // of the file's bytes
  std::uint64_t bytes = 0;  // compressed
  std::uint64_t raw_bytes = 0;
  std::vector<std::string> sections;   // present
  std::vector<std::string> truncated;  // cut to their bound
  std::vector<std::string> errors;     // "<section>: <why>"
  std::string error;                   // why nothing was written (ok == false)
};

// Collects and writes the bundle for `incident` into `dir` (durably: temp file, fsync,
// rename). Never throws for a section; throws only for a programming error.
LogBundle collect_log_bundle(const LogBundleSource& source, const std::filesystem::path& dir,
                             const std::string& node, const std::string& incident,
                             const LogBundleOptions& options = {});

// The lines of a kernel log (the /dev/kmsg record form "<prio>,<seq>,<usec>,<flags>;<text>",
// or plain text) that are about GPUs, NVSwitches, NICs or PCIe, newest last, at most
// `max_bytes` (the oldest dropped). Exposed for tests.
std::string filter_kernel_lines(std::string_view text, std::size_t max_bytes, bool* truncated);

}  // namespace gpufleet::agent
