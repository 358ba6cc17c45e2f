#include "agent/plugin.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/errors.h"

namespace gpufleet::agent {
namespace {

// Function-local statics: registrations run during static initialisation of other
// translation units, in an order the language leaves open.
template <typename Factory>
struct Registry {
  std::mutex mu;
  std::map<std::string, Factory, std::less<>> factories;
};
Registry<MonitorFactory>& monitors() {
  static Registry<MonitorFactory> r;
  return r;
}
Registry<HostStepFactory>& steps() {
  static Registry<HostStepFactory> r;
  return r;
}

template <typename Factory>
void add(Registry<Factory>& r, const char* what, std::string name, Factory f) {
  std::lock_guard lock(r.mu);
  if (name.empty() || !f || !r.factories.emplace(name, std::move(f)).second) {
    // Two plug-ins under one name is a build mistake; it must not pass unnoticed.
    std::fprintf(stderr, "gpufleet agent: %s '%s' registered twice or empty\n", what, name.c_str());
    std::abort();
  }
}

template <typename Factory>
std::vector<std::string> names(Registry<Factory>& r) {
  std::lock_guard lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [n, f] : r.factories) out.push_back(n);
  return out;
}

template <typename Factory>
const Factory& find(Registry<Factory>& r, const char* what, std::string_view name) {
  std::lock_guard lock(r.mu);
  if (auto it = r.factories.find(name); it != r.factories.end()) return it->second;
  std::string known;
  for (const auto& [n, f] : r.factories) known += (known.empty() ? "" : ", ") + n;
  throw core::InvalidInput(std::string(what) + " '" + std::string(name) +
                           "' is not registered; known: " + (known.empty() ? "(none)" : known));
}

}  // namespace

std::filesystem::path NodeContext::host_path(std::string_view absolute) const {
  std::string_view rel = absolute;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return host_root / rel;
}

MonitorRegistration::MonitorRegistration(std::string name, MonitorFactory factory) {
  add(monitors(), "monitor", std::move(name), std::move(factory));
}
HostStepRegistration::HostStepRegistration(std::string name, HostStepFactory factory) {
  add(steps(), "host step", std::move(name), std::move(factory));
}
std::vector<std::string> monitor_names() { return names(monitors()); }
std::vector<std::string> host_step_names() { return names(steps()); }
const MonitorFactory& monitor_factory(std::string_view name) {
  return find(monitors(), "monitor", name);
}
const HostStepFactory& host_step_factory(std::string_view name) {
  return find(steps(), "host step", name);
}

}  // namespace gpufleet::agent
