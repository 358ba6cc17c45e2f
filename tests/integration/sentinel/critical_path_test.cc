// The fault -> cordon path (issue 29.6): the cordon is sentinel's only write before the node is
// out; the breaker's admission rides in the same patch (the quarantine record), and the
// Remediation, its status, the Event and the breaker's save follow off the worker. A crash
// right after the cordon must lose nothing: the incident is created on the next start and the
// breaker counts the quarantine, so the threshold still holds.
#include "sentinel_fixture.h"

#include "core/json.h"
#include "kube/api/cordon.h"

namespace gpufleet::sentinel {
namespace {

class CriticalPathTest : public SentinelTest {
 protected:
  // The policy's status.breaker.uniqueNodes reaches `want` within 20 s.
  bool breaker_counts(std::int64_t want) {
    const bool ok = wait_until(
        [&] {
          auto p = client_->get(api::sentinel_policies(), "", policy_);
          const core::Value* u = p.get({"status", "breaker", "uniqueNodes"});
          return u != nullptr && u->is_int() && u->as_int() == want;
        },
        20s);
    if (!ok) ADD_FAILURE() << core::to_json(client_->get(api::sentinel_policies(), "", policy_));
    return ok;
  }
};

TEST_F(CriticalPathTest, ACrashRightAfterTheCordonLosesNeitherTheIncidentNorTheBreakerCount) {
  create_policy(
      "  drain: {enabled: false}\n  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 2, windowSeconds: 600}\n");
  const std::string a = node("a"), b = node("b"), c = node("c");
  // What a controller killed just after its cordon patch leaves: the Node out with its record
  // (incident named, admission recorded), no Remediation, no breaker save.
  const std::string incident = a + "-crash";
  core::Value rec = core::Value::map();
  rec["cordoned"] = true;
  rec["taints"] = core::Value::list();
  rec["entities"].push_back("xid/GPU-0");
  rec["incident"] = incident;
  rec["policy"] = policy_;
  rec["admittedAtMs"] =
      static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  core::Value patch;
  patch["spec"]["unschedulable"] = true;
  patch["metadata"]["annotations"][std::string(kube::kCordonOwnersAnnotation)] = "sentinel";
  patch["metadata"]["annotations"][std::string(kQuarantineAnnotation)] = core::to_json(rec);
  client_->patch(kube::resources::nodes(), "", a, kube::PatchType::Merge, patch);
  health(a, {{"xid/GPU-0", "Fatal"}});

  start_manager();
  // The incident the record names is created, and the breaker counts the node.
  ASSERT_TRUE(wait_until(
      [&] { return client_->try_get(api::remediations(), "", incident).has_value(); }, 20s));
  ASSERT_TRUE(breaker_counts(1));
  EXPECT_EQ(incidents(a).size(), 1u);

  // One more is admitted; the third is refused: the crashed quarantine still counts.
  health(b, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(b, "Validating"));
  health(c, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_until([&] { return !node_events(c, "QuarantineRefused").empty(); }, 20s));
  EXPECT_EQ(phase(c), "");
  EXPECT_FALSE(kube::node::unschedulable(get_node(c)));

  // The record of b carries its admission, written with the cordon.
  const QuarantineRecord rb = QuarantineRecord::from_node(get_node(b));
  EXPECT_EQ(rb.admission.policy, policy_);
  EXPECT_GT(rb.admission.at_ms, 0);
}

// A controller stopped with follow-ups in flight (every quarantine of a burst cordoned, some
// incidents not yet written) finishes them on the next start: one incident per node, each with
// its status, the breaker counting each node once.
TEST_F(CriticalPathTest, AStopWithFollowUpsInFlightEndsWithOneCompleteIncidentPerNode) {
  create_policy(
      "  drain: {enabled: false}\n  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 100, windowSeconds: 600}\n");
  std::vector<std::string> ns;
  for (int i = 0; i < 12; ++i) ns.push_back(node("n" + std::to_string(i)));
  start_manager();
  for (const auto& n : ns) health(n, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_until([&] { return kube::node::unschedulable(get_node(ns[0])); }, 20s));
  stop_manager();  // as soon as the first node is out: the rest of the burst is mid-way
  start_manager();
  for (const auto& n : ns) {
    ASSERT_TRUE(wait_phase(n, "Validating")) << n;
    EXPECT_EQ(incidents(n).size(), 1u) << n;
    EXPECT_TRUE(kube::node::unschedulable(get_node(n))) << n;
  }
  ASSERT_TRUE(breaker_counts(12));
}

}  // namespace
}  // namespace gpufleet::sentinel
