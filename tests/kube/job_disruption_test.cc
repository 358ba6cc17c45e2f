#include "kube/api/job_disruption.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace gpufleet::kube {
namespace {

constexpr std::int64_t kNow = 1'700'000'000'000;  // 2023-11-14T22:13:20Z, the fixed clock

struct PodSpec {
  std::string name{};
  std::string node{};
  std::string job = "llama";
  bool opted = false;
  std::string phase = "Running";
  std::string requested{};  // checkpoint-requested
  std::string ack{};        // checkpoint-acknowledged
  std::string last{};       // last-checkpoint
  bool terminating = false;
  bool daemon_set = false;
  std::string label = "goodput.gpufleet.io/job";
  std::string ns = "train";
};

core::Value pod(const PodSpec& s) {
  core::Value p = core::Value::map();
  p["metadata"]["name"] = s.name;
  p["metadata"]["namespace"] = s.ns;
  p["metadata"]["uid"] = "uid-" + s.name;
  if (!s.job.empty()) p["metadata"]["labels"][s.label] = s.job;
  if (s.opted) p["metadata"]["annotations"][kCheckpointContractAnnotation] = "on-request";
  if (!s.requested.empty())
    p["metadata"]["annotations"][kCheckpointRequestedAnnotation] = s.requested;
  if (!s.ack.empty()) p["metadata"]["annotations"][kCheckpointAckAnnotation] = s.ack;
  if (!s.last.empty()) p["metadata"]["annotations"][kLastCheckpointAnnotation] = s.last;
  if (s.terminating) p["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:00Z";
  if (s.daemon_set) {
    core::Value o = core::Value::map();
    o["kind"] = "DaemonSet";
    o["name"] = "ds";
    o["controller"] = true;
    p["metadata"]["ownerReferences"].push_back(std::move(o));
  }
  p["spec"]["nodeName"] = s.node;
  p["status"]["phase"] = s.phase;
  return p;
}

struct Fixture {
  std::vector<core::Value> pods;
  JobDisruptionInput in;
  Fixture() {
    in.node = "n1";
    in.request_id = "inc-1";
    in.checkpoint_timeout_s = 60;
    in.now_ms = kNow;
  }
  std::vector<JobDecision> decide() {
    in.pods.clear();
    for (const auto& p : pods) in.pods.push_back(&p);
    return decide_jobs(in);
  }
};

GangKey llama() { return {"train", "goodput.gpufleet.io/job", "llama"}; }

JobRecord requested(std::int64_t at_ms, std::int64_t deadline_ms) {
  JobRecord r;
  r.key = llama();
  r.request_id = "inc-1";
  r.requested_ms = at_ms;
  r.deadline_ms = deadline_ms;
  return r;
}

std::vector<std::string> names(const std::vector<PodRef>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs) out.push_back(r.name);
  return out;
}

TEST(JobDisruption, GangKeyFollowsTheLabelOrderAndSkipsOwnWorkloads) {
  core::Value p = pod({.name = "a", .node = "n1", .label = "batch.kubernetes.io/job-name"});
  p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "js";
  EXPECT_EQ(gang_key_of(p)->label, "jobset.sigs.k8s.io/jobset-name");
  EXPECT_EQ(gang_key_of(p)->name, "js");
  EXPECT_EQ(gang_index(p), (std::vector<std::string>{"train/jobset.sigs.k8s.io/jobset-name=js"}));
  p["metadata"]["labels"]["gpufleet.io/certify-run"] = "r1";
  EXPECT_FALSE(gang_key_of(p));
  EXPECT_TRUE(gang_index(p).empty());
  EXPECT_FALSE(gang_key_of(pod({.name = "b", .node = "n1", .job = ""})));
}

TEST(JobDisruption, PodsOutsideAMultiPodJobGetNoDecision) {
  Fixture f;
  f.pods = {pod({.name = "solo", .node = "n1", .opted = true}),
            pod({.name = "plain", .node = "n1", .job = ""}),
            pod({.name = "done", .node = "n2", .phase = "Succeeded"})};  // finished: no member
  EXPECT_TRUE(f.decide().empty());
}

TEST(JobDisruption, JobsWithoutAPodOnTheNodeAreLeftAlone) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n2"}), pod({.name = "b", .node = "n3"})};
  EXPECT_TRUE(f.decide().empty());
}

TEST(JobDisruption, DaemonSetPodsAndSystemNamespacesAreNoJobs) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .daemon_set = true}),
            pod({.name = "b", .node = "n2", .daemon_set = true}),
            pod({.name = "c", .node = "n1", .ns = "kube-system"}),
            pod({.name = "d", .node = "n2", .ns = "kube-system"})};
  f.in.skip_namespaces = {"kube-system"};
  EXPECT_TRUE(f.decide().empty());
}

TEST(JobDisruption, AJobWithoutTheContractIsDrainedAsOneUnitAtOnce) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1"}), pod({.name = "b", .node = "n2"}),
            pod({.name = "c", .node = "n3", .terminating = true}),
            pod({.name = "a", .node = "n1"})};  // listed twice (the node's and the gang's)
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::DrainGang);
  EXPECT_EQ(d[0].reason, "NoContract");
  // The node's own pod goes through the node's drain; a terminating pod is already going.
  EXPECT_EQ(names(d[0].evict), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(d[0].held_uids.empty());

  std::vector<JobRecord> records;
  record_decision(records, d[0], f.in);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].disrupted_ms, kNow);
  EXPECT_EQ(records[0].requested_ms, 0);
  EXPECT_EQ(names(records[0].pods), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(JobDisruption, AnOptedInJobIsAskedToCheckpointFirst) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true}),
            pod({.name = "b", .node = "n2", .opted = true})};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::RequestCheckpoint);
  EXPECT_EQ(d[0].request_id, "inc-1");
  EXPECT_EQ(d[0].deadline_ms, kNow + 60'000);
  EXPECT_EQ(names(d[0].annotate), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d[0].held_uids, (std::vector<std::string>{"uid-a"}));
  EXPECT_TRUE(d[0].evict.empty());
  EXPECT_EQ(next_job_deadline(d), kNow + 60'000);

  std::vector<JobRecord> records;
  record_decision(records, d[0], f.in);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].request_id, "inc-1");
  EXPECT_EQ(records[0].requested_ms, kNow);
  EXPECT_EQ(records[0].deadline_ms, kNow + 60'000);
  EXPECT_EQ(records[0].disrupted_ms, 0);
}

TEST(JobDisruption, WaitsUntilTheDeadlineAndAsksPodsTheRequestMissed) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true, .requested = "inc-1"}),
            pod({.name = "b", .node = "n2", .opted = true}),  // a restart cut the annotating off
            pod({.name = "c", .node = "n2", .opted = true, .requested = "inc-0"})};  // older ask
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::Wait);
  EXPECT_EQ(d[0].request_id, "inc-1");
  EXPECT_EQ(d[0].deadline_ms, kNow + 50'000);
  EXPECT_EQ(names(d[0].annotate), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(d[0].held_uids, (std::vector<std::string>{"uid-a"}));
  // A wait records nothing new.
  std::vector<JobRecord> records = f.in.records;
  record_decision(records, d[0], f.in);
  EXPECT_EQ(core::to_json(job_records_value(records)),
            core::to_json(job_records_value(f.in.records)));
}

TEST(JobDisruption, AnotherDisruptionsLiveRequestIsNotOverwritten) {
  Fixture f;
  core::Value other = pod({.name = "b", .node = "n2", .opted = true, .requested = "inc-2"});
  other["metadata"]["annotations"][kCheckpointDeadlineAnnotation] = "2023-11-14T22:14:00Z";
  core::Value expired = pod({.name = "c", .node = "n3", .opted = true, .requested = "inc-3"});
  expired["metadata"]["annotations"][kCheckpointDeadlineAnnotation] = "2023-11-14T22:13:00Z";
  f.pods = {pod({.name = "a", .node = "n1", .opted = true, .requested = "inc-1"}), std::move(other),
            std::move(expired)};
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::Wait);
  // b's request (another node's incident) runs until 22:14:00, after now; c's has expired.
  EXPECT_EQ(names(d[0].annotate), (std::vector<std::string>{"c"}));
}

TEST(JobDisruption, NoCheckpointTimeoutDrainsAtOnce) {
  Fixture f;
  f.in.checkpoint_timeout_s = 0;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true}),
            pod({.name = "b", .node = "n2", .opted = true})};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::DrainGang);
  EXPECT_EQ(d[0].reason, "NoWait");
  EXPECT_TRUE(d[0].annotate.empty());
  EXPECT_EQ(names(d[0].evict), (std::vector<std::string>{"b"}));
  // A request recorded before the policy changed runs to its deadline.
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  EXPECT_EQ(f.decide()[0].action, JobAction::Wait);
}

TEST(JobDisruption, AStaleCheckpointIsNoAnswer) {
  Fixture f;
  // 2023-11-14T22:13:00Z: before the request (22:13:10).
  f.pods = {pod({.name = "a",
                 .node = "n1",
                 .opted = true,
                 .requested = "inc-1",
                 .last = "2023-11-14T22:13:00Z"}),
            pod({.name = "b", .node = "n2", .opted = true, .requested = "inc-1", .ack = "inc-0"})};
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  EXPECT_EQ(f.decide()[0].action, JobAction::Wait);
}

TEST(JobDisruption, ACheckpointAfterTheRequestIsTheAnswer) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true, .requested = "inc-1"}),
            pod({.name = "b",
                 .node = "n2",
                 .opted = true,
                 .requested = "inc-1",
                 .last = "2023-11-14T22:13:15Z"})};
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::DrainGang);
  EXPECT_EQ(d[0].reason, "Acknowledged");
  EXPECT_EQ(names(d[0].evict), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(d[0].held_uids.empty());
  EXPECT_EQ(next_job_deadline(d), 0);

  std::vector<JobRecord> records = f.in.records;
  record_decision(records, d[0], f.in);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].request_id, "inc-1");  // the request stays on the record
  EXPECT_EQ(records[0].requested_ms, kNow - 10'000);
  EXPECT_EQ(records[0].disrupted_ms, kNow);
  EXPECT_EQ(records[0].reason, "Acknowledged");
}

TEST(JobDisruption, TheAckAnnotationIsTheAnswer) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true, .ack = "inc-1"}),
            pod({.name = "b", .node = "n2", .opted = true})};
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  EXPECT_EQ(f.decide()[0].reason, "Acknowledged");
}

TEST(JobDisruption, ThePassedDeadlineEndsTheWait) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true, .requested = "inc-1"}),
            pod({.name = "b", .node = "n2", .opted = true, .requested = "inc-1"})};
  f.in.records = {requested(kNow - 60'000, kNow)};
  auto d = f.decide();
  EXPECT_EQ(d[0].action, JobAction::DrainGang);
  EXPECT_EQ(d[0].reason, "DeadlineExceeded");
  f.in.now_ms = kNow - 1;
  EXPECT_EQ(f.decide()[0].action, JobAction::Wait);
}

TEST(JobDisruption, ADisruptedJobIsNeverDisruptedAgain) {
  Fixture f;
  JobRecord r = requested(kNow - 60'000, kNow);
  r.disrupted_ms = kNow - 5'000;
  r.reason = "Acknowledged";
  r.pods = {
      {"train", "a", "uid-a", "n1"}, {"train", "b", "uid-b", "n2"}, {"train", "c", "uid-c", "n3"}};
  f.in.records = {r};
  core::Value replacement = pod({.name = "b", .node = "n4", .opted = true});
  replacement["metadata"]["uid"] = "uid-b2";  // the Job's new pod under the same name
  f.pods = {pod({.name = "a", .node = "n1", .opted = true}),  // the node's: its drain's
            std::move(replacement),
            pod({.name = "c", .node = "n3", .opted = true}),   // a PDB refused it: again
            pod({.name = "d", .node = "n5", .opted = true})};  // new since: left alone
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::Disrupted);
  EXPECT_EQ(names(d[0].evict), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(d[0].held_uids.empty());
  std::vector<JobRecord> records = f.in.records;
  record_decision(records, d[0], f.in);
  EXPECT_EQ(records[0].pods.size(), 3U);
}

TEST(JobDisruption, ARecordedWaitGoesOnWhenTheGangShrankToOnePod) {
  Fixture f;
  f.pods = {pod({.name = "a", .node = "n1", .opted = true, .requested = "inc-1"})};
  f.in.records = {requested(kNow - 10'000, kNow + 50'000)};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].action, JobAction::Wait);
}

TEST(JobDisruption, OneDecisionPerJobSortedByKey) {
  Fixture f;
  f.pods = {pod({.name = "x1", .node = "n1", .job = "zeta"}),
            pod({.name = "x2", .node = "n2", .job = "zeta"}),
            pod({.name = "y1", .node = "n1", .job = "alpha", .opted = true}),
            pod({.name = "y2", .node = "n1", .job = "alpha", .opted = true})};
  auto d = f.decide();
  ASSERT_EQ(d.size(), 2U);
  EXPECT_EQ(d[0].key.name, "alpha");
  EXPECT_EQ(d[0].action, JobAction::RequestCheckpoint);
  EXPECT_EQ(d[0].held_uids, (std::vector<std::string>{"uid-y1", "uid-y2"}));
  EXPECT_EQ(d[1].key.name, "zeta");
  EXPECT_EQ(d[1].action, JobAction::DrainGang);
}

TEST(JobDisruption, RecordsRoundTripThroughJson) {
  JobRecord r = requested(kNow - 10'000, kNow + 50'000);
  r.disrupted_ms = kNow;
  r.reason = "DeadlineExceeded";
  r.pods = {{"train", "a", "uid-a", "n1"}};
  const core::Value v = job_records_value({r});
  EXPECT_EQ(
      core::to_json(v),
      R"([{"deadline":"2023-11-14T22:14:10.000000Z","disruptedAt":"2023-11-14T22:13:20.000000Z","label":"goodput.gpufleet.io/job","name":"llama","namespace":"train","pods":[{"name":"a","node":"n1","uid":"uid-a"}],"reason":"DeadlineExceeded","requestId":"inc-1","requestedAt":"2023-11-14T22:13:10.000000Z"}])");
  const auto back = read_job_records(&v);
  ASSERT_EQ(back.size(), 1U);
  EXPECT_EQ(back[0].key, r.key);
  EXPECT_EQ(back[0].request_id, "inc-1");
  EXPECT_EQ(back[0].requested_ms, r.requested_ms);
  EXPECT_EQ(back[0].deadline_ms, r.deadline_ms);
  EXPECT_EQ(back[0].disrupted_ms, r.disrupted_ms);
  EXPECT_EQ(back[0].pods, r.pods);
  core::Value bad = core::Value::list();
  bad.push_back(core::Value::map());
  bad.push_back("x");
  EXPECT_TRUE(read_job_records(&bad).empty());
  EXPECT_TRUE(read_job_records(nullptr).empty());
}

TEST(JobDisruption, TheRequestPatchCarriesIdAndDeadline) {
  EXPECT_EQ(
      core::to_json(checkpoint_request_patch("inc-1", kNow)),
      R"({"metadata":{"annotations":{"goodput.gpufleet.io/checkpoint-deadline":"2023-11-14T22:13:20.000000Z","goodput.gpufleet.io/checkpoint-requested":"inc-1"}}})");
}

}  // namespace
}  // namespace gpufleet::kube
