// Prometheus metrics: counters, gauges and histograms with label names fixed at registration,
// rendered in the text exposition format 0.0.4.
//
//   auto& drains = metrics::default_registry().counter(
//       "gpufleet_sentinel_drains_total", "Nodes drained by sentinel.", {"reason"});
//   auto handle = drains.with({"xid"});   // look up once ...
//   handle.inc();                          // ... then a single atomic add per event
//
// Label sets are bounded: each metric holds at most `max_series` label-value combinations;
// further new combinations are counted in one overflow series whose label values are all
// "other", so a runaway label (a pod name, an error text) cannot grow memory or scrape size.
//
// Series of something that went away (a deleted object's name in a label) are removed with
// remove() / remove_matching(). A handle shares ownership of its series, so a handle another
// thread still holds stays valid: its updates go to the removed series, which is no longer
// rendered, and the next with() of those labels starts a fresh series at zero.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::core::metrics {

// The label value of the overflow series.
inline constexpr std::string_view kOverflowLabelValue = "other";

struct MetricOptions {
  std::size_t max_series = 1000;  // label-value combinations before overflow into "other"
};

enum class MetricType : std::uint8_t { Counter, Gauge, Histogram };

namespace detail {

// Orders label-value lists; transparent, so lookups need no allocation.
struct LabelLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const noexcept {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](std::string_view x, std::string_view y) { return x < y; });
  }
};

// One series of a counter or gauge.
struct Scalar {
  explicit Scalar(std::size_t /*unused*/) {}
  std::atomic<double> value{0.0};
};

// One series of a histogram: a count per bucket (not cumulative) and the sum.
struct Buckets {
  explicit Buckets(std::size_t n) : counts(n) {}
  std::vector<std::atomic<std::uint64_t>> counts;  // one per bound, then +Inf
  std::atomic<double> sum{0.0};
};

// Name, help and label names, plus the bounded map from label values to series.
template <typename Series>
class Family {
 public:
  // `series_size` is passed to each new Series (the bucket count of a histogram).
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         MetricOptions options, std::size_t series_size = 0)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        options_(options),
        series_size_(series_size) {}

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::string& help() const noexcept { return help_; }
  [[nodiscard]] const std::vector<std::string>& label_names() const noexcept {
    return label_names_;
  }
  [[nodiscard]] const MetricOptions& options() const noexcept { return options_; }

 protected:
  // Finds or creates the series for these label values (the overflow series when full).
  // Throws InvalidInput when the number of values differs from the label names.
  std::shared_ptr<Series> series(std::span<const std::string_view> values);
  // The series of a metric without labels, once created; no lock needed to reach it.
  Series* sole() const noexcept { return sole_.load(std::memory_order_acquire); }
  // A handle's pointer to the sole series without touching a reference count (hot path): it
  // is never removed, and lives as long as the family.
  static std::shared_ptr<Series> unowned(Series* s) noexcept {
    return std::shared_ptr<Series>(std::shared_ptr<void>(), s);
  }
  // Calls f(label_values, series) in label-value order, under a shared lock.
  template <typename F>
  void for_each(F&& f) const {
    std::shared_lock lock(mu_);
    for (const auto& [values, s] : series_) f(values, *s);
  }

 public:
  // Removes the series with exactly these label values; false when there is none. Throws
  // InvalidInput for a metric without labels (its one series is never removed) or a wrong
  // number of values.
  bool remove(std::initializer_list<std::string_view> label_values);
  // Removes every series whose label `label_name` has `value`; returns how many. Throws
  // InvalidInput when the metric has no such label.
  std::size_t remove_matching(std::string_view label_name, std::string_view value);
  // Series currently rendered (the overflow series included).
  [[nodiscard]] std::size_t series_count() const;

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  MetricOptions options_;
  std::size_t series_size_;
  mutable std::shared_mutex mu_;
  std::map<std::vector<std::string>, std::shared_ptr<Series>, LabelLess> series_;
  std::size_t regular_series_ = 0;  // series other than the overflow series
  std::atomic<Series*> sole_{nullptr};
};

}  // namespace detail

class Counter : public detail::Family<detail::Scalar> {
 public:
  // A cheap, copyable reference to one series; valid as long as the registry.
  class Handle {
   public:
    // Throws InvalidInput for a negative or NaN amount (counters only go up).
    void inc(double amount = 1.0) const;
    [[nodiscard]] double value() const noexcept {
      return s_->value.load(std::memory_order_relaxed);
    }

   private:
    friend class Counter;
    explicit Handle(std::shared_ptr<detail::Scalar> s) : s_(std::move(s)) {}
    std::shared_ptr<detail::Scalar> s_;
  };

  using Family::Family;
  // Throws InvalidInput when the number of values differs from the label names.
  [[nodiscard]] Handle with(std::initializer_list<std::string_view> label_values);
  [[nodiscard]] Handle with(std::span<const std::string_view> label_values);
  // For metrics without labels.
  void inc(double amount = 1.0) { unlabeled().inc(amount); }

  void render(std::string& out) const;

 private:
  Handle unlabeled() {
    detail::Scalar* s = sole();
    return s != nullptr ? Handle(unowned(s)) : with({});
  }
};

class Gauge : public detail::Family<detail::Scalar> {
 public:
  class Handle {
   public:
    void set(double v) const noexcept { s_->value.store(v, std::memory_order_relaxed); }
    void add(double d) const noexcept { s_->value.fetch_add(d, std::memory_order_relaxed); }
    void inc() const noexcept { add(1.0); }
    void dec() const noexcept { add(-1.0); }
    [[nodiscard]] double value() const noexcept {
      return s_->value.load(std::memory_order_relaxed);
    }

   private:
    friend class Gauge;
    explicit Handle(std::shared_ptr<detail::Scalar> s) : s_(std::move(s)) {}
    std::shared_ptr<detail::Scalar> s_;
  };

  using Family::Family;
  [[nodiscard]] Handle with(std::initializer_list<std::string_view> label_values);
  [[nodiscard]] Handle with(std::span<const std::string_view> label_values);
  void set(double v) { unlabeled().set(v); }
  void add(double d) { unlabeled().add(d); }

  void render(std::string& out) const;

 private:
  Handle unlabeled() {
    detail::Scalar* s = sole();
    return s != nullptr ? Handle(unowned(s)) : with({});
  }
};

class Histogram : public detail::Family<detail::Buckets> {
 public:
  class Handle {
   public:
    // Counts `v` in the first bucket whose upper bound is >= v (NaN goes to +Inf only).
    void observe(double v) const noexcept;
    [[nodiscard]] std::uint64_t count() const noexcept;
    [[nodiscard]] double sum() const noexcept { return b_->sum.load(std::memory_order_relaxed); }

   private:
    friend class Histogram;
    Handle(const std::vector<double>* bounds, std::shared_ptr<detail::Buckets> b)
        : bounds_(bounds), b_(std::move(b)) {}
    const std::vector<double>* bounds_;
    std::shared_ptr<detail::Buckets> b_;
  };

  Histogram(std::string name, std::string help, std::vector<double> bounds,
            std::vector<std::string> label_names, MetricOptions options);
  [[nodiscard]] Handle with(std::initializer_list<std::string_view> label_values);
  [[nodiscard]] Handle with(std::span<const std::string_view> label_values);
  void observe(double v) { unlabeled().observe(v); }
  [[nodiscard]] const std::vector<double>& bounds() const noexcept { return bounds_; }

  void render(std::string& out) const;

 private:
  Handle unlabeled() {
    detail::Buckets* b = sole();
    return b != nullptr ? Handle(&bounds_, unowned(b)) : with({});
  }
  std::vector<double> bounds_;  // strictly increasing, finite
};

// Bucket bounds: start, start*factor, ... (count of them). Throws InvalidInput on bad input.
std::vector<double> exponential_buckets(double start, double factor, std::size_t count);
// Bucket bounds: start, start+width, ... (count of them).
std::vector<double> linear_buckets(double start, double width, std::size_t count);
// Prometheus' default latency buckets in seconds (0.005 .. 10).
std::vector<double> default_buckets();

// Owns metrics and renders them sorted by name, series sorted by label values.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registering a name again with the same type and label names returns the existing metric;
  // anything else about a repeated name, an invalid metric or label name (Prometheus rules:
  // [a-zA-Z_:][a-zA-Z0-9_:]* and [a-zA-Z_][a-zA-Z0-9_]*, no "__" prefix, no duplicates, no
  // "le" on histograms) or unsorted/non-finite buckets throws InvalidInput.
  Counter& counter(std::string_view name, std::string_view help,
                   std::vector<std::string> label_names = {}, MetricOptions options = {});
  Gauge& gauge(std::string_view name, std::string_view help,
               std::vector<std::string> label_names = {}, MetricOptions options = {});
  Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> bounds,
                       std::vector<std::string> label_names = {}, MetricOptions options = {});

  // Text exposition format 0.0.4, deterministic for the same values.
  [[nodiscard]] std::string render() const;
  void render(std::string& out) const;

 private:
  struct Entry {
    MetricType type;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  Entry& add(std::string_view name, MetricType type, const std::vector<std::string>& labels,
             bool& existed);

  mutable std::shared_mutex mu_;
  std::map<std::string, Entry, std::less<>> metrics_;
};

// The process-wide registry served on /metrics.
Registry& default_registry();

// The content type of render()'s output.
inline constexpr std::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace gpufleet::core::metrics
