// What one pass knows about each Node (the observe step of rollout_pass.cc), read from the
// compact cache without building a Value: labels (only the keys the pass reads), readiness,
// cordon and its gpufleet owners, boot ID, the runtime-required taint, every set's record
// text and the HostPackageDrifted condition. Internal to the hostpkg controller.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hostpkg/controller/node_condition.h"
#include "hostpkg/selector.h"
#include "kube/api/compact.h"

namespace gpufleet::hostpkg::detail {

struct NodeScan {
  std::string name;
  Labels labels;  // moved into the pass's NodeInput once read (see observe_nodes)
  bool ready = false;
  bool unschedulable = false;
  std::vector<std::string> owners;  // gpufleet cordon owners
  std::string boot_id;
  std::string created;
  bool runtime_taint = false;
  std::map<std::string, std::string, std::less<>> records;  // set -> annotation text
  NodeDriftCondition drift_condition;                       // kDriftCondition as shown now
};

// The label keys a pass reads: only those are copied out of the cache (a simulated node has
// ~25 labels; copying them all for 5,000 nodes set the controller's peak memory). A selector
// evaluated over the kept labels gives the same answer, since every key it names is kept.
// Any new reader of node labels in a pass must add its keys here.
using LabelKeys = std::set<std::string, std::less<>>;

void add_keys(LabelKeys& keys, const LabelSelector& sel);

// `keys` null: every label.
NodeScan scan_node(const kube::CompactObject& o, const LabelKeys* keys);

// hostpkg is among the node's cordon owners.
bool owned(const NodeScan& n);

// The state of a record text without a full parse, for other sets' records (hot path).
bool text_in_state(std::string_view text, std::string_view state);

// `set`'s record on the node says Done at `target` (read from the text, as above).
bool record_done_at(const NodeScan& n, std::string_view set, std::string_view target);

}  // namespace gpufleet::hostpkg::detail
