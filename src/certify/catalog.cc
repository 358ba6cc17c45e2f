#include "certify/catalog.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/duration.h"
#include "core/errors.h"
#include "core/yaml.h"

namespace gpufleet::certify {
namespace {

using core::InvalidInput;

constexpr std::string_view kCategories[] = {"communication", "diagnostics", "training"};

// Reads one mapping strictly: every key must be listed; messages name source and path.
class Fields {
 public:
  Fields(const core::Value& v, std::string source, std::string path,
         std::initializer_list<std::string_view> allowed)
      : v_(v), source_(std::move(source)), path_(std::move(path)) {
    if (!v.is_map()) fail(path_.empty() ? "the document" : path_, "must be a mapping");
    for (const auto& e : v.as_map()) {
      if (std::find(allowed.begin(), allowed.end(), e.key) == allowed.end()) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(at(e.key), "is not a known field (allowed: " + list + ")");
      }
    }
  }

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InvalidInput(source_ + ": " + where + " " + what);
  }
  std::string at(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const core::Value* find(std::string_view key) const { return v_.find(key); }

  std::string string(std::string_view key, bool required, std::size_t max = 4096) const {
    const core::Value* f = v_.find(key);
    if (f == nullptr) {
      if (required) fail(at(key), "is required");
      return {};
    }
    if (!f->is_string() || f->as_string().empty()) fail(at(key), "must be a non-empty string");
    if (f->as_string().size() > max)
      fail(at(key), "is longer than " + std::to_string(max) + " bytes");
    return f->as_string();
  }
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t lo,
                                      std::int64_t hi) const {
    const core::Value* f = v_.find(key);
    if (f == nullptr) return std::nullopt;
    if (!f->is_int() || f->as_int() < lo || f->as_int() > hi) {
      fail(at(key), "must be a whole number in " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    return f->as_int();
  }
  std::optional<std::chrono::seconds> duration(std::string_view key) const {
    const core::Value* f = v_.find(key);
    if (f == nullptr) return std::nullopt;
    if (!f->is_string()) fail(at(key), "must be a duration such as 15m or 1h30m");
    auto d = core::try_parse_duration(f->as_string());
    if (!d || *d < std::chrono::seconds(1) || *d > std::chrono::hours(24)) {
      fail(at(key),
           "\"" + f->as_string() + "\" must be a duration between 1s and 24h, such as 15m");
    }
    return std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  std::map<std::string, std::string> string_map(std::string_view key) const {
    std::map<std::string, std::string> out;
    const core::Value* f = v_.find(key);
    if (f == nullptr) return out;
    if (!f->is_map()) fail(at(key), "must be a mapping of names to strings");
    for (const auto& e : f->as_map()) {
      if (!e.value.is_string()) fail(at(key) + "." + e.key, "must be a string (quote numbers)");
      out[e.key] = e.value.as_string();
    }
    return out;
  }
  std::map<std::string, double> metric_map(std::string_view key) const {
    std::map<std::string, double> out;
    const core::Value* f = v_.find(key);
    if (f == nullptr) return out;
    if (!f->is_map()) fail(at(key), "must be a mapping of metric names to numbers");
    for (const auto& e : f->as_map()) {
      if (!is_known_metric(e.key))
        fail(at(key) + "." + e.key, "is not a known metric (see docs/certify.md)");
      if (!e.value.is_number() || !std::isfinite(e.value.as_double())) {
        fail(at(key) + "." + e.key, "must be a number");
      }
      out[e.key] = e.value.as_double();
    }
    return out;
  }

 private:
  const core::Value& v_;
  std::string source_;
  std::string path_;
};

template <typename E, std::size_t N>
E choose(const Fields& f, std::string_view key, const std::string_view (&names)[N],
         const E (&values)[N], std::optional<E> fallback) {
  const core::Value* v = f.find(key);
  if (v == nullptr) {
    if (!fallback) f.fail(f.at(key), "is required");
    return *fallback;
  }
  std::string list;
  for (std::size_t i = 0; i < N; ++i) {
    if (v->is_string() && v->as_string() == names[i]) return values[i];
    list += (i ? ", " : "") + std::string(names[i]);
  }
  f.fail(f.at(key), "must be one of " + list);
}

}  // namespace

std::string_view scale_name(Scale s) noexcept {
  switch (s) {
    case Scale::PerNode: return "perNode";
    case Scale::NvlinkDomain: return "nvlinkDomain";
    case Scale::WholeSet: return "wholeSet";
    case Scale::Diagnose: return "diagnose";
  }
  return "perNode";
}

WorkloadTemplate WorkloadTemplate::for_family(std::string_view gpu_family) const {
  WorkloadTemplate t = *this;
  for (const FamilyOverride& o : overrides) {
    if (o.gpu_family != gpu_family) continue;
    if (o.image) t.image = *o.image;
    for (const auto& [k, v] : o.env) t.env[k] = v;
    for (const auto& [k, v] : o.expected) t.expected[k] = v;
    if (o.timeout) t.timeout = *o.timeout;
  }
  return t;
}

WorkloadTemplate parse_template(std::string_view yaml, std::string_view source,
                                std::string_view path) {
  core::Value doc = core::parse_yaml(yaml, source);
  Fields f(doc, std::string(source), "",
           {"name", "category", "description", "output", "scale", "launcher", "image", "command",
            "env", "statistic", "expectTransport", "timeout", "retries", "maxConcurrentJobs",
            "minNodes", "expected", "overrides"});
  WorkloadTemplate t;
  t.name = f.string("name", true, 63);
  t.category = f.string("category", true, 63);
  if (std::find(std::begin(kCategories), std::end(kCategories), t.category) ==
      std::end(kCategories)) {
    f.fail("category",
           "\"" + t.category + "\" must be one of communication, diagnostics, training");
  }
  std::string expected_path = t.category + "/" + t.name + ".yaml";
  if (!path.empty() && path != expected_path) {
    f.fail("name", "\"" + t.name + "\" and category \"" + t.category + "\" belong in " +
                       expected_path + ", not " + std::string(path));
  }
  t.id = t.category + "/" + t.name;
  t.description = f.string("description", true);
  static constexpr std::string_view kOutputs[] = {"nccl", "dcgm", "training", "result"};
  static constexpr OutputKind kOutputValues[] = {OutputKind::Nccl, OutputKind::Dcgm,
                                                 OutputKind::Training, OutputKind::Result};
  t.output = choose<OutputKind>(f, "output", kOutputs, kOutputValues, std::nullopt);
  static constexpr std::string_view kScales[] = {"perNode", "nvlinkDomain", "wholeSet", "diagnose"};
  static constexpr Scale kScaleValues[] = {Scale::PerNode, Scale::NvlinkDomain, Scale::WholeSet,
                                           Scale::Diagnose};
  t.scale = choose<Scale>(f, "scale", kScales, kScaleValues, Scale::PerNode);
  static constexpr std::string_view kLaunchers[] = {"mpi", "none"};
  static constexpr bool kLauncherValues[] = {true, false};
  t.mpi = choose<bool>(f, "launcher", kLaunchers, kLauncherValues, false);
  t.image = f.string("image", true, 512);
  const core::Value* command = f.find("command");
  if (command == nullptr || !command->is_list() || command->as_list().empty()) {
    f.fail("command", "must be a non-empty list of strings");
  }
  for (std::size_t i = 0; i < command->as_list().size(); ++i) {
    const core::Value& c = command->as_list()[i];
    if (!c.is_string())
      f.fail("command[" + std::to_string(i) + "]", "must be a string (quote numbers)");
    t.command.push_back(c.as_string());
  }
  t.env = f.string_map("env");
  if (const core::Value* s = f.find("statistic")) {
    if (t.output != OutputKind::Nccl) f.fail("statistic", "applies to output: nccl only");
    if (!s->is_string()) f.fail("statistic", "must be largestSize, maximum or average");
    try {
      t.statistic = parse_statistic(s->as_string());
    } catch (const InvalidInput& e) {
      f.fail("statistic", e.what());
    }
  }
  if (const core::Value* e = f.find("expectTransport")) {
    if (t.output != OutputKind::Nccl) f.fail("expectTransport", "applies to output: nccl only");
    if (!e->is_string()) f.fail("expectTransport", "must be one of rdma, ib, roce, efa, any");
    try {
      t.transport = parse_transport_expectation(e->as_string(), "expectTransport");
    } catch (const InvalidInput& err) {
      throw InvalidInput(std::string(source) + ": " + err.what());
    }
  }
  if (auto d = f.duration("timeout")) t.timeout = *d;
  if (auto r = f.integer("retries", 0, 5)) t.retries = static_cast<int>(*r);
  if (auto m = f.integer("maxConcurrentJobs", 1, 1024))
    t.max_concurrent_jobs = static_cast<int>(*m);
  if (auto m = f.integer("minNodes", 1, 4096)) t.min_nodes = static_cast<int>(*m);
  t.expected = f.metric_map("expected");
  if (const core::Value* overrides = f.find("overrides")) {
    if (!overrides->is_list()) f.fail("overrides", "must be a list");
    for (std::size_t i = 0; i < overrides->as_list().size(); ++i) {
      Fields o(overrides->as_list()[i], std::string(source), "overrides[" + std::to_string(i) + "]",
               {"gpuFamily", "image", "env", "expected", "timeout"});
      FamilyOverride fo;
      fo.gpu_family = o.string("gpuFamily", true, 63);
      for (const FamilyOverride& prev : t.overrides) {
        if (prev.gpu_family == fo.gpu_family)
          o.fail(o.at("gpuFamily"), "\"" + fo.gpu_family + "\" is overridden twice");
      }
      if (o.find("image")) fo.image = o.string("image", true, 512);
      fo.env = o.string_map("env");
      fo.expected = o.metric_map("expected");
      fo.timeout = o.duration("timeout");
      t.overrides.push_back(std::move(fo));
    }
  }
  return t;
}

Catalog Catalog::load(const std::vector<CatalogFile>& files) {
  Catalog c;
  for (const CatalogFile& file : files) {
    WorkloadTemplate t = parse_template(file.content, file.source, file.path);
    if (c.find(t.id) != nullptr)
      throw InvalidInput(file.source + ": template " + t.id + " is defined twice");
    c.templates_.push_back(std::move(t));
    std::sort(c.templates_.begin(), c.templates_.end(),
              [](const WorkloadTemplate& a, const WorkloadTemplate& b) { return a.id < b.id; });
  }
  return c;
}

const Catalog& Catalog::builtin() {
  static const Catalog c = load(builtin_catalog_files());
  return c;
}

const WorkloadTemplate* Catalog::find(std::string_view id) const noexcept {
  for (const WorkloadTemplate& t : templates_) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

const WorkloadTemplate& Catalog::get(std::string_view id) const {
  if (const WorkloadTemplate* t = find(id)) return *t;
  std::string known;
  for (const WorkloadTemplate& t : templates_) known += (known.empty() ? "" : ", ") + t.id;
  throw InvalidInput("workload \"" + std::string(id) + "\" is not in the catalog (known: " + known +
                     ")");
}

}  // namespace gpufleet::certify
