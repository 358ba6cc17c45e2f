#include "kube/api/meta.h"

#include <cstdio>
#include <ctime>

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
  int y, mo, d, h, mi, sec;
  char tail[64] = {};
  std::string str(s.substr(0, 63));
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%63s", &y, &mo, &d, &h, &mi, &sec, tail) <
      6) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  std::time_t t = timegm(&tm);
  // system_clock counts nanoseconds in 64 bits: it ends in 2262. Later times clamp to its end.
  if (t > 9'000'000'000LL) return std::chrono::system_clock::time_point::max();
  auto tp = std::chrono::system_clock::from_time_t(t);
  std::string_view rest(tail);
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    long long frac = 0;
    int digits = 0;
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') {
      if (digits < 9) {
        frac = frac * 10 + (rest.front() - '0');
        ++digits;
      }
      rest.remove_prefix(1);
    }
    while (digits < 9) {
      frac *= 10;
      ++digits;
    }
    tp += std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::nanoseconds(frac));
  }
  if (rest == "Z" || rest == "z" || rest.empty()) return tp;
  int oh = 0, om = 0;
  char sign = rest.front();
  if ((sign == '+' || sign == '-') &&
      std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d", &oh, &om) == 2) {
    auto offset = std::chrono::hours(oh) + std::chrono::minutes(om);
    return sign == '+' ? tp - offset : tp + offset;
  }
  return std::nullopt;
}

}  // namespace gpufleet::kube
