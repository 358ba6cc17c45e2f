#include "core/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <mutex>

#include "core/errors.h"
#include "core/utf8.h"

namespace gpufleet::core::metrics {
namespace {

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::Counter: return "counter";
    case MetricType::Gauge: return "gauge";
    case MetricType::Histogram: return "histogram";
  }
  return "untyped";
}

bool is_name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const bool digit = c >= '0' && c <= '9';
  return alpha || (colon && c == ':') || (!first && digit);
}

void check_metric_name(std::string_view name) {
  bool ok = !name.empty();
  for (std::size_t i = 0; ok && i < name.size(); ++i) ok = is_name_char(name[i], i == 0, true);
  if (!ok) {
    throw InvalidInput("invalid metric name \"" + std::string(name) +
                       "\": use letters, digits, '_' and ':', not starting with a digit, such as "
                       "gpufleet_sentinel_drains_total");
  }
}

void check_label_names(std::string_view metric, const std::vector<std::string>& labels,
                       MetricType type) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string& l = labels[i];
    bool ok = !l.empty();
    for (std::size_t k = 0; ok && k < l.size(); ++k) ok = is_name_char(l[k], k == 0, false);
    const std::string where = "metric " + std::string(metric) + ": label name \"" + l + "\"";
    if (!ok) {
      throw InvalidInput(where +
                         " is invalid: use letters, digits and '_', not starting with a digit");
    }
    if (l.rfind("__", 0) == 0) throw InvalidInput(where + " is reserved: it starts with \"__\"");
    if (type == MetricType::Histogram && l == "le") {
      throw InvalidInput(where + " is reserved for histogram buckets");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (labels[j] == l) throw InvalidInput(where + " is declared twice");
    }
  }
}

// Numbers as Prometheus reads them: integers without a fraction, +Inf, -Inf, NaN.
void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::trunc(v) && std::fabs(v) < 1e15) {
    out += std::to_string(static_cast<std::int64_t>(v));
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<std::size_t>(r.ptr - buf));
  }
}

// Escapes for label values: backslash, double quote and line feed.
void append_label_value(std::string& out, std::string_view value) {
  std::string valid;
  if (!is_valid_utf8(value)) {
    append_valid_utf8(valid, value);
    value = valid;
  }
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

// Escapes for HELP text: backslash and line feed.
void append_help(std::string& out, std::string_view help) {
  std::string valid;
  if (!is_valid_utf8(help)) {
    append_valid_utf8(valid, help);
    help = valid;
  }
  for (char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

void append_header(std::string& out, const std::string& name, const std::string& help,
                   MetricType type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  append_help(out, help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type_name(type);
  out += '\n';
}

// {a="x",b="y"} plus an optional extra label (le for buckets); nothing when there are none.
void append_labels(std::string& out, const std::vector<std::string>& names,
                   const std::vector<std::string>& values, std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    append_label_value(out, values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

}  // namespace

namespace detail {

template <typename Series>
std::shared_ptr<Series> Family<Series>::series(std::span<const std::string_view> values) {
  if (values.size() != label_names_.size()) {
    std::string names;
    for (const std::string& n : label_names_) names += (names.empty() ? "" : ", ") + n;
    throw InvalidInput("metric " + name_ + " has " + std::to_string(label_names_.size()) +
                       " label(s) (" + names + ") but was given " + std::to_string(values.size()) +
                       " value(s)");
  }
  {
    std::shared_lock lock(mu_);
    if (auto it = series_.find(values); it != series_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  if (auto it = series_.find(values); it != series_.end()) return it->second;
  if (regular_series_ >= options_.max_series) {
    std::vector<std::string> overflow(label_names_.size(), std::string(kOverflowLabelValue));
    auto it = series_.find(overflow);
    if (it == series_.end()) {
      it = series_.emplace(std::move(overflow), std::make_shared<Series>(series_size_)).first;
    }
    return it->second;
  }
  std::vector<std::string> key(values.begin(), values.end());
  auto it = series_.emplace(std::move(key), std::make_shared<Series>(series_size_)).first;
  ++regular_series_;
  if (label_names_.empty()) sole_.store(it->second.get(), std::memory_order_release);
  return it->second;
}

template <typename Series>
bool Family<Series>::remove(std::initializer_list<std::string_view> label_values) {
  if (label_names_.empty()) {
    throw InvalidInput("metric " + name_ +
                       " has no labels: its one series cannot be removed; set it to 0 instead");
  }
  if (label_values.size() != label_names_.size()) {
    throw InvalidInput("metric " + name_ + " has " + std::to_string(label_names_.size()) +
                       " label(s) but remove was given " + std::to_string(label_values.size()) +
                       " value(s)");
  }
  std::unique_lock lock(mu_);
  auto it =
      series_.find(std::span<const std::string_view>(label_values.begin(), label_values.size()));
  if (it == series_.end()) return false;
  const bool overflow = std::all_of(it->first.begin(), it->first.end(),
                                    [](const std::string& v) { return v == kOverflowLabelValue; });
  if (!overflow) --regular_series_;
  series_.erase(it);  // handles still holding it keep it alive, unrendered
  return true;
}

template <typename Series>
std::size_t Family<Series>::remove_matching(std::string_view label_name, std::string_view value) {
  auto pos = std::find(label_names_.begin(), label_names_.end(), label_name);
  if (pos == label_names_.end()) {
    throw InvalidInput("metric " + name_ + " has no label \"" + std::string(label_name) +
                       "\"; remove by one of its labels");
  }
  const auto index = static_cast<std::size_t>(pos - label_names_.begin());
  std::unique_lock lock(mu_);
  std::size_t removed = 0;
  for (auto it = series_.begin(); it != series_.end();) {
    if (it->first[index] != value) {
      ++it;
      continue;
    }
    const bool overflow = std::all_of(it->first.begin(), it->first.end(), [](const std::string& v) {
      return v == kOverflowLabelValue;
    });
    if (!overflow) --regular_series_;
    it = series_.erase(it);
    ++removed;
  }
  return removed;
}

template <typename Series>
std::size_t Family<Series>::series_count() const {
  std::shared_lock lock(mu_);
  return series_.size();
}

template class Family<Scalar>;
template class Family<Buckets>;

}  // namespace detail

void Counter::Handle::inc(double amount) const {
  if (!(amount >= 0)) {
    throw InvalidInput("a counter can only go up: the increment must be >= 0, not " +
                       std::to_string(amount));
  }
  s_->value.fetch_add(amount, std::memory_order_relaxed);
}

Counter::Handle Counter::with(std::initializer_list<std::string_view> label_values) {
  return Handle(
      series(std::span<const std::string_view>(label_values.begin(), label_values.size())));
}
Counter::Handle Counter::with(std::span<const std::string_view> label_values) {
  return Handle(series(label_values));
}

void Counter::render(std::string& out) const {
  append_header(out, name(), help(), MetricType::Counter);
  for_each([&](const std::vector<std::string>& values, const detail::Scalar& s) {
    out += name();
    append_labels(out, label_names(), values);
    out += ' ';
    append_number(out, s.value.load(std::memory_order_relaxed));
    out += '\n';
  });
}

Gauge::Handle Gauge::with(std::initializer_list<std::string_view> label_values) {
  return Handle(
      series(std::span<const std::string_view>(label_values.begin(), label_values.size())));
}
Gauge::Handle Gauge::with(std::span<const std::string_view> label_values) {
  return Handle(series(label_values));
}

void Gauge::render(std::string& out) const {
  append_header(out, name(), help(), MetricType::Gauge);
  for_each([&](const std::vector<std::string>& values, const detail::Scalar& s) {
    out += name();
    append_labels(out, label_names(), values);
    out += ' ';
    append_number(out, s.value.load(std::memory_order_relaxed));
    out += '\n';
  });
}

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds,
                     std::vector<std::string> label_names, MetricOptions options)
    : Family(std::move(name), std::move(help), std::move(label_names), options, bounds.size() + 1),
      bounds_(std::move(bounds)) {}

void Histogram::Handle::observe(double v) const noexcept {
  std::size_t i = bounds_->size();  // +Inf (also for NaN)
  if (!std::isnan(v)) {
    i = static_cast<std::size_t>(std::lower_bound(bounds_->begin(), bounds_->end(), v) -
                                 bounds_->begin());
  }
  b_->counts[i].fetch_add(1, std::memory_order_relaxed);
  b_->sum.fetch_add(v, std::memory_order_relaxed);
}

std::uint64_t Histogram::Handle::count() const noexcept {
  std::uint64_t total = 0;
  for (const auto& c : b_->counts) total += c.load(std::memory_order_relaxed);
  return total;
}

Histogram::Handle Histogram::with(std::initializer_list<std::string_view> label_values) {
  return Handle(&bounds_, series(std::span<const std::string_view>(label_values.begin(),
                                                                   label_values.size())));
}
Histogram::Handle Histogram::with(std::span<const std::string_view> label_values) {
  return Handle(&bounds_, series(label_values));
}

void Histogram::render(std::string& out) const {
  append_header(out, name(), help(), MetricType::Histogram);
  const std::string bucket = name() + "_bucket";
  for_each([&](const std::vector<std::string>& values, const detail::Buckets& b) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += b.counts[i].load(std::memory_order_relaxed);
      std::string le;
      if (i < bounds_.size()) {
        append_number(le, bounds_[i]);
      } else {
        le = "+Inf";
      }
      out += bucket;
      append_labels(out, label_names(), values, "le", le);
      out += ' ';
      out += std::to_string(cumulative);
      out += '\n';
    }
    out += name();
    out += "_sum";
    append_labels(out, label_names(), values);
    out += ' ';
    append_number(out, b.sum.load(std::memory_order_relaxed));
    out += '\n';
    out += name();
    out += "_count";
    append_labels(out, label_names(), values);
    out += ' ';
    out += std::to_string(cumulative);  // equals the +Inf bucket, as the format requires
    out += '\n';
  });
}

std::vector<double> exponential_buckets(double start, double factor, std::size_t count) {
  if (!(start > 0) || !(factor > 1) || count == 0 || !std::isfinite(start) ||
      !std::isfinite(factor)) {
    throw InvalidInput("exponential buckets need start > 0, factor > 1 and count >= 1");
  }
  std::vector<double> out;
  double v = start;
  for (std::size_t i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

std::vector<double> linear_buckets(double start, double width, std::size_t count) {
  if (!(width > 0) || count == 0 || !std::isfinite(start) || !std::isfinite(width)) {
    throw InvalidInput("linear buckets need width > 0 and count >= 1");
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(start + width * static_cast<double>(i));
  return out;
}

std::vector<double> default_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

Registry::Entry& Registry::add(std::string_view name, MetricType type,
                               const std::vector<std::string>& labels, bool& existed) {
  check_metric_name(name);
  check_label_names(name, labels, type);
  auto it = metrics_.find(name);
  existed = it != metrics_.end();
  if (!existed) return metrics_.emplace(std::string(name), Entry{type, {}, {}, {}}).first->second;
  Entry& e = it->second;
  const std::vector<std::string>* had = nullptr;
  if (e.counter) had = &e.counter->label_names();
  if (e.gauge) had = &e.gauge->label_names();
  if (e.histogram) had = &e.histogram->label_names();
  if (e.type != type || *had != labels) {
    std::string names;
    for (const std::string& n : *had) names += (names.empty() ? "" : ",") + n;
    throw InvalidInput("metric " + std::string(name) + " is already registered as a " +
                       std::string(type_name(e.type)) + " with labels (" + names +
                       "); use another name or the same definition");
  }
  return e;
}

Counter& Registry::counter(std::string_view name, std::string_view help,
                           std::vector<std::string> label_names, MetricOptions options) {
  std::unique_lock lock(mu_);
  bool existed = false;
  Entry& e = add(name, MetricType::Counter, label_names, existed);
  if (!existed) {
    e.counter = std::make_unique<Counter>(std::string(name), std::string(help),
                                          std::move(label_names), options);
    if (e.counter->label_names().empty()) (void)e.counter->with({});  // render 0 at once
  }
  return *e.counter;
}

Gauge& Registry::gauge(std::string_view name, std::string_view help,
                       std::vector<std::string> label_names, MetricOptions options) {
  std::unique_lock lock(mu_);
  bool existed = false;
  Entry& e = add(name, MetricType::Gauge, label_names, existed);
  if (!existed) {
    e.gauge = std::make_unique<Gauge>(std::string(name), std::string(help), std::move(label_names),
                                      options);
    if (e.gauge->label_names().empty()) (void)e.gauge->with({});
  }
  return *e.gauge;
}

Histogram& Registry::histogram(std::string_view name, std::string_view help,
                               std::vector<double> bounds, std::vector<std::string> label_names,
                               MetricOptions options) {
  // A trailing +Inf is implicit in the format; accept it and drop it.
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
      throw InvalidInput("histogram " + std::string(name) +
                         ": bucket bounds must be finite and strictly increasing");
    }
  }
  std::unique_lock lock(mu_);
  bool existed = false;
  Entry& e = add(name, MetricType::Histogram, label_names, existed);
  if (existed) {
    if (e.histogram->bounds() != bounds) {
      throw InvalidInput("histogram " + std::string(name) +
                         " is already registered with other bucket bounds");
    }
    return *e.histogram;
  }
  e.histogram = std::make_unique<Histogram>(std::string(name), std::string(help), std::move(bounds),
                                            std::move(label_names), options);
  if (e.histogram->label_names().empty()) (void)e.histogram->with({});
  return *e.histogram;
}

std::string Registry::render() const {
  std::string out;
  render(out);
  return out;
}

void Registry::render(std::string& out) const {
  std::shared_lock lock(mu_);
  for (const auto& [name, e] : metrics_) {
    if (e.counter) e.counter->render(out);
    if (e.gauge) e.gauge->render(out);
    if (e.histogram) e.histogram->render(out);
  }
}

Registry& default_registry() {
  static Registry* r = new Registry;  // never destroyed: metrics may be updated during exit
  return *r;
}

}  // namespace gpufleet::core::metrics
