// Claims on the cluster's DisruptionBudget: the lock between the controllers that take nodes
// away (hostpkg's node starts, sentinel's reboots, resets and new-node validations; two sets'
// passes; two replicas during a lease hand-over). Each counts nodes out from its own cache,
// which lags the API by a watch event: two decisions in the same instant would both see room.
// A claim closes that window: before acting, a controller adds {node, domain, holder, since,
// rv} to one shared object, written with its resourceVersion as precondition, counting
// claims ∪ the nodes out in its own view (a node counted once); a 409 re-reads and recounts.
//
// One object for the whole cluster (the Lease kDisruptionClaimsName in the controllers'
// namespace), not one per domain: the total limit is cluster-wide, so every claim writes a
// cluster-wide object anyway; one object makes that one write instead of two, and leaves no
// per-domain objects to collect at 5,000 nodes.
//
// Claims are never released explicitly (that would cost a write per node): a claim is dropped
// by whoever writes next once it is dead, and ignored when counting before that:
//  - its node is out in the reader's view: alive (the disruption is visible anyway);
//  - its node is not out, and the reader's copy of the Node is newer than `rv` (the Node's
//    resourceVersion the claimer decided on): dead. The claimer's action either happened and
//    is over, or never happened: hostpkg's cordon carries `rv` as precondition, so a Node that
//    changed first refuses it;
//  - otherwise alive for `grace` after `since` (the claimer's cordon may not have reached this
//    reader's cache yet; a claimer killed between claim and cordon holds its slot that long).
// This file is the pure logic (no client); controller/disruption_reservation.h talks to the
// API.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::kube {

inline constexpr std::string_view kDisruptionClaimsName = "gpufleet-disruption-claims";
inline constexpr std::string_view kDisruptionClaimsAnnotation = "gpufleet.io/disruption-claims";
// Live claims never exceed the total limit; dead ones go at each write. The bound keeps the
// annotation (256 KiB for all of an object's annotations) safe even at maxUnavailable 100%.
inline constexpr std::size_t kMaxDisruptionClaims = 1500;
inline constexpr std::int64_t kDefaultClaimGraceSeconds = 30;

struct DisruptionClaim {
  std::string node;
  std::string domain;      // the topology label's value ("" without a key or a label)
  std::string holder;      // "HostPackageSet/<set>", "Sentinel/<incident>"
  std::int64_t since = 0;  // unix seconds, the claimer's clock
  std::string rv;          // the Node's resourceVersion the claimer decided on
  friend bool operator==(const DisruptionClaim&, const DisruptionClaim&) = default;
};

// The annotation's text: a JSON list of {node, domain, holder, since, rv}. Throws
// core::InvalidInput naming the field, the value and the fix (someone edited it by hand).
std::vector<DisruptionClaim> parse_disruption_claims(std::string_view text);
std::string disruption_claims_text(const std::vector<DisruptionClaim>& claims);

// What the caller's cache shows of a claimed node.
struct ClaimedNodeView {
  bool present = false;  // the cache has the Node
  bool out = false;      // out by kube/api/disruption.h's definition
  std::string rv;        // the cached Node's resourceVersion
};
using ClaimedNodeLookup = std::function<ClaimedNodeView(std::string_view node)>;

// Whether a claim still holds its slot, by the rules at the top of this file.
bool claim_alive(const DisruptionClaim& c, const ClaimedNodeView& view, std::int64_t now,
                 std::int64_t grace_seconds);

struct ClaimRequest {
  std::string node;
  std::string domain;
  std::string holder;
  std::string rv;
};

// A node the caller counts as out (its own rule: sentinel leaves out nodes held only by its
// own waiting incidents, whose actions are claims when they go).
struct CountedNode {
  std::string name;
  std::string domain;
};

struct ClaimLimits {
  std::int64_t total = INT64_MAX;   // maxUnavailable resolved
  std::int64_t domain = INT64_MAX;  // per domain (INT64_MAX without a topology key)
};

struct ClaimDecision {
  std::vector<DisruptionClaim> claims;  // dead ones dropped, granted ones added
  std::vector<bool> granted;            // per request
  std::vector<std::string> why;         // per request: why not ("" when granted)
  bool changed = false;                 // claims differ from the input: write them
};

// Decides requests in order: each goes when the nodes out (`counted` ∪ live claims, each node
// once, the request's own node included) stay within both limits with it; a granted request
// counts for the next. A node already claimed by the same holder is granted again, without a
// change unless the request's rv differs (the claim then takes it, and `since` restarts).
// Requests past kMaxDisruptionClaims are refused.
ClaimDecision decide_claims(const std::vector<DisruptionClaim>& current,
                            const std::vector<ClaimRequest>& requests,
                            const std::vector<CountedNode>& counted, const ClaimLimits& limits,
                            const ClaimedNodeLookup& lookup, std::int64_t now,
                            std::int64_t grace_seconds);

}  // namespace gpufleet::kube
