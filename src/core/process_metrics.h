// The metrics every gpufleet process that serves /metrics exports, in the names Prometheus'
// own clients use (so the usual dashboards and alerts work unchanged):
//
//   process_cpu_seconds_total       user + system CPU time          /proc/self/stat
//   process_resident_memory_bytes   resident set size               /proc/self/stat
//   process_virtual_memory_bytes    virtual memory size             /proc/self/stat
//   process_open_fds                open file descriptors           /proc/self/fd
//   process_max_fds                 the soft limit on them          /proc/self/limits
//   process_start_time_seconds      start, Unix seconds             /proc/self/stat, /proc/stat
//   gpufleet_build_info{version,revision,compiler} = 1
//
// The process_* values are refreshed every 5 s by one thread per process (for every registry
// they were registered in; far under any scrape interval), and once at registration. The
// parsers take the text of the /proc files, so their tests run on recorded real contents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/metrics.h"

namespace gpufleet::core {

// What the build embeds: the project version, the git revision it was built from ("unknown"
// outside a git checkout unless -DGPUFLEET_REVISION=... says), and the compiler.
struct BuildInfo {
  std::string version;
  std::string revision;
  std::string compiler;  // "gcc 12.2.0", "clang 14.0.6"
};
const BuildInfo& build_info();

// The fields of /proc/<pid>/stat that the metrics need, in the kernel's units.
struct ProcStat {
  std::uint64_t utime_ticks = 0;      // field 14
  std::uint64_t stime_ticks = 0;      // field 15
  std::uint64_t starttime_ticks = 0;  // field 22: since boot
  std::uint64_t vsize_bytes = 0;      // field 23
  std::int64_t rss_pages = 0;         // field 24
};
// Throws InvalidInput naming the field when the text is not a stat line (the command name in
// field 2 may hold spaces and parentheses: the fields are counted after its last ')').
ProcStat parse_proc_stat(std::string_view text);
// "btime N" of /proc/stat: the boot time in Unix seconds. Throws InvalidInput without it.
std::int64_t parse_boot_time(std::string_view proc_stat);
// The soft limit of "Max open files" in /proc/<pid>/limits; nullopt when "unlimited". Throws
// InvalidInput when the line is missing or malformed.
std::optional<std::uint64_t> parse_max_open_files(std::string_view limits);

struct ProcessStats {
  double cpu_seconds = 0;
  double resident_memory_bytes = 0;
  double virtual_memory_bytes = 0;
  double open_fds = 0;
  std::optional<double> max_fds;  // nullopt: unlimited
  double start_time_seconds = 0;
};
// This process's figures from /proc/self. Throws std::runtime_error when /proc cannot be read.
ProcessStats read_process_stats();

namespace metrics {
// Registers process_* and gpufleet_build_info in `registry`, sets them at once and starts the
// refresh (calling it again for a registry changes nothing; thread-safe). The refresh holds the
// series (not the registry), so a registry destroyed first leaves nothing dangling. A /proc that
// cannot be read leaves the values where they were (logged once).
void register_process_metrics(Registry& registry);
// Refreshes every registered set now (what the thread does every 5 s).
void refresh_process_metrics();
}  // namespace metrics

}  // namespace gpufleet::core
