#include "recipe/inputs.h"

#include <algorithm>
#include <filesystem>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/file_reader.h"
#include "core/text.h"
#include "core/yaml.h"

namespace gpufleet::recipe {

using core::FieldReader;
using core::Value;

namespace {

constexpr std::string_view kApiVersion = "gpufleet.io/v1alpha1";

void check_header(FieldReader& top, std::string_view kind) {
  std::string api = top.required_string("apiVersion", "write apiVersion: gpufleet.io/v1alpha1");
  if (api != kApiVersion) {
    top.fail("apiVersion", Value(api), "is not supported",
             "write apiVersion: gpufleet.io/v1alpha1");
  }
  std::string k = top.required_string("kind", "write kind: " + std::string(kind));
  if (k != kind)
    top.fail("kind", Value(k), "is not " + std::string(kind), "write kind: " + std::string(kind));
}

std::vector<std::string> string_list(FieldReader& r, std::string_view key) {
  std::vector<std::string> out;
  const Value* v = r.get(key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_list()) r.fail(key, *v, "is not a list", "write a list of names, e.g. [a, b]");
  const core::List& list = v->as_list();
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].if_string()) {
      core::fail_field(r.source(), r.field(key) + "[" + std::to_string(i) + "]",
                       "is " + core::describe_value(list[i]) + ", not a name", "write a string");
    }
    out.push_back(*list[i].if_string());
  }
  return out;
}

// The criteria block: {service, accelerator, os, intent, platform, nodes, pools, mixins,
// external}. Values are checked against the library when the recipe resolves; here only
// their shape.
CriteriaInput read_criteria(FieldReader r) {
  CriteriaInput in;
  in.origin = r.source();
  for (std::size_t d = 0; d < kDimensions; ++d) {
    std::string_view key = kDimensionNames[d];
    const Value* v = r.get(key);  // marks the key known, so "fields here" lists them all
    if (v == nullptr) continue;
    if (!v->if_string() || v->if_string()->empty()) {
      r.fail(key, *v, "is not a criterion value",
             "write one of the values `gpufleet recipe list` prints, or any");
    }
    in.values[d] = *v->if_string();
    in.where[d] = core::located(r.source(), r.field(key)) + ": " + r.field(key);
  }
  if (r.get("nodes") != nullptr) {
    in.nodes = r.integer("nodes", std::nullopt, 1, 1'000'000, "write the GPU node count, e.g. 16");
  }
  if (const Value* pools = r.get("pools"); pools && !pools->is_null()) {
    if (!pools->is_list()) {
      r.fail("pools", *pools, "is not a list",
             "write pools: [{name: train, accelerator: gb200, nodes: 18}]");
    }
    std::vector<PoolQuery> out;
    const core::List& list = pools->as_list();
    for (std::size_t i = 0; i < list.size(); ++i) {
      FieldReader p(list[i], r.source(), r.field("pools") + "[" + std::to_string(i) + "]");
      PoolQuery q;
      q.name = p.required_string("name", "give the pool a name, e.g. name: train");
      try {
        parse_pool_flag(q.name + "=x");
      } catch (const core::InvalidInput&) {
        p.fail("name", Value(q.name), "is not a pool name",
               "use lower-case letters, digits and '-'");
      }
      q.accelerator =
          p.required_string("accelerator", "name the pool's GPU, e.g. accelerator: h100");
      if (p.has("nodes")) {
        q.node_count =
            p.integer("nodes", std::nullopt, 1, 1'000'000, "write the pool's node count");
      }
      Value sel(p.string_map("nodeSelector"));
      if (!sel.as_map().empty()) q.node_selector = std::move(sel);
      p.done();
      out.push_back(std::move(q));
    }
    in.pools = std::move(out);
    in.pools_origin = r.source();
  }
  if (r.get("mixins") != nullptr) in.mixins = string_list(r, "mixins");
  for (const std::string& name : string_list(r, "external")) {
    in.external[name] = "named external in " + r.source();
  }
  r.done();
  return in;
}

std::string resolve_path(const std::string& base_dir, const std::string& p) {
  if (p.empty() || base_dir.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

std::string read(const std::string& flag, const std::string& path) {
  try {
    return core::read_file(path);
  } catch (const core::InvalidInput& e) {
    throw core::InvalidInput(flag + ": " + e.what());
  }
}

}  // namespace

CriteriaInput input_from_detected(const DetectedCriteria& d, std::string origin) {
  CriteriaInput in;
  in.origin = std::move(origin);
  for (std::size_t dim = 0; dim < kDimensions; ++dim) {
    if (d.query.criteria[dim] != kAny) {
      in.values[dim] = d.query.criteria[dim];
      in.where[dim] = in.origin + " (detected " + std::string(kDimensionNames[dim]) + ")";
    }
  }
  if (d.query.node_count) in.nodes = d.query.node_count;
  if (!d.query.pools.empty()) {
    in.pools = d.query.pools;
    in.pools_origin = in.origin;
  }
  in.external = d.query.external;
  in.problems = d.problems;
  return in;
}

void layer_criteria(CriteriaInput& base, const CriteriaInput& top) {
  const bool hardware = top.values[kAccelerator].has_value() || top.pools.has_value();
  if (hardware) {
    base.values[kAccelerator].reset();
    base.pools.reset();
    base.nodes.reset();
    base.problems[kAccelerator].clear();
  }
  if (top.nodes && !hardware && base.pools) {
    throw core::InvalidInput(top.origin + ": nodes " + std::to_string(*top.nodes) + " given, but " +
                             base.pools_origin +
                             " describes node pools with different GPUs; give each pool's node "
                             "count with --pool NAME=ACCELERATOR:NODES (or pools in the file)");
  }
  for (std::size_t d = 0; d < kDimensions; ++d) {
    if (!top.values[d]) continue;
    base.values[d] = top.values[d];
    base.where[d] = top.where[d];
    base.problems[d].clear();
  }
  if (top.nodes) base.nodes = top.nodes;
  if (top.pools) {
    base.pools = top.pools;
    base.pools_origin = top.pools_origin.empty() ? top.origin : top.pools_origin;
  }
  if (top.mixins) base.mixins = top.mixins;
  for (const auto& [name, why] : top.external) base.external[name] = why;
  for (std::size_t d = 0; d < kDimensions; ++d) {
    if (!top.problems[d].empty()) base.problems[d] = top.problems[d];
  }
}

void check_criteria_values(const Library& lib, const CriteriaInput& in) {
  for (std::size_t d = 0; d < kDimensions; ++d) {
    if (!in.values[d] || *in.values[d] == kAny) continue;
    const auto& valid = lib.valid[d];
    if (std::find(valid.begin(), valid.end(), *in.values[d]) != valid.end()) continue;
    throw core::InvalidInput(in.where[d] + ": '" + *in.values[d] + "' is not a known " +
                             std::string(kDimensionNames[d]) + "; valid values are " +
                             core::join(valid) + " (or any)");
  }
  if (!in.pools) return;
  const auto& accs = lib.valid[kAccelerator];
  for (const PoolQuery& p : *in.pools) {
    if (std::find(accs.begin(), accs.end(), p.accelerator) != accs.end()) continue;
    throw core::InvalidInput(in.pools_origin + ": pool " + p.name + ": accelerator '" +
                             p.accelerator + "' is not a known accelerator; valid values are " +
                             core::join(accs));
  }
}

Query query_from_input(const CriteriaInput& in) {
  for (std::size_t d = 0; d < kDimensions; ++d) {
    if (!in.problems[d].empty()) throw core::InvalidInput(in.origin + ": " + in.problems[d]);
  }
  Query q;
  for (std::size_t d = 0; d < kDimensions; ++d) {
    if (in.values[d]) q.criteria[d] = *in.values[d];
  }
  q.node_count = in.nodes;
  if (in.pools) q.pools = *in.pools;
  if (in.mixins) q.mixins = *in.mixins;
  q.external = in.external;
  return q;
}

CriteriaInput criteria_file_from_text(std::string_view text, std::string_view source) {
  core::DocumentScope scope(source, text);
  Value doc = core::parse_yaml(text, source);
  FieldReader top(doc, std::string(source), "");
  check_header(top, "Criteria");
  const Value* spec = top.get("spec");
  if (spec == nullptr) {
    core::fail_field(source, "spec", "is required",
                     "write spec: {service: eks, accelerator: h100, ...}");
  }
  top.done();
  return read_criteria(FieldReader(*spec, std::string(source), "spec"));
}

CriteriaInput load_criteria_file(const std::string& path) {
  return criteria_file_from_text(read("--criteria", path), path);
}

RecipeConfig config_from_text(std::string_view text, std::string_view source,
                              const std::string& base_dir) {
  core::DocumentScope scope(source, text);
  Value doc = core::parse_yaml(text, source);
  FieldReader top(doc, std::string(source), "");
  check_header(top, "RecipeConfig");
  const Value* spec_v = top.get("spec");
  if (spec_v == nullptr)
    core::fail_field(source, "spec", "is required", "write spec: {criteria: {...}}");
  top.done();
  FieldReader spec(*spec_v, std::string(source), "spec");
  RecipeConfig c;
  if (const Value* crit = spec.get("criteria"); crit && !crit->is_null()) {
    c.criteria = read_criteria(FieldReader(*crit, std::string(source), "spec.criteria"));
  }
  c.criteria.origin = std::string(source);
  for (const std::string& d : string_list(spec, "data"))
    c.data.push_back(resolve_path(base_dir, d));
  c.recipe = resolve_path(base_dir, spec.string("recipe", ""));
  c.snapshot = resolve_path(base_dir, spec.string("snapshot", ""));
  if (const Value* b = spec.get("bundle"); b && !b->is_null()) {
    FieldReader r(*b, std::string(source), "spec.bundle");
    c.bundle.deployer = r.string("deployer", "");
    c.bundle.output = resolve_path(base_dir, r.string("output", ""));
    c.bundle.repo_url = r.string("repoUrl", "");
    c.bundle.repo_path = r.string("repoPath", "");
    c.bundle.revision = r.string("revision", "");
    c.bundle.argocd_namespace = r.string("argocdNamespace", "");
    c.bundle.flux_namespace = r.string("fluxNamespace", "");
    r.done();
  }
  if (const Value* v = spec.get("validate"); v && !v->is_null()) {
    FieldReader r(*v, std::string(source), "spec.validate");
    c.validate.phases = string_list(r, "phases");
    for (std::size_t i = 0; i < c.validate.phases.size(); ++i) {
      const std::string& ph = c.validate.phases[i];
      if (ph != "readiness" && ph != "deployment" && ph != "performance" && ph != "conformance") {
        core::fail_field(source, "spec.validate.phases[" + std::to_string(i) + "]",
                         "'" + ph + "' is not a phase",
                         "use readiness, deployment, performance or conformance");
      }
    }
    if (r.has("output"))
      c.validate.output = r.one_of("output", std::nullopt, {"table", "json", "ctrf"});
    c.validate.kubeconfig = resolve_path(base_dir, r.string("kubeconfig", ""));
    c.validate.context = r.string("context", "");
    r.done();
  }
  spec.done();
  return c;
}

RecipeConfig load_config(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return config_from_text(read("--config", path), path, dir);
}

}  // namespace gpufleet::recipe
