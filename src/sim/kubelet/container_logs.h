// Container logs as a kubelet serves them on `GET /containerLogs/{namespace}/{pod}/{container}`,
// the endpoint kube-apiserver proxies `pods/{name}/log` to: the query (follow, previous,
// timestamps, sinceSeconds, sinceTime, tailLines, limitBytes, stream) read and validated as
// kubelet v1.32 does (400 for a query that does not decode, 422 for invalid options), the
// container picked by its state (validateContainerLogStatus: running, terminated, the last
// terminated instance, or "waiting to start"), and the text cut as the CRI log reader cuts it.
// A simulated container writes its whole output when it exits, so a running one has no log
// yet and `follow` returns what there is instead of streaming.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/time.h"

namespace gpufleet::sim {

struct PodRun;

struct LogOptions {
  bool follow = false;
  bool previous = false;
  bool timestamps = false;
  std::optional<std::int64_t> since_seconds;
  std::optional<core::Timestamp> since_time;
  std::optional<std::int64_t> tail_lines;
  std::optional<std::int64_t> limit_bytes;
};

// An answer of the endpoint: 200 with the log, or the kubelet's status and error text.
struct LogAnswer {
  int status = 200;
  std::string body;
};

// Reads the query; an error answer (400, 422) when it does not decode or is invalid.
std::optional<LogAnswer> parse_log_options(
    const std::map<std::string, std::string, std::less<>>& query, LogOptions& out);

// The log of `container` of `run` as of `now` (for sinceSeconds).
LogAnswer container_log(const PodRun& run, std::string_view container, const LogOptions& options,
                        const core::Timestamp& now);

// Splits "/containerLogs/{ns}/{pod}/{container}" (the prefix included); false when a part is
// missing, with the kubelet's 400 answer in `error`.
bool split_log_path(std::string_view path, std::string& ns, std::string& pod,
                    std::string& container, LogAnswer& error);

}  // namespace gpufleet::sim
