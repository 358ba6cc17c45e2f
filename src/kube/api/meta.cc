#include "kube/api/meta.h"

#include "core/time.h"
#include "kube/api/resource.h"

namespace gpufleet::kube {

using core::Value;

namespace resources {
ResourceId nodes() { return {"", "v1", "nodes", false}; }
ResourceId pods() { return {"", "v1", "pods", true}; }
ResourceId namespaces() { return {"", "v1", "namespaces", false}; }
ResourceId config_maps() { return {"", "v1", "configmaps", true}; }
ResourceId events() { return {"events.k8s.io", "v1", "events", true}; }
ResourceId leases() { return {"coordination.k8s.io", "v1", "leases", true}; }
ResourceId jobs() { return {"batch", "v1", "jobs", true}; }
ResourceId deployments() { return {"apps", "v1", "deployments", true}; }
ResourceId pod_disruption_budgets() { return {"policy", "v1", "poddisruptionbudgets", true}; }
ResourceId service_accounts() { return {"", "v1", "serviceaccounts", true}; }
ResourceId custom_resource_definitions() {
  return {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
}
}  // namespace resources

std::string_view name_of(const Value& obj) noexcept { return obj.get_string({"metadata", "name"}); }
std::string_view namespace_of(const Value& obj) noexcept {
  return obj.get_string({"metadata", "namespace"});
}
std::string_view resource_version_of(const Value& obj) noexcept {
  return obj.get_string({"metadata", "resourceVersion"});
}
std::string_view uid_of(const Value& obj) noexcept { return obj.get_string({"metadata", "uid"}); }

std::string object_key(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string k;
  k.reserve(ns.size() + name.size() + 1);
  k.append(ns).append("/").append(name);
  return k;
}

std::string object_key(const Value& obj) { return object_key(namespace_of(obj), name_of(obj)); }

std::pair<std::string_view, std::string_view> split_object_key(std::string_view key) noexcept {
  auto slash = key.find('/');
  if (slash == std::string_view::npos) return {std::string_view{}, key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s) {
  auto t = core::Timestamp::try_parse_rfc3339(s);
  if (!t) return std::nullopt;
  // system_clock counts nanoseconds in 64 bits: it spans 1678..2262. Times outside clamp.
  if (t->seconds > 9'000'000'000LL) return std::chrono::system_clock::time_point::max();
  if (t->seconds < -9'000'000'000LL) return std::chrono::system_clock::time_point::min();
  return t->to_time_point();
}

}  // namespace gpufleet::kube
