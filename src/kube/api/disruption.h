// The cluster's one disruption budget (the DisruptionBudget singleton `default`,
// deploy/crds/disruptionbudget.yaml) and the one definition of a node being "out", shared by
// every controller that takes nodes away (hostpkg's rollouts, sentinel's reboots) and by the
// `budget` controller that reports who holds which nodes out.
//
// A node is out when any of these holds it:
//  - it is cordoned (spec.unschedulable), by a gpufleet component or by anyone else;
//  - it is not Ready;
//  - a hostpkg record on it is InProgress, or Failed while hostpkg still holds its cordon
//    share (a person's uncordon hands a failed node back);
//  - an open sentinel incident (a Remediation labelled with the node, phase not final) names
//    it, even before its cordon lands.
// Nodes are grouped into domains by the value of spec.topologyKey; nodes without the label
// share the domain "" (the safe reading: unknown placement counts together).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "kube/api/compact.h"

namespace gpufleet::kube {

inline constexpr std::string_view kDisruptionBudgetName = "default";
inline constexpr std::string_view kHostPkgRecordPrefix = "hostpkg.gpufleet.io/record.";
inline constexpr std::string_view kIncidentNodeLabel = "sentinel.gpufleet.io/node";

// An int-or-percent node count, read like a PodDisruptionBudget's maxUnavailable: a percent
// of N nodes rounds up (Kubernetes' disruption controller does the same, so "10%" of 15
// nodes is 2), and 0 or "0%" lets nothing out.
struct IntOrPercent {
  bool percent = false;
  std::int64_t value = 0;
  [[nodiscard]] std::int64_t resolve(std::int64_t total) const noexcept;
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const IntOrPercent&, const IntOrPercent&) = default;
};

// Reads 5 or "10%" (0..100 %); throws core::InvalidInput naming `field`, the value and the fix.
IntOrPercent parse_int_or_percent(const core::Value& v, std::string_view field);

struct DisruptionBudgetSpec {
  IntOrPercent max_unavailable{true, 10};
  std::string topology_key;         // "": no per-domain limit
  std::int64_t max_per_domain = 1;  // used only with a topology key
  [[nodiscard]] std::int64_t total_limit(std::int64_t nodes) const noexcept {
    return max_unavailable.resolve(nodes);
  }
  [[nodiscard]] std::int64_t domain_limit() const noexcept;  // INT64_MAX without a key
};

// Reads a whole DisruptionBudget object (its name must be `default`); throws
// core::InvalidInput naming the field, the value and the fix.
DisruptionBudgetSpec parse_disruption_budget(const core::Value& object);

// An incident in this phase still holds its node.
bool incident_open(std::string_view phase) noexcept;
// A hostpkg record (the annotation's JSON text) in this state holds its node out.
bool record_holds(std::string_view record_text, bool hostpkg_cordon_held) noexcept;

// What one node shows; filled from a Node (node_out_facts) or a controller's own scan.
struct NodeOutFacts {
  std::string name;
  std::string domain;  // the topology label's value ("" without it)
  bool ready = true;
  bool unschedulable = false;
  std::vector<std::string> owners;        // gpufleet cordon owners (kube/api/cordon.h)
  std::vector<std::string> hostpkg_sets;  // sets whose record holds the node
  bool incident = false;                  // an open sentinel incident names the node
};

// Reads a Node; `incident`: whether an open incident names it (from the Remediations).
NodeOutFacts node_out_facts(const core::Value& node, std::string_view topology_key, bool incident);
// The same from a cache's compact form (no Value rebuilt: scans of 5,000 Nodes stay cheap).
NodeOutFacts node_out_facts(const CompactObject& node, std::string_view topology_key,
                            bool incident);

// Who holds a node out: "HostPackageSet/<set>", "Sentinel", "CordonOwner/<owner>" (another
// gpufleet component), "Cordoned" (by someone outside gpufleet), "NotReady". Empty: not out.
std::vector<std::string> out_holders(const NodeOutFacts& n);
inline bool is_out(const NodeOutFacts& n) noexcept {
  return !n.ready || n.unschedulable || !n.hostpkg_sets.empty() || n.incident;
}

// Nodes out, total and per domain.
struct OutTally {
  std::int64_t nodes = 0;
  std::int64_t out = 0;
  std::map<std::string, std::int64_t, std::less<>> domain_out;
  void add(const NodeOutFacts& n);
  [[nodiscard]] std::int64_t out_in(std::string_view domain) const;
};

// Bounds of the status written to the object: at 5,000 nodes it stays a few tens of KB.
inline constexpr std::size_t kStatusNamesPerHolder = 20;
inline constexpr std::size_t kStatusHolders = 50;
inline constexpr std::size_t kStatusDomains = 100;

// The object's status (without conditions and observedGeneration): nodes, maxUnavailable
// resolved, unavailable, holders [{holder, nodes, nodeNames, omitted}], domains with nodes
// out [{domain, unavailable, max, holders}], and how many holders and domains were left out.
// Every list is sorted, so the same cluster gives the same bytes (no rewrite when unchanged).
core::Value budget_status(const DisruptionBudgetSpec& spec, const std::vector<NodeOutFacts>& nodes);

}  // namespace gpufleet::kube
