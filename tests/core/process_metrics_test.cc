// process_* and gpufleet_build_info: the /proc parsers on recorded real contents (a Linux 6.x
// /proc/1/stat, /proc/stat and /proc/self/limits), and the metrics as a refresh leaves them.
#include "core/process_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "core/errors.h"

namespace gpufleet::core {
namespace {

// /proc/1/stat of a live machine, its command name changed to one with spaces and parentheses.
constexpr std::string_view kStat =
    "1 (gpu (fleet) x) S 0 0 0 0 -1 4194560 33603 10234129 0 1534 445 2100 34957 8313 10 -10 "
    "41 0 31 58462208 3502 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 "
    "0 0 0 0 0 0 0 0\n";

constexpr std::string_view kProcStat =
    "cpu  384631 0 54585 1163467 1283 0 345 2539 0 0\n"
    "cpu0 191985 0 26426 583857 98 0 24 1103 0 0\n"
    "intr 114315123 0 9 0 0 0\n"
    "ctxt 243377371\n"
    "btime 1796668060\n"
    "processes 1186921\n";

constexpr std::string_view kLimits =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max stack size            8388608              unlimited            bytes     \n"
    "Max processes             96370                96370                processes \n"
    "Max open files            20000                524288               files     \n"
    "Max locked memory         8388608              8388608              bytes     \n";

TEST(ProcessMetrics, ParsesProcSelfStatPastACommandNameWithParentheses) {
  const ProcStat s = parse_proc_stat(kStat);
  EXPECT_EQ(s.utime_ticks, 445u);
  EXPECT_EQ(s.stime_ticks, 2100u);
  EXPECT_EQ(s.starttime_ticks, 31u);
  EXPECT_EQ(s.vsize_bytes, 58462208u);
  EXPECT_EQ(s.rss_pages, 3502);
}

TEST(ProcessMetrics, RefusesTruncatedOrMalformedStat) {
  try {
    (void)parse_proc_stat("1 (x) S 0 0 0");
    FAIL() << "a truncated stat line was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "/proc/self/stat: 6 fields; expected at least 24 (up to rss)");
  }
  std::string bad(kStat);
  bad.replace(bad.find(" 445 "), 5, " 4x5 ");
  try {
    (void)parse_proc_stat(bad);
    FAIL() << "a non-numeric utime was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "/proc/self/stat: field 14 is \"4x5\"; expected an integer");
  }
  EXPECT_THROW((void)parse_proc_stat("no command name"), InvalidInput);
}

TEST(ProcessMetrics, BootTimeAndOpenFileLimit) {
  EXPECT_EQ(parse_boot_time(kProcStat), 1796668060);
  EXPECT_THROW((void)parse_boot_time("cpu 1 2 3\n"), InvalidInput);
  EXPECT_EQ(parse_max_open_files(kLimits), std::optional<std::uint64_t>(20000));
  std::string unlimited(kLimits);
  unlimited.replace(unlimited.find("20000"), 5, "unlimited");
  EXPECT_EQ(parse_max_open_files(unlimited), std::nullopt);
  try {
    (void)parse_max_open_files("Limit Soft Limit\nMax processes 1 1 processes\n");
    FAIL() << "limits without Max open files were accepted";
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "/proc/self/limits: no \"Max open files\" line with a soft limit");
  }
}

TEST(ProcessMetrics, ReadsThisProcess) {
  const ProcessStats s = read_process_stats();
  EXPECT_GT(s.resident_memory_bytes, 1 << 20);
  EXPECT_GE(s.virtual_memory_bytes, s.resident_memory_bytes);
  EXPECT_GE(s.open_fds, 3);  // stdin, stdout, stderr at least
  ASSERT_TRUE(s.max_fds.has_value());
  EXPECT_GE(*s.max_fds, s.open_fds);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started before now, and not before the test binary could have been built (a day).
  EXPECT_LE(s.start_time_seconds, now + 1);
  EXPECT_GT(s.start_time_seconds, now - 86400);
  EXPECT_GE(s.cpu_seconds, 0);
}

double sample(const std::string& text, const std::string& series) {
  const std::size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(ProcessMetrics, SetAtRegistrationAndByEachRefresh) {
  metrics::Registry r;
  metrics::register_process_metrics(r);
  metrics::register_process_metrics(r);  // idempotent
  const std::string first = r.render();
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"}) {
    EXPECT_NE(first.find(std::string("\n# TYPE ") + name + " "), std::string::npos) << name;
    EXPECT_GT(sample(first, name), 0) << name << " in\n" << first;
  }
  EXPECT_NE(first.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  const BuildInfo& b = build_info();
  EXPECT_EQ(b.version, GPUFLEET_TEST_VERSION);
  EXPECT_FALSE(b.revision.empty());
  EXPECT_TRUE(b.compiler.starts_with("gcc ") || b.compiler.starts_with("clang ")) << b.compiler;
  EXPECT_NE(first.find("gpufleet_build_info{version=\"" + b.version + "\",revision=\"" +
                       b.revision + "\",compiler=\"" + b.compiler + "\"} 1\n"),
            std::string::npos)
      << first;

  // Descriptors opened before a refresh show after it (and go with the next).
  const double fds = sample(first, "process_open_fds");
  const int a = ::dup(1);
  const int b2 = ::dup(1);
  ASSERT_GE(a, 0);
  ASSERT_GE(b2, 0);
  metrics::refresh_process_metrics();
  const double more = sample(r.render(), "process_open_fds");
  ::close(a);
  ::close(b2);
  // Other threads of the test binary may open or close one meanwhile: at least one more.
  EXPECT_GE(more, fds + 1) << "before " << fds << ", after " << more;
  // CPU time spent shows, and the counter never goes down.
  volatile double x = 0;
  for (int i = 0; i < 50'000'000; ++i) x = x + 1;
  metrics::refresh_process_metrics();
  EXPECT_GT(sample(r.render(), "process_cpu_seconds_total"),
            sample(first, "process_cpu_seconds_total"));
}

}  // namespace
}  // namespace gpufleet::core
