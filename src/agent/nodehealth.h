// The agent's first delivery target: the cluster-scoped NodeHealth object of its node
// (gpufleet.io/v1alpha1, name = node name; schema in deploy/crds/nodehealth.yaml).
//
// Idempotent apply: status.lastAppliedRecordId says how far this node's journal has been
// applied. A redelivered record (id <= that mark) changes nothing, and the status write is a
// compare-and-swap on resourceVersion, so the mark and the state it describes move together.
#pragma once

#include <functional>
#include <span>

#include "agent/agent.h"
#include "api/resources.h"
#include "kube/api/resource.h"
#include "kube/client.h"

namespace gpufleet::agent {

inline const kube::ResourceId& kNodeHealthResource = api::node_healths();

// The record kind monitors emit for a health observation. Payload:
//   {"check": "xid", "state": "Healthy|Warning|Fatal|Unknown", "entity": "GPU-…" (optional),
//    "entityKind": "GPU|NIC|Host|…" (optional), "reason": "Xid79", "message": "…", "time": RFC
//    3339}
// Without an entity the observation is about the check as a whole; with one, the entity's
// state is set and the check's state becomes the worst of its entities'. status.history gets
// an entry only for a transition: a record whose state differs from what the entity (else the
// check) had before, a first sighting included; one that changes only the reason or message
// of the same state updates the entity and adds no entry (escalation rules count entries).
inline constexpr std::string_view kHealthKind = "health";

// Bounds of the status (the CRD enforces the same maxItems).
inline constexpr std::size_t kMaxChecks = 64;
inline constexpr std::size_t kMaxEntities = 64;
inline constexpr std::size_t kMaxHistory = 32;
inline constexpr std::size_t kMaxMessage = 1024;

// Folds records with id > status.lastAppliedRecordId into `status` (a map, possibly empty).
// Returns how many records changed it. Malformed health records are counted in
// status.rejectedRecords (with the last reason in status.lastRejection), never thrown.
std::size_t fold_records(core::Value& status, std::span<const Record> records);

class NodeHealthSink final : public Sink {
 public:
  // Which client a node's writes go through: one for all (a real node's agent), or one per node
  // when each simulated node authenticates as itself (SimPodTokens). May throw, e.g. while a
  // node has no identity yet: the delivery fails and the journal keeps the records.
  using ClientFor = std::function<kube::Client&(const NodeIdentity&)>;
  explicit NodeHealthSink(kube::Client& client, std::string field_manager = "gpufleet-agent");
  explicit NodeHealthSink(ClientFor client_for, std::string field_manager = "gpufleet-agent")
      : client_for_(std::move(client_for)), field_manager_(std::move(field_manager)) {}
  // Creates the node's NodeHealth if missing, then writes the folded status. Throws
  // kube::ApiError (e.g. Forbidden by the identity admission policy) or a transport error.
  std::size_t deliver(const NodeIdentity& node, std::span<const Record> records) override;

 private:
  ClientFor client_for_;
  std::string field_manager_;
};

}  // namespace gpufleet::agent
