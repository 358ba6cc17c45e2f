// The per-node record: what hostpkg has installed on one node for one HostPackageSet and how
// far the node is in the current change. It is the source of truth (not the set's status),
// so it survives controller restarts and set deletion. The controller stores it with
// optimistic concurrency: every write names the generation it read, and a write against a
// newer generation is a conflict to re-plan from, never a merge.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "core/value.h"
#include "hostpkg/spec.h"

namespace gpufleet::hostpkg {

// What one package left on the host. Kept even when the package leaves the set, so a
// removed package can still be uninstalled (or reported as kept) later.
struct InstalledPackage {
  std::string version;
  std::string image;
  std::map<std::string, std::string> config_hashes;  // configMap key -> content hash
  bool uninstall_supported = false;
  Interrupt interrupt;  // what its uninstall needs
  // The env and resources its stage pods ran with: its uninstall after it left the set has
  // no set entry to take them from. Written only when set (records stay format 1).
  std::map<std::string, std::string> env;
  PodResources resources;
  friend bool operator==(const InstalledPackage&, const InstalledPackage&) = default;
};

enum class NodeState : unsigned char {
  Idle,        // not started in the current rollout (or finished an earlier one)
  InProgress,  // cordoned by hostpkg, stages running
  Done,        // finished the rollout named by `rollout`
  Failed,      // a stage failed; the node stays cordoned for a person to look at
};
std::string_view node_state_name(NodeState s) noexcept;

// A failed re-verification (reverify.h): which package's check failed, what it said, and since
// when the node has been drifted (Unix seconds; kept while later checks keep failing).
struct Drift {
  std::string package;
  std::string message;
  std::int64_t since = 0;
  friend bool operator==(const Drift&, const Drift&) = default;
};

struct NodeRecord {
  static constexpr std::int64_t kFormat = 1;

  std::string set;              // HostPackageSet name
  std::int64_t generation = 0;  // bumped by every accepted write
  std::map<std::string, InstalledPackage> installed;
  // Accumulated by completed steps and delivered once by the interrupt stage: this is what
  // makes "one interrupt per change" survive a controller restart between steps.
  Interrupt pending_interrupt;
  std::set<std::string> pending_post;  // packages whose post-interrupt check is still due
  bool interrupted = false;            // this change's interrupt has been delivered

  // Rollout bookkeeping, all relative to one change (`rollout` = the set's target hash).
  NodeState state = NodeState::Idle;
  std::string rollout;
  std::int64_t batch = -1;  // batch the node was started in
  std::int64_t epoch = 0;   // reset epoch the node was started under
  std::string boot_id;      // boot ID before a reboot, to confirm the reboot happened
  std::string failure;      // Failed: "<package>/<stage>: <reason>"
  // When the node was started in this change (Unix seconds; 0: unknown). The protected-pod
  // wait is measured from it, so a restarted controller keeps the same deadline.
  std::int64_t started = 0;
  // The ValidationRequest the node waits on before its uncordon (spec.validation), named
  // before it is created so a restarted controller finds it (creating it again is a no-op).
  // Cleared by a completed step (a later change asks again) and by a start. Written only
  // when set (records stay format 1).
  std::string validation;

  // Re-verification (reverify.h). All three are written only when set, so a record of a set
  // without reverify reads the same in a controller that predates them.
  std::int64_t verified = 0;   // when the checks last ran on the node (Unix seconds; 0: never)
  std::optional<Drift> drift;  // the last verification failed
  // Packages onDrift: Reapply sent back through the rollout: the stage planner treats them
  // as not installed, so they are applied again (with their config, interrupt and checks).
  std::set<std::string> reapply;

  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

core::Value record_to_value(const NodeRecord& r);

// Never throws: a record that cannot be read comes back as an error text naming the field,
// so the planner reports the node instead of stalling the whole rollout on it.
struct RecordRead {
  std::optional<NodeRecord> record;
  std::string error;
};
RecordRead record_from_value(const core::Value& v) noexcept;

class RecordConflict : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Optimistic concurrency for in-process stores and tests: `update` must carry the generation
// of `stored` it was derived from; on success `stored` becomes `update` with the generation
// bumped. Throws RecordConflict (and changes nothing) otherwise.
void commit(NodeRecord& stored, NodeRecord update);

}  // namespace gpufleet::hostpkg
