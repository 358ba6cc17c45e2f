// nccl-tests all_reduce_perf output from the bandwidth model: the header with one
// "#  Rank" line per rank, the table (8 B .. 8 GiB by default) with out-of-place and
// in-place time/algbw/busbw/#wrong, the footer; or the failure lines and a non-zero exit
// when a member is broken. With NCCL_DEBUG=INFO, NCCL's transport lines per rank: NET/IB
// devices (/IB, or /RoCE on an Ethernet link layer), "Using network IB", ring channels via
// P2P/CUMEM inside a domain and via NET/IB/<n>/GDRDMA between them; a socketFallback
// member's ranks say "NET/IB : No device found.", NET/Socket and via NET/Socket/<n>. Math: algbw =
// size / time (GB = 1e9 bytes), busbw = algbw x 2(n-1)/n; "Avg bus bandwidth" averages busbw over
// every row, both placements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/bandwidth_model.h"

namespace gpufleet::sim {

struct NcclTestConfig {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 8ULL << 30;
  std::uint64_t step_factor = 2;
  int warmup_iters = 5;
  int iters = 20;
  int check = 1;  // -c: 0 prints #wrong as N/A
  std::uint64_t seed = 1;
  // NCCL_DEBUG=INFO (with NCCL_DEBUG_SUBSYS unset or naming INIT, NET or ALL): each rank's
  // transport lines, interleaved, between the device list and the table (nccl_info_env).
  bool nccl_info = false;
};

// Whether a container's env (name -> value) makes NCCL print its INIT/NET INFO lines.
bool nccl_info_env(const std::string& nccl_debug, const std::string& nccl_debug_subsys);

// Reads all_reduce_perf flags (-b -e -f -n -w -c, with K/M/G suffixes, also the long
// --minbytes forms). Throws core::InvalidInput naming the flag on a bad value.
NcclTestConfig parse_nccl_test_args(const std::vector<std::string>& args);

struct NcclTestResult {
  std::string output;
  int exit_code = 0;
};

// Wall time of a whole all_reduce_perf run (init, then warmup + iters of every size in both
// placements), for how long the pod runs.
double allreduce_test_seconds(const BandwidthEstimate& e, const NcclTestConfig& config);

// The run of all_reduce_perf over `members` (one rank per GPU of each member).
NcclTestResult run_allreduce_test(const std::vector<GroupMember>& members,
                                  const NcclTestConfig& config);

}  // namespace gpufleet::sim
