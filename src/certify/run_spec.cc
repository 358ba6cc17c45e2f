#include "certify/run_spec.h"

#include "core/time.h"

namespace gpufleet::certify {
namespace {

Targets parse_targets(const core::Value& spec) {
  Targets t;
  const core::Value* targets = spec.find("targets");
  if (targets == nullptr || !targets->is_map())
    throw SpecError("InvalidSpec", "spec.targets is missing (give nodeSelector or nodeNames)");
  if (const core::Value* s = targets->find("nodeSelector"); s != nullptr && s->is_map())
    t.node_selector = *s;
  if (const core::Value* n = targets->find("nodeNames"); n != nullptr && n->is_list())
    for (const auto& v : n->as_list())
      if (v.is_string()) t.node_names.push_back(v.as_string());
  if (const core::Value* tol = targets->find("tolerations"); tol != nullptr && tol->is_list())
    t.tolerations = *tol;
  return t;
}

Scale parse_scale(std::string_view s, std::string_view field) {
  if (s == "perNode") return Scale::PerNode;
  if (s == "perNVLinkDomain") return Scale::NvlinkDomain;
  if (s == "wholeSet") return Scale::WholeSet;
  if (s == "diagnose") return Scale::Diagnose;
  throw SpecError("InvalidSpec", std::string(field) + ": value \"" + std::string(s) +
                                     "\" is not a scale (use perNode, perNVLinkDomain, "
                                     "wholeSet or diagnose)");
}

std::chrono::seconds parse_timeout(const core::Value& obj, std::string_view field,
                                   std::chrono::seconds fallback,
                                   std::string_view key = "timeout") {
  const core::Value* t = obj.find(key);
  if (t == nullptr || !t->is_string()) return fallback;
  auto d = core::try_parse_duration(t->as_string());
  if (!d || d->count() <= 0)
    throw SpecError("InvalidSpec", std::string(field) + ": value \"" + t->as_string() +
                                       "\" is not a positive duration (e.g. 15m)");
  auto s = std::chrono::duration_cast<std::chrono::seconds>(*d);
  return s.count() < 1 ? std::chrono::seconds(1) : s;
}

void parse_thresholds(const core::Value& obj, std::string_view field, CategoryPlan& plan) {
  const core::Value* th = obj.find("thresholds");
  if (th == nullptr || !th->is_map()) return;
  for (const auto& [metric, expr] : th->as_map()) {
    if (!expr.is_string())
      throw SpecError("InvalidThreshold",
                      std::string(field) + ".thresholds." + metric + ": must be a string");
    plan.threshold_text[metric] = expr.as_string();
  }
  // Compiled one by one so the message names the metric and the expression that broke.
  for (const auto& [metric, expr] : plan.threshold_text) {
    try {
      (void)ThresholdSet::compile({{metric, expr}});
    } catch (const core::InvalidInput& e) {
      throw SpecError("InvalidThreshold", std::string(field) + ".thresholds." + metric +
                                              ": expression \"" + expr +
                                              "\" is rejected: " + e.what());
    }
  }
  plan.thresholds = ThresholdSet::compile(plan.threshold_text);
}

std::chrono::seconds parse_max_duration(const core::Value& spec) {
  return parse_timeout(spec, "spec.maxDuration", std::chrono::seconds(0), "maxDuration");
}

int int_field(const core::Value& obj, std::string_view key) {
  const core::Value* v = obj.find(key);
  return v != nullptr && v->is_int() ? static_cast<int>(v->as_int()) : 0;
}

}  // namespace

std::string_view spec_scale_name(Scale s) noexcept {
  switch (s) {
    case Scale::PerNode: return "perNode";
    case Scale::NvlinkDomain: return "perNVLinkDomain";
    case Scale::WholeSet: return "wholeSet";
    case Scale::Diagnose: return "diagnose";
  }
  return "perNode";
}

RunSpec parse_certification_spec(const core::Value& spec, const Catalog& catalog) {
  RunSpec rs;
  rs.targets = parse_targets(spec);
  rs.max_duration = parse_max_duration(spec);
  const core::Value* cats = spec.find("categories");
  if (cats == nullptr || !cats->is_list() || cats->as_list().empty())
    throw SpecError("InvalidSpec", "spec.categories is empty (name at least one catalog id)");
  for (std::size_t i = 0; i < cats->size(); ++i) {
    const core::Value& c = (*cats)[i];
    std::string field = "spec.categories[" + std::to_string(i) + "]";
    CategoryPlan plan;
    plan.name = std::string(c.get_string({"name"}));
    const WorkloadTemplate* t = catalog.find(plan.name);
    if (t == nullptr)
      throw SpecError("InvalidSpec", field + ".name: \"" + plan.name +
                                         "\" is not in the catalog (see docs/certify.md)");
    plan.workload = *t;
    plan.scale = t->scale;
    if (const core::Value* s = c.find("scale"); s != nullptr && s->is_string())
      plan.scale = parse_scale(s->as_string(), field + ".scale");
    plan.nodes_per_job = int_field(c, "nodesPerJob");
    plan.iterations = int_field(c, "iterations");
    plan.timeout = parse_timeout(c, field + ".timeout", t->timeout);
    if (const core::Value* e = c.find("expectTransport"); e != nullptr) {
      const std::string at = field + ".expectTransport";
      if (t->output != OutputKind::Nccl)
        throw SpecError("InvalidSpec", at + ": applies to NCCL categories only (" + plan.name +
                                           " does not run nccl-tests)");
      try {
        plan.workload.transport =
            parse_transport_expectation(e->is_string() ? e->as_string() : std::string{}, at);
      } catch (const core::InvalidInput& err) {
        throw SpecError("InvalidSpec", err.what());
      }
    }
    parse_thresholds(c, field, plan);
    rs.categories.push_back(std::move(plan));
  }
  return rs;
}

RunSpec parse_workload_run_spec(const core::Value& spec) {
  RunSpec rs;
  rs.targets = parse_targets(spec);
  rs.max_duration = parse_max_duration(spec);
  CategoryPlan plan;
  plan.name = "workload";
  WorkloadTemplate& w = plan.workload;
  w.id = "workload";
  w.name = "workload";
  w.category = "workload";
  w.output = OutputKind::Result;
  w.image = std::string(spec.get_string({"image"}));
  if (w.image.empty()) throw SpecError("InvalidSpec", "spec.image is empty (name the image)");
  if (const core::Value* cmd = spec.find("command"); cmd != nullptr && cmd->is_list())
    for (const auto& a : cmd->as_list()) w.command.push_back(a.as_string());
  if (const core::Value* args = spec.find("args"); args != nullptr && args->is_list())
    for (const auto& a : args->as_list()) plan.args.push_back(a.as_string());
  if (const core::Value* env = spec.find("env"); env != nullptr && env->is_list())
    for (const auto& e : env->as_list())
      w.env[std::string(e.get_string({"name"}))] = std::string(e.get_string({"value"}));
  w.max_concurrent_jobs = 64;
  plan.scale = spec.get_string({"scale"}) == "wholeSet" ? Scale::WholeSet : Scale::PerNode;
  w.scale = plan.scale;
  w.mpi = plan.scale == Scale::WholeSet;
  plan.nodes_per_job = int_field(spec, "nodesPerJob");
  plan.timeout = parse_timeout(spec, "spec.timeout", std::chrono::seconds(600));
  if (const core::Value* g = spec.find("gpusPerNode"); g != nullptr && g->is_int())
    plan.gpus_per_node = static_cast<int>(g->as_int());
  w.retries = int_field(spec, "retries");
  if (w.retries < 0 || w.retries > 5)
    throw SpecError("InvalidSpec", "spec.retries: " + std::to_string(w.retries) +
                                       " is outside 0..5 (set how often a failed run is repeated)");
  plan.result_file = std::string(spec.get_string({"resultFile"}));
  parse_thresholds(spec, "spec", plan);
  rs.categories.push_back(std::move(plan));
  return rs;
}

}  // namespace gpufleet::certify
