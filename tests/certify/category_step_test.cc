// The category step's decisions (category_step.h), without an API server: how a category's
// groups are laid out, when a workload is overdue and what its verdict says, whether a judged
// attempt is retried, what a finished category concludes, and which waiting groups start.
#include "certify/category_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet::certify {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::system_clock;

NodeInfo gpu_node(std::string name, std::string clique = "", int gpus = 8, int allocatable = 8) {
  NodeInfo n;
  n.name = std::move(name);
  n.clique = std::move(clique);
  n.gpu_count = gpus;
  n.gpu_allocatable = allocatable;
  return n;
}

std::vector<std::vector<std::string>> group_nodes(const CategoryState& st) {
  std::vector<std::vector<std::string>> out;
  for (const auto& g : st.groups) out.push_back(g.nodes);
  return out;
}

GroupState group(std::uint32_t id, std::vector<std::string> nodes,
                 std::optional<GroupResult> result = std::nullopt) {
  GroupState g;
  g.id = id;
  g.nodes = std::move(nodes);
  g.result = std::move(result);
  return g;
}

GroupResult failure(std::string reason, std::string message) {
  GroupResult r;
  r.passed = false;
  r.reason = std::move(reason);
  r.message = std::move(message);
  return r;
}

TEST(CategoryStep, PerNodeGroupsAndAShortOfGpusNodeFailsAtOnce) {
  CategoryPlan plan;
  plan.name = "diagnostics/dcgm-r2";
  plan.scale = Scale::PerNode;
  CategoryStart s =
      start_category_state(plan, {gpu_node("a"), gpu_node("b", "", 8, 7), gpu_node("c")});
  EXPECT_EQ(s.scale, Scale::PerNode);
  EXPECT_EQ(s.runnable, 2u);
  EXPECT_EQ(s.state.name, "diagnostics/dcgm-r2");
  EXPECT_EQ(s.state.phase, "Running");
  EXPECT_THAT(group_nodes(s.state), ElementsAre(ElementsAre("a"), ElementsAre("c")));
  ASSERT_EQ(s.state.groups.size(), 2u);
  EXPECT_EQ(s.state.groups[0].id, 1u);
  EXPECT_EQ(s.state.groups[1].id, 2u);
  EXPECT_EQ(s.state.groups[0].purpose, "perNode");
  ASSERT_EQ(s.state.failed.size(), 1u);
  EXPECT_EQ(s.state.failed[0].node, "b");
  EXPECT_EQ(s.state.failed[0].reason, "HardwareFailure");
  EXPECT_EQ(s.state.failed[0].message,
            "allocatable nvidia.com/gpu is 7 of 8 GPUs (a GPU is unhealthy or gone)");
  EXPECT_TRUE(s.state.planner.is_null());
}

TEST(CategoryStep, WholeSetAndNvlinkDomainGroupsAreChunked) {
  CategoryPlan plan;
  plan.scale = Scale::WholeSet;
  plan.nodes_per_job = 2;
  const std::vector<NodeInfo> nodes = {gpu_node("a", "x"), gpu_node("b", "y"), gpu_node("c", "x"),
                                       gpu_node("d"), gpu_node("e", "x")};
  CategoryStart whole = start_category_state(plan, nodes);
  EXPECT_THAT(group_nodes(whole.state),
              ElementsAre(ElementsAre("a", "b"), ElementsAre("c", "d"), ElementsAre("e")));
  EXPECT_EQ(whole.state.groups[0].purpose, "wholeSet");

  plan.scale = Scale::NvlinkDomain;
  CategoryStart domains = start_category_state(plan, nodes);
  // Domains sorted by their members; a node without a clique is a domain of its own.
  EXPECT_THAT(group_nodes(domains.state), ElementsAre(ElementsAre("a", "c"), ElementsAre("e"),
                                                      ElementsAre("b"), ElementsAre("d")));
  EXPECT_EQ(domains.state.groups[0].purpose, "perNVLinkDomain");

  plan.nodes_per_job = 0;  // no split
  plan.scale = Scale::WholeSet;
  EXPECT_THAT(group_nodes(start_category_state(plan, nodes).state),
              ElementsAre(ElementsAre("a", "b", "c", "d", "e")));
}

TEST(CategoryStep, DiagnoseStartsThePlannerAndFallsBackToPerNodeUnderTwoNodes) {
  CategoryPlan plan;
  plan.scale = Scale::Diagnose;
  CategoryStart one = start_category_state(plan, {gpu_node("a"), gpu_node("b", "", 8, 2)});
  EXPECT_EQ(one.scale, Scale::PerNode);
  EXPECT_TRUE(one.state.planner.is_null());
  EXPECT_THAT(group_nodes(one.state), ElementsAre(ElementsAre("a")));

  std::vector<NodeInfo> nodes;
  for (int i = 0; i < 16; ++i) nodes.push_back(gpu_node("n" + std::to_string(i)));
  CategoryStart diag = start_category_state(plan, nodes);
  EXPECT_EQ(diag.scale, Scale::Diagnose);
  EXPECT_EQ(diag.runnable, 16u);
  EXPECT_FALSE(diag.state.planner.is_null());
  EXPECT_EQ(diag.state.rounds, 1);
  ASSERT_FALSE(diag.state.groups.empty());
  std::size_t screened = 0;
  for (const auto& g : diag.state.groups) {
    EXPECT_EQ(g.purpose, "screen");
    EXPECT_EQ(g.round, 1);
    screened += g.nodes.size();
  }
  EXPECT_EQ(screened, 16u);
  // The stored planner resumes at the same round: adding it again adds no group.
  const std::size_t groups = diag.state.groups.size();
  add_planner_round(diag.state, IsolationPlanner::from_value(diag.state.planner));
  EXPECT_EQ(diag.state.groups.size(), groups);
}

TEST(CategoryStep, OverdueOnlyPastTheLimitOfAnUnfinishedWorkloadWithAStart) {
  const Clock::time_point now = Clock::now();
  const std::chrono::milliseconds limit = std::chrono::seconds(600) + std::chrono::minutes(2);
  EXPECT_TRUE(overdue(false, now - limit - std::chrono::seconds(1), now, limit));
  EXPECT_FALSE(overdue(false, now - limit, now, limit));
  EXPECT_FALSE(overdue(true, now - 2 * limit, now, limit));
  EXPECT_FALSE(overdue(false, std::nullopt, now, limit));
}

TEST(CategoryStep, OverdueMessageNamesWhatDidNotHappen) {
  const std::chrono::milliseconds limit = std::chrono::seconds(720);
  EXPECT_EQ(overdue_message("MPIJob", "r-0-1", limit, false, true),
            "MPIJob r-0-1 got no condition from an MPI operator within 720 s: is the "
            "mpi-operator running? (or set certify.launcher=job)");
  EXPECT_EQ(overdue_message("MPIJob", "r-0-1", limit, true, true),
            "MPIJob r-0-1 started no launcher within 720 s: its workers were never all Ready "
            "(GPUs in use, an image pull failing?)");
  EXPECT_EQ(overdue_message("Job", "r-0-1", limit, true, false),
            "Job r-0-1 did not end within 720 s (its controller stopped updating it?)");
}

TEST(CategoryStep, NoiseIsRetriedWithinTheBudgetAndTheResultNamesItsAttempts) {
  GroupState g = group(3, {"a", "b"});
  AttemptStep first = decide_attempt(g, failure("WorkloadFailed", "pod evicted"), 2);
  EXPECT_TRUE(first.retry);
  EXPECT_EQ(first.earlier, "WorkloadFailed: pod evicted");
  EXPECT_EQ(first.note, "group 3 (a, b): WorkloadFailed: pod evicted; attempt 2 of 3");

  g.earlier.push_back(first.earlier);
  g.attempt = 2;
  GroupResult ok;
  ok.passed = true;
  AttemptStep second = decide_attempt(g, ok, 2);
  EXPECT_FALSE(second.retry);
  EXPECT_TRUE(second.result.passed);
  EXPECT_EQ(second.result.attempts, 2);
  EXPECT_EQ(second.result.message, "attempt 2 of 3 (attempt 1: WorkloadFailed: pod evicted)");

  // Evidence about the hardware is never retried; the budget ends retries.
  AttemptStep hw = decide_attempt(group(1, {"a"}), failure("ThresholdViolated", "slow"), 2);
  EXPECT_FALSE(hw.retry);
  EXPECT_EQ(hw.result.reason, "ThresholdViolated");
  EXPECT_EQ(hw.result.message, "slow");
  EXPECT_EQ(hw.result.attempts, 1);
  g.attempt = 3;
  g.earlier.push_back("WorkloadFailed: again");
  AttemptStep used_up = decide_attempt(g, failure("WorkloadFailed", "third"), 2);
  EXPECT_FALSE(used_up.retry);
  EXPECT_EQ(used_up.result.attempts, 3);
  EXPECT_EQ(used_up.result.message, "third; attempt 3 of 3 (attempt 2: WorkloadFailed: again)");
}

TEST(CategoryStep, OutcomeWithoutThePlannerFailsEveryNodeOfAFailedGroup) {
  CategoryState st;
  st.failed.push_back({"z", "HardwareFailure", "short of GPUs"});
  GroupResult ok;
  ok.passed = true;
  st.groups.push_back(group(1, {"c", "a"}, failure("ThresholdViolated", "busBandwidth 10")));
  st.groups.push_back(group(2, {"b"}, failure("WorkloadFailed", "crashed")));
  st.groups.push_back(group(3, {"d"}, ok));
  CategoryOutcome out = decide_outcome(st, nullptr);
  EXPECT_EQ(out.phase, "Failed");
  EXPECT_FALSE(out.message.has_value());
  EXPECT_TRUE(out.infrastructure.empty());
  ASSERT_EQ(out.failed.size(), 4u);
  EXPECT_EQ(out.failed[0].node, "a");
  EXPECT_EQ(out.failed[0].reason, "ThresholdViolated");
  EXPECT_EQ(out.failed[0].message,
            "group of 2 nodes failed (scale diagnose names the node): busBandwidth 10");
  EXPECT_EQ(out.failed[1].node, "b");
  EXPECT_EQ(out.failed[1].message, "crashed");
  EXPECT_EQ(out.failed[2].node, "c");
  EXPECT_EQ(out.failed[3].node, "z");
  EXPECT_EQ(out.failed[3].reason, "HardwareFailure");

  CategoryState clean;
  clean.groups.push_back(group(1, {"a"}, ok));
  CategoryOutcome passed = decide_outcome(clean, nullptr);
  EXPECT_EQ(passed.phase, "Passed");
  EXPECT_TRUE(passed.failed.empty());
}

TEST(CategoryStep, OutcomeOfDiagnoseTakesThePlannersVerdictAndTheFirstFailedGroup) {
  CategoryState st;
  st.groups.push_back(group(1, {"a", "b", "c", "d"}, failure("ThresholdViolated", "slow")));
  st.groups.push_back(group(2, {"a"}, failure("HardwareFailure", "xid 79")));
  st.groups.push_back(group(3, {"e"}));  // never ran: no result
  IsolationVerdict v;
  v.rounds = 3;
  v.tests = 9;
  v.nodes.push_back({"a", NodeVerdict::Faulty, 2, 0, "failed 1 confirmation test(s)"});
  v.nodes.push_back({"b", NodeVerdict::Healthy, 1, 2, "passed 2 group test(s)"});
  v.nodes.push_back({"e", NodeVerdict::Unresolved, 0, 0, "undecided after 3 rounds"});
  v.nodes.push_back({"f", NodeVerdict::Healthy, 0, 1, ""});
  v.infrastructure.push_back({{"a", "f"}, "the link between a and f is faulty"});
  CategoryOutcome out = decide_outcome(st, &v);
  EXPECT_EQ(out.phase, "Failed");
  EXPECT_EQ(out.message, "3 rounds, 9 tests");
  ASSERT_EQ(out.infrastructure.size(), 1u);
  EXPECT_THAT(out.infrastructure[0].nodes, ElementsAre("a", "f"));
  ASSERT_EQ(out.failed.size(), 3u);
  EXPECT_EQ(out.failed[0].node, "a");
  EXPECT_EQ(out.failed[0].reason, "ThresholdViolated");  // the first failed group holding it
  EXPECT_EQ(out.failed[0].message, "failed 1 confirmation test(s); slow");
  EXPECT_EQ(out.failed[1].node, "e");
  EXPECT_EQ(out.failed[1].reason, "WorkloadFailed");
  EXPECT_EQ(out.failed[1].message, "undecided after 3 rounds");
  EXPECT_EQ(out.failed[2].node, "f");  // a is failed already: its own verdict stays
  EXPECT_EQ(out.failed[2].reason, "Infrastructure");
  EXPECT_EQ(out.failed[2].message, "the link between a and f is faulty");
}

TEST(CategoryStep, GroupsStartUpToTheLimitAndNeverTwoOnANode) {
  const GroupState g1 = group(1, {"a", "b"}), g2 = group(2, {"b", "c"}), g3 = group(3, {"d"}),
                   g4 = group(4, {"e"}), g5 = group(5, {"f"});
  const std::vector<const GroupState*> waiting = {&g1, &g2, &g3, &g4, &g5};
  // g2 shares b with g1, which starts first; g4 holds e, busy with a running workload.
  EXPECT_THAT(groups_to_start(waiting, {"e"}, 1, 8), ElementsAre(0u, 2u, 4u));
  // Three may run, one already does.
  EXPECT_THAT(groups_to_start(waiting, {"x"}, 1, 3), ElementsAre(0u, 2u));
  EXPECT_THAT(groups_to_start(waiting, {}, 3, 3), ElementsAre());
  // maxConcurrentJobs below 1 still runs one at a time.
  EXPECT_THAT(groups_to_start(waiting, {}, 0, 0), ElementsAre(0u));
}

}  // namespace
}  // namespace gpufleet::certify
