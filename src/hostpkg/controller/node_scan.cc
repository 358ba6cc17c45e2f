#include "hostpkg/controller/node_scan.h"

#include <algorithm>

#include "core/text.h"
#include "hostpkg/controller/reconciler.h"
#include "hostpkg/controller/record_store.h"
#include "kube/api/cordon.h"

namespace gpufleet::hostpkg::detail {

void add_keys(LabelKeys& keys, const LabelSelector& sel) {
  for (const auto& r : sel.requirements()) keys.insert(r.key);
}

NodeScan scan_node(const kube::CompactObject& o, const LabelKeys* keys) {
  NodeScan n;
  kube::CompactView root = o.root();
  n.name = std::string(o.name());
  n.created = std::string(root.get_string({"metadata", "creationTimestamp"}));
  if (auto labels = root.get({"metadata", "labels"}); labels && labels->is_map()) {
    labels->for_each_entry([&](std::string_view k, kube::CompactView v) {
      if (keys != nullptr && !keys->contains(k)) return;
      if (auto s = v.string()) n.labels.emplace(std::string(k), std::string(*s));
    });
  }
  if (auto ann = root.get({"metadata", "annotations"}); ann && ann->is_map()) {
    ann->for_each_entry([&](std::string_view k, kube::CompactView v) {
      auto s = v.string();
      if (!s) return;
      if (k == kube::kCordonOwnersAnnotation) {
        for (std::string_view part : core::split_trimmed(*s, ','))
          if (!part.empty()) n.owners.emplace_back(part);
      } else if (k.starts_with(kRecordPrefix)) {
        n.records.emplace(std::string(k.substr(kRecordPrefix.size())), std::string(*s));
      }
    });
  }
  if (auto u = root.get({"spec", "unschedulable"}))
    n.unschedulable = u->bool_value().value_or(false);
  if (auto taints = root.get({"spec", "taints"}); taints && taints->is_list()) {
    taints->for_each_element([&](kube::CompactView t) {
      if (t.get_string({"key"}) == kRuntimeRequiredTaint) n.runtime_taint = true;
    });
  }
  if (auto conds = root.get({"status", "conditions"}); conds && conds->is_list()) {
    conds->for_each_element([&](kube::CompactView c) {
      std::string_view type = c.get_string({"type"});
      if (type == "Ready") {
        n.ready = c.get_string({"status"}) == "True";
      } else if (type == kDriftCondition) {
        n.drift_condition = {true, std::string(c.get_string({"status"})),
                             std::string(c.get_string({"reason"})),
                             std::string(c.get_string({"message"})),
                             std::string(c.get_string({"lastTransitionTime"}))};
      }
    });
  }
  n.boot_id = std::string(root.get_string({"status", "nodeInfo", "bootID"}));
  return n;
}

bool owned(const NodeScan& n) {
  return std::find(n.owners.begin(), n.owners.end(), kOwner) != n.owners.end();
}

bool text_in_state(std::string_view text, std::string_view state) {
  std::string needle = "\"state\":\"" + std::string(state) + "\"";
  return text.find(needle) != std::string_view::npos;
}

bool record_done_at(const NodeScan& n, std::string_view set, std::string_view target) {
  auto it = n.records.find(set);
  return it != n.records.end() && text_in_state(it->second, "Done") &&
         it->second.find(target) != std::string::npos;
}

}  // namespace gpufleet::hostpkg::detail
