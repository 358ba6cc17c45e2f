// Mappings turn an event on a watched object into the keys of the objects to reconcile:
// the object itself (for_resource), its controlling owner (owns), or anything a function
// computes, e.g. "a Node -> every set whose selector matches it" (watches).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "controller/reconciler.h"
#include "core/value.h"
#include "kube/api/store.h"

namespace gpufleet::controller {

class Cache;

using MapFunc = std::function<std::vector<Request>(const core::Value& obj)>;

namespace mapping {
// The object's own key.
MapFunc to_self();
// The owner named by the object's ownerReference with controller: true, when that owner is
// of `owner_kind` in API group `owner_group` ("" for the core group). A namespaced owner is
// in the object's namespace (the API forbids cross-namespace owners); a cluster-scoped owner
// has namespace "".
MapFunc to_controller_owner(std::string owner_group, std::string owner_kind, bool owner_namespaced);
// Every object in `owners` whose label selector at `selector_path` (dotted, e.g.
// "spec.nodeSelector") matches the object's labels. Costs one pass over `owners` per event:
// meant for few selecting objects (sets, policies) and many selected ones (Nodes). An owner
// with an absent selector selects nothing (unlike an empty selector {}, which selects all).
MapFunc by_selector(const Cache& owners, std::string selector_path);
// The same over any list of selecting objects (e.g. a filtered view of a cache).
MapFunc by_selector(std::function<std::vector<kube::ObjectPtr>()> list_owners,
                    std::string selector_path);
}  // namespace mapping

}  // namespace gpufleet::controller
