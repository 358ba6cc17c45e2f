#include "kube/api/disruption.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/text.h"
#include "kube/api/cordon.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::kube {
namespace {

using core::InvalidInput;

constexpr std::string_view kSource = "DisruptionBudget";

std::string show(const core::Value& v) { return core::describe_value(v); }

}  // namespace

std::int64_t IntOrPercent::resolve(std::int64_t total) const noexcept {
  if (!percent) return value;
  if (total <= 0 || value <= 0) return 0;
  return (total * value + 99) / 100;
}

std::string IntOrPercent::to_string() const { return std::to_string(value) + (percent ? "%" : ""); }

IntOrPercent parse_int_or_percent(const core::Value& v, std::string_view field) {
  const std::string f(field);
  if (v.is_int()) {
    if (v.as_int() < 0)
      throw InvalidInput(f + ": " + show(v) + " is negative; give a node count >= 0 (e.g. 5)");
    return IntOrPercent{false, v.as_int()};
  }
  if (const std::string* s = v.if_string()) {
    std::string_view t = *s;
    std::int64_t n = -1;
    if (t.size() >= 2 && t.back() == '%') {
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size() - 1, n);
      if (ec != std::errc() || p != t.data() + t.size() - 1) n = -1;
    }
    if (n < 0 || n > 100) {
      throw InvalidInput(f + ": " + core::quoted(t) +
                         " is not a percentage from 0% to 100%; give a node count (5) or a "
                         "percentage (\"10%\")");
    }
    return IntOrPercent{true, n};
  }
  throw InvalidInput(f + ": " + show(v) +
                     " is neither a node count nor a percentage; give 5 or \"10%\"");
}

std::int64_t DisruptionBudgetSpec::domain_limit() const noexcept {
  return topology_key.empty() ? INT64_MAX : max_per_domain;
}

DisruptionBudgetSpec parse_disruption_budget(const core::Value& object) {
  std::string_view name = name_of(object);
  if (name != kDisruptionBudgetName) {
    throw InvalidInput("metadata.name: " + core::quoted(name) +
                       " is not allowed: the DisruptionBudget is one per cluster; name it "
                       "\"default\" (edit that one instead of adding another)");
  }
  const core::Value* spec = object.find("spec");
  if (spec == nullptr || !spec->is_map())
    throw InvalidInput("spec: required; give at least spec.maxUnavailable (5 or \"10%\")");
  core::check_keys(spec->as_map(), {"maxUnavailable", "topologyKey", "maxUnavailablePerDomain"},
                   kSource, "spec");
  DisruptionBudgetSpec out;
  const core::Value* max = spec->find("maxUnavailable");
  if (max == nullptr || max->is_null())
    throw InvalidInput("spec.maxUnavailable: required; give a node count (5) or \"10%\"");
  out.max_unavailable = parse_int_or_percent(*max, "spec.maxUnavailable");
  if (const core::Value* k = spec->find("topologyKey"); k != nullptr && !k->is_null()) {
    if (!k->is_string() || k->as_string().empty()) {
      throw InvalidInput("spec.topologyKey: " + show(*k) +
                         " is not a label key; give one such as topology.kubernetes.io/rack");
    }
    out.topology_key = k->as_string();
  }
  if (const core::Value* d = spec->find("maxUnavailablePerDomain"); d != nullptr && !d->is_null()) {
    if (!d->is_int() || d->as_int() < 1) {
      throw InvalidInput("spec.maxUnavailablePerDomain: " + show(*d) +
                         " is not a node count >= 1; give 1 or more");
    }
    if (out.topology_key.empty()) {
      throw InvalidInput("spec.maxUnavailablePerDomain: " + show(*d) +
                         " needs spec.topologyKey (the label whose values are the domains); "
                         "add it or remove maxUnavailablePerDomain");
    }
    out.max_per_domain = d->as_int();
  }
  return out;
}

bool incident_open(std::string_view phase) noexcept {
  // Failed keeps sentinel's cordon, which counts by itself; a person's uncordon hands it back.
  return phase != "Released" && phase != "Failed" && phase != "Cancelled";
}

bool record_holds(std::string_view text, bool hostpkg_cordon_held) noexcept {
  // The record is compact JSON written by hostpkg; a substring test avoids parsing 5,000
  // records per pass.
  if (text.find("\"state\":\"InProgress\"") != std::string_view::npos) return true;
  return hostpkg_cordon_held && text.find("\"state\":\"Failed\"") != std::string_view::npos;
}

NodeOutFacts node_out_facts(const core::Value& node, std::string_view topology_key, bool incident) {
  NodeOutFacts f;
  f.name = std::string(name_of(node));
  if (!topology_key.empty()) f.domain = std::string(label_of(node, topology_key));
  f.ready = node::ready(node);
  f.unschedulable = node::unschedulable(node);
  f.incident = incident;
  const core::Value* ann = node.get({"metadata", "annotations"});
  if (ann == nullptr || !ann->is_map()) return f;
  if (const core::Value* o = ann->find(kCordonOwnersAnnotation); o != nullptr && o->is_string()) {
    for (std::string_view part : core::split_trimmed(o->as_string(), ','))
      if (!part.empty()) f.owners.emplace_back(part);
  }
  const bool hostpkg_held =
      std::find(f.owners.begin(), f.owners.end(), "hostpkg") != f.owners.end();
  for (const core::MapEntry& e : ann->as_map()) {
    if (!e.key.starts_with(kHostPkgRecordPrefix) || !e.value.is_string()) continue;
    if (record_holds(e.value.as_string(), hostpkg_held))
      f.hostpkg_sets.push_back(e.key.substr(kHostPkgRecordPrefix.size()));
  }
  std::sort(f.hostpkg_sets.begin(), f.hostpkg_sets.end());
  return f;
}

NodeOutFacts node_out_facts(const CompactObject& node, std::string_view topology_key,
                            bool incident) {
  NodeOutFacts f;
  CompactView root = node.root();
  f.name = std::string(node.name());
  f.incident = incident;
  if (!topology_key.empty())
    f.domain = std::string(root.get_string({"metadata", "labels", topology_key}));
  if (auto u = root.get({"spec", "unschedulable"}))
    f.unschedulable = u->bool_value().value_or(false);
  f.ready = false;
  if (auto conds = root.get({"status", "conditions"}); conds && conds->is_list()) {
    conds->for_each_element([&](CompactView c) {
      if (c.get_string({"type"}) == "Ready") f.ready = c.get_string({"status"}) == "True";
    });
  }
  auto ann = root.get({"metadata", "annotations"});
  if (!ann || !ann->is_map()) return f;
  for (std::string_view part : core::split_trimmed(ann->get_string({kCordonOwnersAnnotation}), ','))
    if (!part.empty()) f.owners.emplace_back(part);
  const bool hostpkg_held =
      std::find(f.owners.begin(), f.owners.end(), "hostpkg") != f.owners.end();
  ann->for_each_entry([&](std::string_view k, CompactView v) {
    auto text = v.string();
    if (!text || !k.starts_with(kHostPkgRecordPrefix)) return;
    if (record_holds(*text, hostpkg_held))
      f.hostpkg_sets.emplace_back(k.substr(kHostPkgRecordPrefix.size()));
  });
  std::sort(f.hostpkg_sets.begin(), f.hostpkg_sets.end());
  return f;
}

std::vector<std::string> out_holders(const NodeOutFacts& n) {
  std::vector<std::string> h;
  for (const auto& s : n.hostpkg_sets) h.push_back("HostPackageSet/" + s);
  const bool sentinel_owner =
      std::find(n.owners.begin(), n.owners.end(), "sentinel") != n.owners.end();
  if (n.incident || (n.unschedulable && sentinel_owner)) h.emplace_back("Sentinel");
  if (n.unschedulable) {
    for (const auto& o : n.owners) {
      // hostpkg's share is named by its sets; a share no record explains still counts.
      if (o == "sentinel" || (o == "hostpkg" && !n.hostpkg_sets.empty())) continue;
      h.push_back("CordonOwner/" + o);
    }
    if (n.owners.empty()) h.emplace_back("Cordoned");
  }
  if (!n.ready) h.emplace_back("NotReady");
  return h;
}

void OutTally::add(const NodeOutFacts& n) {
  ++nodes;
  if (!is_out(n)) return;
  ++out;
  auto it = domain_out.find(n.domain);
  if (it == domain_out.end())
    domain_out.emplace(n.domain, 1);
  else
    ++it->second;
}

std::int64_t OutTally::out_in(std::string_view domain) const {
  auto it = domain_out.find(domain);
  return it == domain_out.end() ? 0 : it->second;
}

core::Value budget_status(const DisruptionBudgetSpec& spec,
                          const std::vector<NodeOutFacts>& nodes) {
  struct Holder {
    std::int64_t count = 0;
    std::vector<std::string> names;  // sorted sample, at most kStatusNamesPerHolder
  };
  OutTally tally;
  std::map<std::string, Holder> holders;
  std::map<std::string, std::set<std::string>, std::less<>> domain_holders;
  for (const NodeOutFacts& n : nodes) {
    tally.add(n);
    if (!is_out(n)) continue;
    for (std::string& h : out_holders(n)) {
      Holder& e = holders[h];
      ++e.count;
      // Keep the smallest names, so the sample does not depend on the scan order.
      auto pos = std::lower_bound(e.names.begin(), e.names.end(), n.name);
      if (e.names.size() < kStatusNamesPerHolder || pos != e.names.end()) {
        e.names.insert(pos, n.name);
        if (e.names.size() > kStatusNamesPerHolder) e.names.pop_back();
      }
      if (!spec.topology_key.empty()) {
        auto& d = domain_holders[n.domain];
        if (d.size() < 10) d.insert(std::move(h));
      }
    }
  }
  core::Value s = core::Value::map();
  s["nodes"] = tally.nodes;
  s["maxUnavailable"] = spec.total_limit(tally.nodes);
  s["unavailable"] = tally.out;
  core::Value hl = core::Value::list();
  std::int64_t holders_omitted = 0;
  for (const auto& [name, h] : holders) {
    if (hl.size() >= kStatusHolders) {
      ++holders_omitted;
      continue;
    }
    core::Value e = core::Value::map();
    e["holder"] = name;
    e["nodes"] = h.count;
    core::Value names = core::Value::list();
    for (const auto& n : h.names) names.push_back(n);
    e["nodeNames"] = std::move(names);
    e["omitted"] = h.count - static_cast<std::int64_t>(h.names.size());
    hl.push_back(std::move(e));
  }
  s["holders"] = std::move(hl);
  s["holdersOmitted"] = holders_omitted;
  if (!spec.topology_key.empty()) {
    // The fullest domains first (they are what blocks), then by name.
    std::vector<std::pair<std::int64_t, std::string_view>> order;
    for (const auto& [d, c] : tally.domain_out) order.emplace_back(-c, d);
    std::sort(order.begin(), order.end());
    core::Value dl = core::Value::list();
    std::int64_t full = 0;
    for (const auto& [neg, d] : order) {
      if (-neg >= spec.max_per_domain) ++full;
      if (dl.size() >= kStatusDomains) continue;
      core::Value e = core::Value::map();
      e["domain"] = std::string(d);
      e["unavailable"] = -neg;
      e["max"] = spec.max_per_domain;
      core::Value hs = core::Value::list();
      if (auto it = domain_holders.find(d); it != domain_holders.end())
        for (const auto& h : it->second) hs.push_back(h);
      e["holders"] = std::move(hs);
      dl.push_back(std::move(e));
    }
    s["domains"] = std::move(dl);
    s["domainsAtLimit"] = full;
    s["domainsOmitted"] = static_cast<std::int64_t>(order.size()) -
                          std::min<std::int64_t>(static_cast<std::int64_t>(order.size()),
                                                 static_cast<std::int64_t>(kStatusDomains));
  }
  return s;
}

}  // namespace gpufleet::kube
