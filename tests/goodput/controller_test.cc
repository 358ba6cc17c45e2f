// The goodput controller's pure parts: the decide step (feed, write-or-not, restart safety,
// retention), ConfigMap names and label values, the retention setting.
#include "goodput/controller.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "kube/api/names.h"

namespace gpufleet::goodput {
namespace {

constexpr std::int64_t T = 1740823200;  // 2025-03-01T10:00:00Z
const JobKey kKey{"train", std::string(kJobLabel), "llama"};

Job job(JobState s, std::vector<std::string> nodes = {"node-a", "node-b"}) {
  Job j;
  j.key = kKey;
  j.pods = {"llama-0", "llama-1"};
  j.nodes = std::move(nodes);
  j.gpus = 16;
  j.state = s;
  j.reports_checkpoints = true;
  return j;
}

InterruptionEvent xid(std::int64_t fault, std::int64_t acted) {
  InterruptionEvent e;
  e.incident = "node-a-m7kq2";
  e.cause = Cause::GpuXid;
  e.node = "node-a";
  e.fault_at = T + fault;
  e.acted_at = T + acted;
  return e;
}

// One pass as the controller makes it: the facts from what the last pass persisted.
JobDecision pass(const std::optional<JobDecision>& last, std::optional<Job> j,
                 std::vector<InterruptionEvent> events, std::int64_t now,
                 std::int64_t retention = kDefaultRetentionSeconds) {
  JobFacts f;
  f.key = kKey;
  f.job = std::move(j);
  f.events = std::move(events);
  if (last) {
    // Through the persisted text, as a restarted controller reads it.
    f.persisted = Ledger::from_value(core::parse_json(last->json), "configmap");
    f.persisted_json = last->json;
    f.persisted_digest = last->digest;
  }
  return decide_job(f, T + now, retention);
}

TEST(GoodputController, FirstPassWritesAndTheSamePodsWriteNothing) {
  const JobDecision a = pass({}, job(JobState::Running), {}, 10);
  EXPECT_TRUE(a.write);
  EXPECT_EQ(a.ledger.state(), JobState::Running);
  EXPECT_FALSE(a.look_again_at);
  // The same pods later: the state holds, nothing is fed, nothing written.
  const JobDecision b = pass(a, job(JobState::Running), {}, 500);
  EXPECT_FALSE(b.write);
  EXPECT_EQ(b.json, a.json);
  EXPECT_EQ(b.ledger.summary(T + 500).wall, 490);
}

TEST(GoodputController, AnXidUnderTheJobIsOneInterruptionHoweverOftenFed) {
  JobDecision d = pass({}, job(JobState::Running), {}, 0);
  d = pass(d, job(JobState::Running), {xid(100, 102)}, 103);  // quarantined, pods still up
  EXPECT_TRUE(d.write);
  ASSERT_TRUE(d.ledger.open());
  d = pass(d, job(JobState::Interrupted), {xid(100, 102)}, 110);  // drained
  d = pass(d, job(JobState::Interrupted, {"node-b"}), {xid(100, 102)}, 115);
  d = pass(d, job(JobState::Running, {"node-b", "node-c"}), {xid(100, 102)}, 130);  // back
  const Summary s = d.ledger.summary(T + 200);
  EXPECT_EQ(s.interruptions, 1);
  EXPECT_EQ(s.of(Cause::GpuXid).interruptions, 1);
  EXPECT_EQ(s.of(Cause::GpuXid).detection, 2);
  EXPECT_EQ(s.of(Cause::GpuXid).drain, 8);
  EXPECT_EQ(s.of(Cause::GpuXid).restart, 20);
  EXPECT_EQ(s.of(Cause::GpuXid).redone, 100);  // no checkpoint yet: the whole run
  EXPECT_EQ(s.lost, 130);
  EXPECT_LT(s.ettr, 1.0);
  // A restarted controller feeds everything again: nothing changes, nothing is written.
  for (int i = 0; i < 3; ++i) {
    const JobDecision again =
        pass(d, job(JobState::Running, {"node-b", "node-c"}), {xid(100, 102)}, 300 + i);
    EXPECT_FALSE(again.write);
    EXPECT_EQ(again.ledger.summary(T + 200).interruptions, 1);
  }
}

TEST(GoodputController, AGangMissingAMemberIsNotRunning) {
  JobDecision d = pass({}, job(JobState::Running), {}, 0);
  d = pass(d, job(JobState::Running), {xid(100, 102)}, 103);
  d = pass(d, job(JobState::Interrupted), {xid(100, 102)}, 110);  // the pod evicted
  Job half = job(JobState::Running, {"node-b"});                  // deleted, not yet replaced
  half.gpus = 8;
  d = pass(d, half, {xid(100, 102)}, 111);
  EXPECT_EQ(d.ledger.state(), JobState::Interrupted);
  d = pass(d, job(JobState::Interrupted, {"node-b"}), {xid(100, 102)}, 112);  // replacement
  d = pass(d, job(JobState::Running, {"node-b", "node-c"}), {xid(100, 102)}, 130);
  const Summary s = d.ledger.summary(T + 130);
  EXPECT_EQ(s.interruptions, 1);
  EXPECT_EQ(s.of(Cause::GpuXid).restart, 20);
  // With no incident open, fewer GPUs is the job's own business (elastic): Running.
  Job smaller = job(JobState::Running, {"node-b"});
  smaller.gpus = 8;
  EXPECT_EQ(pass(d, smaller, {}, 200).ledger.state(), JobState::Running);
}

TEST(GoodputController, AGoneJobIsKeptForItsRetentionThenRemoved) {
  JobDecision d = pass({}, job(JobState::Running), {}, 0);
  d = pass(d, job(JobState::Succeeded), {}, 100);
  EXPECT_EQ(d.ledger.state(), JobState::Succeeded);
  const JobDecision kept = pass(d, std::nullopt, {}, 200, 3600);
  EXPECT_FALSE(kept.write);
  EXPECT_FALSE(kept.remove);
  EXPECT_EQ(kept.look_again_at, T + 100 + 3600);
  const JobDecision gone = pass(d, std::nullopt, {}, 100 + 3600, 3600);
  EXPECT_TRUE(gone.remove);
  EXPECT_FALSE(gone.write);
}

TEST(GoodputController, ConfigMapNamesAreDnsLabelsAndDistinct) {
  const std::string n = ledger_configmap_name(kKey);
  EXPECT_EQ(n.rfind("goodput-train-llama-", 0), 0U) << n;
  EXPECT_EQ(kube::check_dns_label(n), "");
  JobKey other = kKey;
  other.label = "batch.kubernetes.io/job-name";
  EXPECT_NE(ledger_configmap_name(other), n);
  EXPECT_EQ(ledger_configmap_name(kKey), n);  // deterministic
  JobKey long_key{"team-" + std::string(60, 'x'), "", "Pod_Name." + std::string(200, 'y')};
  const std::string ln = ledger_configmap_name(long_key);
  EXPECT_EQ(kube::check_dns_label(ln), "") << ln;
  EXPECT_LE(ln.size(), 63U);
}

TEST(GoodputController, LabelValuesAreSafe) {
  EXPECT_EQ(label_value_safe("llama"), "llama");
  const std::string v = label_value_safe(std::string(100, 'a') + "/x");
  EXPECT_EQ(kube::check_label_value(v), "") << v;
  EXPECT_EQ(kube::check_label_value(label_value_safe("-_-")), "");
}

TEST(GoodputController, Retention) {
  EXPECT_EQ(parse_retention("7d"), 7 * 86400);
  EXPECT_EQ(parse_retention("36h"), 36 * 3600);
  EXPECT_EQ(parse_retention("90m"), 5400);
  try {
    (void)parse_retention("a week");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "goodput.retention: value \"a week\" is not a duration (write whole days like "
              "\"7d\" or a Go duration like \"36h\", at least 1s)");
  }
  EXPECT_THROW((void)parse_retention("0d"), core::InvalidInput);
  EXPECT_THROW((void)parse_retention("-1h"), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::goodput
