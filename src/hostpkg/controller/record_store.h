// Where the per-node record lives: one annotation per set on the Node itself,
// `hostpkg.gpufleet.io/record.<set>`, holding the record as compact JSON (node_record.h).
//
// Why the Node: the record must survive controller restarts and the set's deletion (so an
// annotation on the set, or an object the set owns, would not do), it is read on every
// planning pass for every node (the controller already caches Nodes, so it costs no extra
// watch), and it can be written in the same request as the cordon or uncordon that goes with
// it (one API write per transition instead of two). Every write is a JSON merge patch that
// carries the Node's metadata.resourceVersion: the API server refuses it with 409 Conflict if
// anyone changed the Node since it was read, so two writers can never clobber each other's
// record (optimistic concurrency; the loser re-reads and re-plans). The record's own
// `generation` is bumped by every write as well, for people and tools reading it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/value.h"
#include "hostpkg/node_record.h"

namespace gpufleet::hostpkg {

inline constexpr std::string_view kRecordPrefix = "hostpkg.gpufleet.io/record.";

// "hostpkg.gpufleet.io/record.<set>" (set names are at most 40 characters, see the CRD, so
// the key's name part stays within the 63 characters Kubernetes allows).
std::string record_annotation(std::string_view set);

// The set's record on `node`: record null and error empty when the node has none; a record
// that cannot be read comes back as an error naming the annotation and the field.
RecordRead read_record(const core::Value& node, std::string_view set);
// The same from the annotation text.
RecordRead parse_record_text(std::string_view set, std::string_view text);

// A merge patch writing `record` (generation bumped from the one read) with the Node's
// resourceVersion as precondition. `base` may already hold a patch (a cordon patch from
// kube/api/cordon.h) to send in the same request; it is extended.
core::Value record_patch(const core::Value& node, std::string_view set, NodeRecord record,
                         core::Value base = core::Value::map());

// A merge patch removing the set's record (not used by the rollout: records are kept; only
// `gpufleet hostpkg forget` style tooling and tests drop them).
core::Value record_removal_patch(const core::Value& node, std::string_view set);

}  // namespace gpufleet::hostpkg
