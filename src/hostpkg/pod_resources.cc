#include "hostpkg/pod_resources.h"

#include "core/errors.h"
#include "core/quantity.h"
#include "hostpkg/strict.h"

namespace gpufleet::hostpkg {
namespace {

using core::InvalidInput;
using core::Quantity;

std::map<std::string, std::string> read_quantities(const core::Value* v, const std::string& field) {
  std::map<std::string, std::string> out;
  if (v == nullptr || v->is_null()) return out;
  for (const auto& [name, q] : strict_map(*v, field, {})) {
    if (name.empty())
      throw InvalidInput(field + ": an empty resource name; name the resource, e.g. cpu");
    const std::string f = field + "." + name;
    if (!q.is_string() && !q.is_int() && !q.is_double()) {
      throw InvalidInput(f + ": expected a quantity such as \"100m\" or \"1Gi\", got " +
                         describe(q));
    }
    Quantity parsed = Quantity::from_value(q, f);
    if (parsed.sign() < 0)
      throw InvalidInput(f + ": " + describe(q) + " is negative; use 0 or more");
    out[name] = parsed.to_string();
  }
  return out;
}

}  // namespace

PodResources parse_pod_resources(const core::Value& v, const std::string& field) {
  const core::Map& m = strict_map(v, field, {"requests", "limits"});
  PodResources r;
  r.requests = read_quantities(m.find("requests"), field + ".requests");
  r.limits = read_quantities(m.find("limits"), field + ".limits");
  // The API server refuses such a pod; say so now, before any node is cordoned for it.
  for (const auto& [name, request] : r.requests) {
    auto limit = r.limits.find(name);
    if (limit == r.limits.end()) continue;
    if (Quantity::parse(request) > Quantity::parse(limit->second)) {
      throw InvalidInput(field + ".requests." + name + ": \"" + request +
                         "\" is more than limits." + name + " \"" + limit->second +
                         "\"; a request must not exceed its limit: lower the request or raise "
                         "the limit to at least \"" +
                         request + "\"");
    }
  }
  return r;
}

core::Value pod_resources_to_value(const PodResources& r) {
  core::Value v = core::Value::map();
  auto put = [&v](const char* part, const std::map<std::string, std::string>& values) {
    if (values.empty()) return;
    core::Value m = core::Value::map();
    for (const auto& [name, q] : values) m[name] = q;
    v[part] = std::move(m);
  };
  put("requests", r.requests);
  put("limits", r.limits);
  return v;
}

PodResources merge_pod_resources(const PodResources& a, const PodResources& b) {
  auto larger = [](std::map<std::string, std::string>& into,
                   const std::map<std::string, std::string>& from) {
    for (const auto& [name, q] : from) {
      auto it = into.find(name);
      if (it == into.end() || Quantity::parse(q) > Quantity::parse(it->second)) into[name] = q;
    }
  };
  PodResources out = a;
  larger(out.requests, b.requests);
  larger(out.limits, b.limits);
  for (auto& [name, limit] : out.limits) {
    auto request = out.requests.find(name);
    if (request != out.requests.end() && Quantity::parse(request->second) > Quantity::parse(limit))
      limit = request->second;
  }
  return out;
}

}  // namespace gpufleet::hostpkg
