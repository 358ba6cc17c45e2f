// The decisions of one step of a category (RunReconciler::step_category: observe -> decide ->
// act). The reconciler observes the category's stored state, its groups' Jobs or MPIJobs and
// their pods; these functions decide, from plain values, what the category starts with, when
// a workload is overdue, whether a judged attempt is retried, what a finished category
// concludes and which waiting groups start; the reconciler acts (ConfigMap writes, Events,
// Job creation and deletion). Pure: the clock is an argument, so each decision is unit-tested
// without an API server (tests/certify/category_step_test.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "certify/catalog.h"
#include "certify/isolation_planner.h"
#include "certify/node_selection.h"
#include "certify/run_spec.h"
#include "certify/run_state.h"

namespace gpufleet::certify {

// A category's first state: a node whose device plugin reports fewer GPUs than it has is
// failed at once (HardwareFailure), the others are laid out in groups by the plan's scale
// (diagnose: the isolation planner's first round). `scale`: the one used (diagnose over fewer
// than two nodes runs per node); `runnable`: the nodes laid out.
struct CategoryStart {
  CategoryState state;
  Scale scale = Scale::PerNode;
  std::size_t runnable = 0;
};
CategoryStart start_category_state(const CategoryPlan& plan, const std::vector<NodeInfo>& targets);

// The planner's pending round added to st.groups (the groups it already has are kept).
void add_planner_round(CategoryState& st, const IsolationPlanner& planner);

// Whether a workload that has not finished is overdue: past `limit` (its deadline plus the
// grace) since `since` (its launcher pod's creation, else its own); never without a `since`.
bool overdue(bool finished, std::optional<std::chrono::system_clock::time_point> since,
             std::chrono::system_clock::time_point now, std::chrono::milliseconds limit);

// Why an overdue workload (`kind` `name`, past `limit`) did not end: no MPI operator took it
// (not `acknowledged`), its launcher never started (`no_launcher`: an MPIJob whose workers were
// never all Ready), or its controller stopped updating it.
std::string overdue_message(std::string_view kind, std::string_view name,
                            std::chrono::milliseconds limit, bool acknowledged, bool no_launcher);

// A judged attempt of group g: another attempt (`retry`: g keeps `earlier` and moves to the
// next attempt, an Event says `note`) or the group's `result`, which names the attempts it
// took. `retries`: the template's.
struct AttemptStep {
  bool retry = false;
  std::string earlier;
  std::string note;
  GroupResult result;
};
AttemptStep decide_attempt(const GroupState& g, GroupResult result, int retries);

// What a category whose groups all ended concludes: every node that did not pass with its
// reason (sorted by node; the nodes failed at the start kept), and the phase. With
// `diagnose` (the planner's verdict) a node's reason and message come from the planner and
// the first failed group holding it, every node of an infrastructure finding not otherwise
// failed is failed Infrastructure, and `message` counts the rounds and tests; without it
// each node of a failed group fails with the group.
struct CategoryOutcome {
  std::vector<NodeFailure> failed;
  std::vector<Finding> infrastructure;
  std::optional<std::string> message;
  std::string phase;  // Passed, Failed
};
CategoryOutcome decide_outcome(const CategoryState& st, const IsolationVerdict* diagnose);

// Which of the `waiting` groups start now, as indices in order: at most `max_concurrent`
// workloads (at least 1) run at once counting the `running` ones, and never two on one node
// (`busy`: the nodes of the running ones; a node's GPUs run one workload, and two half-placed
// indexed Jobs would wait on each other).
std::vector<std::size_t> groups_to_start(const std::vector<const GroupState*>& waiting,
                                         std::set<std::string> busy, int running,
                                         int max_concurrent);

}  // namespace gpufleet::certify
