// The stage planner: from a set's desired packages and one node's record, the stages that
// node still has to run, in order. Pure and recomputed on every reconcile; the record is
// advanced one completed step at a time with record_step_done, so a controller that dies
// between steps re-plans exactly the remaining ones.
//
// Order on a node:
//   1. uninstall packages that left the set (where supported), and installed versions that
//      a downgrade with the uninstallFirst rule replaces; dependents first;
//   2. per package in dependsOn order: apply (new) | upgrade (higher version, or lower with
//      the inPlace rule), then config when the configMap differs from the installed hashes;
//   3. one interrupt, coalesced over every package (reboot > restart all > named restarts,
//      merged), once per change: it is accumulated in the record as steps complete;
//   4. post-interrupt checks of the packages that changed.
// A config-only change runs only the config stage, with only the interrupts of changed keys.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hostpkg/node_record.h"
#include "hostpkg/spec.h"

namespace gpufleet::hostpkg {

// The desired state of a set, digested once per planning pass (config hashes, target hash),
// so per-node planning does no hashing.
struct DesiredState {
  const HostPackageSet* set = nullptr;
  std::vector<std::map<std::string, std::string>> config_hashes;  // per package, by index
  std::vector<std::string> package_config_hash;                   // per package, by index
  std::string target;  // the change id: a hash of every package's version, image and config
};
DesiredState digest(const HostPackageSet& set);

// 16 hex digits of SHA-256: content hashes for change detection and idempotence keys.
std::string short_hash(std::string_view data);

struct PlannedStep {
  std::string package;  // empty for the coalesced interrupt
  Stage stage = Stage::Apply;
  std::string version;       // version the step installs; uninstall: the version removed
  std::string from_version;  // upgrade / downgrade: the installed version
  std::string image;
  // What the stage pod runs with: the package's (an uninstall: what the record kept of it;
  // the interrupt: merged over the packages of the node).
  std::map<std::string, std::string> env;
  PodResources resources;
  std::string config_hash;                // config: hash of the whole desired configMap
  std::vector<std::string> changed_keys;  // config: added, changed and removed keys
  Interrupt interrupt;  // what completing this step adds to the node's pending interrupt
  std::chrono::seconds timeout{600};
  bool downgrade = false;
  // The record generation the step was planned from. It is part of the key, so the same
  // content applied again later (a revert, a re-apply after uninstall) is a new step, while a
  // step re-planned after a crash, before its completion was recorded, keeps its key.
  std::int64_t generation = 0;
  // package/stage/version/config-hash/g<generation>: the step runner skips a step it already
  // completed with this key, which makes re-running a step pod after a crash safe.
  [[nodiscard]] std::string key() const;
  [[nodiscard]] std::string change() const { return "g" + std::to_string(generation); }
};

struct NodePlan {
  std::vector<PlannedStep> steps;    // what remains, in order; steps[0] runs next
  Interrupt interrupt;               // the coalesced interrupt of this change
  std::vector<std::string> blocked;  // why nothing may run (e.g. a refused downgrade)
  std::vector<std::string> kept;     // packages left installed because they cannot uninstall
  [[nodiscard]] bool up_to_date() const noexcept { return steps.empty() && blocked.empty(); }
};

NodePlan plan_node(const DesiredState& desired, const NodeRecord& record);

// What plan_node would conclude, without building the steps: the rollout planner asks this of
// every node on every pass, so it allocates nothing. `reason` is set for Blocked only.
enum class NodeNeed : unsigned char { UpToDate, Work, Blocked };
NodeNeed node_need(const DesiredState& desired, const NodeRecord& record, std::string* reason);

// Applies a completed step to the record (installed versions and hashes, pending interrupt
// and post-interrupt checks). The caller writes the record back with commit() semantics.
void record_step_done(NodeRecord& record, const DesiredState& desired, const PlannedStep& step);

// The node's plan came out empty: it has the set's target. Marks it Done for this rollout.
void mark_node_done(NodeRecord& record, const DesiredState& desired);

}  // namespace gpufleet::hostpkg
