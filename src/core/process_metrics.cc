#include "core/process_metrics.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "core/log.h"
#include "core/text.h"

#ifndef GPUFLEET_VERSION
#error "GPUFLEET_VERSION is defined by src/core/CMakeLists.txt"
#endif
#include "build_revision.h"  // GPUFLEET_REVISION, written by cmake/revision.cmake

namespace gpufleet::core {
namespace {

template <typename T>
bool to_number(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
    std::size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\n') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> lines(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const std::size_t nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

std::string read_proc(const std::string& path) {
  // Not read_file: /proc files report size 0, and these are a few hundred bytes.
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string compiler_name() {
#if defined(__clang__)
  return "clang " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) + "." +
         std::to_string(__clang_patchlevel__);
#elif defined(__GNUC__)
  return "gcc " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

}  // namespace

const BuildInfo& build_info() {
  static const BuildInfo info{GPUFLEET_VERSION, GPUFLEET_REVISION, compiler_name()};
  return info;
}

ProcStat parse_proc_stat(std::string_view text) {
  const std::size_t close = text.rfind(')');
  if (text.find('(') == std::string_view::npos || close == std::string_view::npos) {
    throw InvalidInput("/proc/self/stat: no command name in parentheses in " + quoted(text) +
                       "; expected \"PID (COMM) STATE PPID ...\"");
  }
  const std::vector<std::string_view> f = words(text.substr(close + 1));
  // f[0] is field 3 (state): field n is f[n - 3].
  if (f.size() < 22) {
    throw InvalidInput("/proc/self/stat: " + std::to_string(f.size() + 2) +
                       " fields; expected at least 24 (up to rss)");
  }
  ProcStat s;
  auto field = [&](int n, auto& out) {
    if (!to_number(f[static_cast<std::size_t>(n - 3)], out)) {
      throw InvalidInput("/proc/self/stat: field " + std::to_string(n) + " is " +
                         quoted(f[static_cast<std::size_t>(n - 3)]) + "; expected an integer");
    }
  };
  field(14, s.utime_ticks);
  field(15, s.stime_ticks);
  field(22, s.starttime_ticks);
  field(23, s.vsize_bytes);
  field(24, s.rss_pages);
  return s;
}

std::int64_t parse_boot_time(std::string_view proc_stat) {
  for (std::string_view line : lines(proc_stat)) {
    const std::vector<std::string_view> w = words(line);
    if (w.size() == 2 && w[0] == "btime") {
      std::int64_t t = 0;
      if (to_number(w[1], t)) return t;
      throw InvalidInput("/proc/stat: btime is " + quoted(w[1]) + "; expected Unix seconds");
    }
  }
  throw InvalidInput("/proc/stat: no \"btime N\" line (the boot time)");
}

std::optional<std::uint64_t> parse_max_open_files(std::string_view limits) {
  constexpr std::string_view kName = "Max open files";
  for (std::string_view line : lines(limits)) {
    if (!line.starts_with(kName)) continue;
    const std::vector<std::string_view> w = words(line.substr(kName.size()));
    // Soft limit, hard limit, units.
    if (w.empty()) break;
    if (w[0] == "unlimited") return std::nullopt;
    std::uint64_t n = 0;
    if (to_number(w[0], n)) return n;
    throw InvalidInput("/proc/self/limits: the soft limit of \"Max open files\" is " +
                       quoted(w[0]) + "; expected a count or \"unlimited\"");
  }
  throw InvalidInput("/proc/self/limits: no \"Max open files\" line with a soft limit");
}

ProcessStats read_process_stats() {
  const ProcStat st = parse_proc_stat(read_proc("/proc/self/stat"));
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  ProcessStats out;
  out.cpu_seconds = static_cast<double>(st.utime_ticks + st.stime_ticks) / ticks;
  out.resident_memory_bytes = static_cast<double>(st.rss_pages) * page;
  out.virtual_memory_bytes = static_cast<double>(st.vsize_bytes);
  out.start_time_seconds = static_cast<double>(parse_boot_time(read_proc("/proc/stat"))) +
                           static_cast<double>(st.starttime_ticks) / ticks;
  std::error_code ec;
  std::size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++fds;
  if (ec) throw std::runtime_error("cannot list /proc/self/fd: " + ec.message());
  // The iterator's own descriptor is open while it counts; Prometheus' clients count it too.
  out.open_fds = static_cast<double>(fds);
  if (auto max = parse_max_open_files(read_proc("/proc/self/limits")))
    out.max_fds = static_cast<double>(*max);
  return out;
}

namespace metrics {
namespace {

// One registry's process_* series.
struct ProcessSeries {
  Counter::Handle cpu;
  Gauge::Handle rss, vsize, open, max, start;
};

class Refresher {
 public:
  static Refresher& instance() {
    static Refresher* r = new Refresher;  // never destroyed: metrics may be read during exit
    return *r;
  }
  void add(ProcessSeries series) {
    std::lock_guard lock(mu_);
    series_.push_back(std::move(series));
    if (!thread_.joinable()) {
      thread_ = std::jthread([this](std::stop_token stop) {
        std::mutex m;
        std::condition_variable_any cv;
        std::unique_lock wait(m);
        while (!stop.stop_requested()) {
          cv.wait_for(wait, stop, std::chrono::seconds(5), [] { return false; });
          if (!stop.stop_requested()) refresh();
        }
      });
    }
  }
  void refresh() {
    std::optional<ProcessStats> s;
    try {
      s = read_process_stats();
    } catch (const std::exception& e) {
      if (!warned_.exchange(true))
        log::warn("process metrics: cannot read /proc/self; process_* keep their last values",
                  {{"error", e.what()}});
      return;
    }
    std::lock_guard lock(mu_);
    for (ProcessSeries& p : series_) {
      // A counter only adds: the difference to what it shows. Only this (under mu_) adds to
      // it, so a registry registered twice (two entries, one series) is not counted twice.
      if (s->cpu_seconds > p.cpu.value()) p.cpu.inc(s->cpu_seconds - p.cpu.value());
      p.rss.set(s->resident_memory_bytes);
      p.vsize.set(s->virtual_memory_bytes);
      p.open.set(s->open_fds);
      p.max.set(s->max_fds.value_or(-1));
      p.start.set(s->start_time_seconds);
    }
  }

 private:
  std::mutex mu_;
  std::vector<ProcessSeries> series_;
  std::atomic<bool> warned_{false};
  std::jthread thread_;  // runs until exit (the Refresher is never destroyed)
};

}  // namespace

void register_process_metrics(Registry& registry) {
  const BuildInfo& b = build_info();
  registry
      .gauge("gpufleet_build_info",
             "1, labelled with the version, git revision and compiler of this gpufleet binary",
             {"version", "revision", "compiler"})
      .with({b.version, b.revision, b.compiler})
      .set(1);
  ProcessSeries p{
      registry
          .counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.")
          .with({}),
      registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes.").with({}),
      registry.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").with({}),
      registry.gauge("process_open_fds", "Number of open file descriptors.").with({}),
      registry.gauge("process_max_fds", "Maximum number of open file descriptors (-1: unlimited).")
          .with({}),
      registry
          .gauge("process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.")
          .with({})};
  // Not deduplicated by registry: an address may be reused by a later registry (tests), and a
  // second entry for the same series changes nothing (see refresh).
  Refresher::instance().add(std::move(p));
  Refresher::instance().refresh();
}

void refresh_process_metrics() { Refresher::instance().refresh(); }

}  // namespace metrics
}  // namespace gpufleet::core
