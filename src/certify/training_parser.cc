#include "certify/training_parser.h"

#include "certify/text_lines.h"

namespace gpufleet::certify {
namespace {

using namespace detail;

constexpr std::string_view kFormat = "training";
constexpr std::size_t kMaxIntervals = 100000;

bool is_failure(std::string_view s) {
  return s.starts_with("Traceback (most recent call last)") || icontains(s, "CUDA error") ||
         icontains(s, "NCCL error") || icontains(s, "ncclInternalError") ||
         icontains(s, "ncclSystemError") || icontains(s, "Segmentation fault") ||
         icontains(s, "out of memory");
}

}  // namespace

double TrainingMetrics::avg_step_time_sec(std::size_t warmup) const {
  if (intervals.empty()) return 0;
  std::size_t from = intervals.size() > warmup ? warmup : 0;
  double sum = 0;
  for (std::size_t i = from; i < intervals.size(); ++i) sum += intervals[i].step_time_sec;
  return sum / static_cast<double>(intervals.size() - from);
}

std::optional<double> TrainingMetrics::avg_tflops_per_gpu(std::size_t warmup) const {
  std::size_t from = intervals.size() > warmup ? warmup : 0;
  double sum = 0;
  int n = 0;
  for (std::size_t i = from; i < intervals.size(); ++i) {
    if (intervals[i].tflops_per_gpu) {
      sum += *intervals[i].tflops_per_gpu;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

double TrainingMetrics::goodput_ratio() const {
  if (last_iteration <= 0) return 0;
  std::int64_t lost = 0;
  for (const TrainingInterval& i : intervals) lost += i.skipped + i.nan;
  double r = 1.0 - static_cast<double>(lost) / static_cast<double>(last_iteration);
  return r < 0 ? 0 : r;
}

TrainingMetrics parse_training(std::string_view text) {
  check_output_size(kFormat, text);
  TrainingMetrics m;
  for_each_line(text, [&](std::size_t number, std::string_view line) {
    std::string_view s = trim(line);
    if (s.empty()) return;
    if (is_failure(s)) throw OutputError(kFormat, number, line, "the trainer reported a failure");
    std::size_t it = s.find("iteration ");
    std::size_t bar = s.find('|');
    if (it == std::string_view::npos || bar == std::string_view::npos || it > bar) return;
    TrainingInterval iv;
    bool have_time = false;
    // "iteration       20/     100" then "key: value" fields between bars.
    std::string_view head = trim(s.substr(it + 10, bar - it - 10));
    std::size_t slash = head.find('/');
    auto cur = to_int(trim(head.substr(0, slash)));
    auto total =
        slash == std::string_view::npos ? std::nullopt : to_int(trim(head.substr(slash + 1)));
    if (!cur || !total || *cur < 0 || *total <= 0) {
      throw OutputError(kFormat, number, line, "\"iteration N/M\" does not read");
    }
    iv.iteration = *cur;
    iv.total = *total;
    std::string_view rest = s.substr(bar + 1);
    while (!rest.empty()) {
      std::size_t next = rest.find('|');
      std::string_view field = trim(rest.substr(0, next));
      rest = next == std::string_view::npos ? std::string_view{} : rest.substr(next + 1);
      std::size_t colon = field.rfind(':');
      if (field.empty() || colon == std::string_view::npos) continue;
      std::string_view key = trim(field.substr(0, colon));
      std::string_view value = trim(field.substr(colon + 1));
      auto number_value = [&](const char* what) {
        auto v = to_double(value);
        if (!v || *v < 0) {
          throw OutputError(
              kFormat, number, line,
              std::string(what) + " \"" + std::string(value) + "\" is not a number >= 0");
        }
        return *v;
      };
      if (key.starts_with("elapsed time per iteration (ms)")) {
        iv.step_time_sec = number_value("elapsed time per iteration") / 1000.0;
        have_time = true;
      } else if (key.starts_with("throughput per GPU")) {
        iv.tflops_per_gpu = number_value("throughput per GPU");
      } else if (key == "number of skipped iterations" || key == "number of nan iterations") {
        // Counts: bounded before the integer conversion (a huge double would overflow it).
        double v = number_value(key == "number of nan iterations" ? "nan iterations"
                                                                  : "skipped iterations");
        if (v > 1e12) throw OutputError(kFormat, number, line, "an iteration count above 10^12");
        (key == "number of nan iterations" ? iv.nan : iv.skipped) = static_cast<std::int64_t>(v);
      }
    }
    if (!have_time) {
      throw OutputError(kFormat, number, line,
                        "an iteration line without \"elapsed time per iteration (ms)\"");
    }
    if (m.intervals.size() >= kMaxIntervals) {
      throw OutputError(kFormat, number, line,
                        "more than " + std::to_string(kMaxIntervals) + " iteration lines");
    }
    m.last_iteration = iv.iteration;
    m.total_iterations = iv.total;
    m.intervals.push_back(iv);
  });
  if (m.intervals.empty()) {
    throw OutputError(kFormat, 0, {},
                      "no \"iteration N/M | ...\" line: the run produced no measurement");
  }
  return m;
}

}  // namespace gpufleet::certify
