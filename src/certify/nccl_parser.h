// nccl-tests results (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,
// ...): the text table on stdout and the JSON file of `-J` (format version 2).
//
// Which statistic a threshold sees is explicit (NcclStatistic): by default the bus bandwidth
// of the LARGEST message size, the lower of out-of-place and in-place, because that is where
// a collective reaches its peak and the "Avg bus bandwidth" line averages in the latency-bound
// tiny sizes (an 8-byte row counts as much as an 8-GiB one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/nccl_transport.h"
#include "certify/verdict.h"

namespace gpufleet::certify {

struct NcclPlacement {
  double time_us = 0;
  double algbw_gbs = 0;  // GB/s, GB = 1e9 bytes
  double busbw_gbs = 0;
  std::optional<std::int64_t> wrong;  // absent when checking was off (N/A)
};

struct NcclRow {
  std::uint64_t size = 0;
  std::uint64_t count = 0;
  std::string type;
  std::string redop;
  std::optional<NcclPlacement> out_of_place;  // absent in trace-replay runs
  std::optional<NcclPlacement> in_place;
};

struct NcclResult {
  std::string collective;          // "all_reduce_perf" when the output names it
  std::vector<std::string> hosts;  // from the "#  Rank" lines / devices, in rank order, unique
  int ranks = 0;
  std::vector<NcclRow> rows;
  std::optional<double> avg_busbw_gbs;  // the "Avg bus bandwidth" line
  std::int64_t out_of_bounds = 0;
  std::vector<std::string> failures;  // "<host>: Test NCCL failure ..." lines
  bool concluded = false;             // "# Collective test concluded" seen (text only)
  // Per host, from NCCL_DEBUG=INFO lines (text only), in the order of `hosts` (then the order
  // of their first line); empty without them: transport unknown.
  std::vector<NcclHostTransport> transports;

  [[nodiscard]] std::int64_t total_wrong() const noexcept;
};

enum class NcclStatistic {
  LargestSize,  // the row with the largest size: min(out-of-place, in-place)  (default)
  Maximum,      // the maximum over every row and placement
  Average,      // the "Avg bus bandwidth" line (busbw) / the mean over rows (algbw)
};
std::string_view statistic_name(NcclStatistic s) noexcept;
// "largestSize", "maximum", "average"; throws core::InvalidInput naming the choices.
NcclStatistic parse_statistic(std::string_view name);

struct NcclMetrics {
  double bus_bandwidth_gbs = 0;
  double alg_bandwidth_gbs = 0;
  std::int64_t wrong = 0;
  std::uint64_t size = 0;  // LargestSize: the size judged; else 0
};

// Throws OutputError (the line that broke) on a table row that does not read, a run with
// no rows and no failure lines, or output over kMaxOutputBytes. Failure lines are kept, not
// thrown: the caller decides the verdict (see judge_nccl in thresholds.h).
NcclResult parse_nccl_text(std::string_view text);
// The `-J` file. Throws OutputError with the JSON line on a syntax error or a missing field.
NcclResult parse_nccl_json(std::string_view text);
// Text or JSON, by the first non-blank character.
NcclResult parse_nccl(std::string_view text);

// Throws OutputError when there are no rows to take the statistic from.
NcclMetrics nccl_metrics(const NcclResult& r, NcclStatistic statistic = NcclStatistic::LargestSize);

}  // namespace gpufleet::certify
