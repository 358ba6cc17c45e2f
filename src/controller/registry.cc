#include "controller/registry.h"

#include "core/errors.h"
#include "kube/api/names.h"

namespace gpufleet::controller {

std::string Context::setting(const std::string& key, const std::string& fallback) const {
  auto it = settings.find(key);
  return it == settings.end() ? fallback : it->second;
}

Registry& Registry::global() {
  static Registry r;
  return r;
}

void Registry::add(Definition d) {
  if (std::string why = kube::check_dns_label(d.name); !why.empty())
    throw core::InvalidInput("controller name \"" + d.name + "\": " + why);
  if (!d.setup) throw core::InvalidInput("controller " + d.name + ": no setup function");
  if (defs_.contains(d.name))
    throw core::InvalidInput("controller " + d.name + " is registered twice");
  std::string name = d.name;
  defs_.emplace(std::move(name), std::move(d));
}

const Definition* Registry::find(const std::string& name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<const Definition*> Registry::all() const {
  std::vector<const Definition*> out;
  for (const auto& [name, d] : defs_) out.push_back(&d);
  return out;
}

std::vector<const Definition*> Registry::select(const std::string& list) const {
  std::vector<const Definition*> out;
  std::string known;
  for (const auto& [name, d] : defs_) known += (known.empty() ? "" : ", ") + name;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) continue;
    const Definition* d = find(name);
    if (d == nullptr) {
      throw core::InvalidInput("--controllers: unknown controller \"" + name +
                               "\"; known: " + known);
    }
    bool dup = false;
    for (const Definition* o : out) dup |= o == d;
    if (!dup) out.push_back(d);
  }
  if (out.empty()) throw core::InvalidInput("--controllers is empty; known: " + known);
  return out;
}

void Registry::check_settings(const std::vector<const Definition*>& selected,
                              const std::map<std::string, std::string>& settings) {
  for (const auto& [key, value] : settings) {
    bool ok = false;
    std::string accepted;
    for (const Definition* d : selected) {
      for (const auto& [k, help] : d->settings) {
        ok |= k == key;
        accepted += (accepted.empty() ? "" : ", ") + k;
      }
    }
    if (!ok) {
      throw core::InvalidInput("--set " + key + "=" + value +
                               ": not a setting of the selected controllers; accepted: " +
                               (accepted.empty() ? "(none)" : accepted));
    }
  }
}

}  // namespace gpufleet::controller
