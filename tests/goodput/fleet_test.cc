// Fleet aggregates: ETTR weighted by GPU-seconds, GPU-hours lost by cause, jobs disrupted per
// incident, node reliability (MTBI, lemons) and reading sentinel's Remediation objects.
#include "goodput/fleet.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::goodput {
namespace {

constexpr std::int64_t T = 1740823200;  // 2025-03-01T10:00:00Z
constexpr std::int64_t kDay = 86400;

Observation obs(std::int64_t dt, JobState s, std::int64_t gpus, std::vector<std::string> nodes) {
  Observation o;
  o.time = T + dt;
  o.state = s;
  o.gpus = gpus;
  o.nodes = std::move(nodes);
  return o;
}

InterruptionEvent event(std::string id, Cause cause, std::string node, std::int64_t fault_dt) {
  InterruptionEvent e;
  e.incident = std::move(id);
  e.cause = cause;
  e.node = std::move(node);
  e.fault_at = T + fault_dt;
  e.acted_at = T + fault_dt;
  return e;
}

// A job on `nodes` running from 0 to 1000, stopped by `incident` (at 400, pods gone at 500,
// back at 600) when one is given.
Ledger job(const std::string& name, std::int64_t gpus, std::vector<std::string> nodes,
           std::optional<InterruptionEvent> incident) {
  Ledger l(JobKey{"train", "goodput.gpufleet.io/job", name});
  l.observe(obs(0, JobState::Running, gpus, nodes));
  if (incident) {
    l.observe(obs(450, JobState::Running, gpus, nodes));
    EXPECT_TRUE(l.interruption(*incident));
    l.observe(obs(500, JobState::Interrupted, gpus, nodes));
    l.observe(obs(600, JobState::Running, gpus, nodes));
  }
  l.observe(obs(1000, JobState::Succeeded, gpus, nodes));
  return l;
}

TEST(GoodputFleet, EttrWeighsJobsByGpuSeconds) {
  // 8 GPUs lose 200 s to a GPU Xid; 1 GPU runs through: (8*800 + 1*1000) / (9*1000).
  const auto f = summarize_fleet(
      {job("big", 8, {"n1"}, event("n1-a", Cause::GpuXid, "n1", 400)), job("small", 1, {"n2"}, {})},
      T + 5000);
  EXPECT_EQ(f.jobs, 2);
  EXPECT_EQ(f.wall_gpu_seconds, 9000);
  EXPECT_EQ(f.productive_gpu_seconds, 7400);
  EXPECT_DOUBLE_EQ(f.ettr, 7400.0 / 9000.0);
  EXPECT_DOUBLE_EQ(f.gpu_hours_lost[static_cast<std::size_t>(Cause::GpuXid)], 1600.0 / 3600.0);
  EXPECT_DOUBLE_EQ(f.gpu_hours_lost[static_cast<std::size_t>(Cause::Nic)], 0.0);
  EXPECT_EQ(f.interruptions, 1);
  EXPECT_EQ(f.redone_unknown, 1);
  // Unweighted, the two jobs would average (0.8 + 1) / 2 = 0.9: the weighting matters.
  EXPECT_NE(f.ettr, 0.9);
}

TEST(GoodputFleet, NothingRanIsAnEttrOfOne) {
  Ledger queued;
  queued.observe(obs(0, JobState::Pending, 8, {}));
  const auto f = summarize_fleet({queued}, T + 100);
  EXPECT_EQ(f.jobs, 0);
  EXPECT_DOUBLE_EQ(f.ettr, 1.0);
}

TEST(GoodputFleet, JobsDisruptedPerIncident) {
  // One NIC fault on a node two jobs share; a hostpkg drain hits one job.
  const auto nic = event("n1-nic", Cause::Nic, "n1", 400);
  const auto f = summarize_fleet(
      {job("a", 8, {"n1", "n2"}, nic), job("b", 4, {"n1", "n3"}, nic),
       job("c", 8, {"n4"}, event("hostpkg/drivers/n4/2", Cause::HostPackage, "n4", 400))},
      T + 1000);
  ASSERT_EQ(f.incidents.size(), 2u);
  EXPECT_EQ(f.incidents[0].incident, "n1-nic");
  EXPECT_EQ(f.incidents[0].jobs, 2);
  EXPECT_EQ(f.incidents[0].cause, Cause::Nic);
  EXPECT_EQ(f.incidents[0].node, "n1");
  EXPECT_EQ(f.incidents[0].gpu_seconds, 200 * 12);
  EXPECT_EQ(f.incidents[1].incident, "hostpkg/drivers/n4/2");
  EXPECT_EQ(f.incidents[1].jobs, 1);
  EXPECT_DOUBLE_EQ(f.gpu_hours_lost[static_cast<std::size_t>(Cause::HostPackage)], 1600.0 / 3600.0);
}

TEST(GoodputFleet, AnIncidentDuringAnotherCountsTheJobToo) {
  Ledger l(JobKey{"train", "", "solo"});
  l.observe(obs(0, JobState::Running, 8, {"n1", "n2"}));
  l.observe(obs(100, JobState::Running, 8, {"n1", "n2"}));
  l.interruption(event("n1-x", Cause::GpuXid, "n1", 90));
  l.interruption(event("n2-y", Cause::GpuXid, "n2", 95));
  const auto f = summarize_fleet({l}, T + 200);
  ASSERT_EQ(f.incidents.size(), 2u);
  EXPECT_EQ(f.incidents[0].incident, "n1-x");  // the cause carries the loss
  EXPECT_EQ(f.incidents[0].gpu_seconds, 110 * 8);
  EXPECT_EQ(f.incidents[1].incident, "n2-y");
  EXPECT_EQ(f.incidents[1].jobs, 1);
  EXPECT_EQ(f.incidents[1].gpu_seconds, 0);
}

IncidentRecord rec(std::string id, std::string node, std::int64_t at, Cause c = Cause::GpuXid) {
  return IncidentRecord{std::move(id), std::move(node), at, c};
}

TEST(GoodputFleet, MtbiAndLemons) {
  const std::int64_t now = T + 60 * kDay;
  const std::vector<IncidentRecord> incidents = {
      rec("a1", "node-a", now - 1 * kDay),
      rec("a2", "node-a", now - 2 * kDay),
      rec("a3", "node-a", now - 3 * kDay, Cause::Nic),
      rec("a3", "node-a", now - 3 * kDay, Cause::Nic),  // the same incident again
      rec("b1", "node-b", now - 5 * kDay),
      rec("b2", "node-b", now - 6 * kDay),
      rec("b3", "node-b", now - 7 * kDay),
      rec("b4", "node-b", now - 8 * kDay),
      rec("c1", "node-c", now - 40 * kDay),  // outside the window
      rec("c2", "node-c", now - 4 * kDay),
      rec("d1", "node-d", now - 1 * kDay, Cause::HostPackage),  // maintenance, no fault
      rec("d2", "node-d", now - 1 * kDay, Cause::User),
      rec("e1", "node-e", now - 10 * kDay),
      rec("e2", "node-e", now - 11 * kDay)};
  const auto nodes = node_reliability(incidents, now, LemonPolicy{});
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].node, "node-b");
  EXPECT_TRUE(nodes[0].lemon);
  EXPECT_EQ(nodes[0].incidents, 4);
  EXPECT_DOUBLE_EQ(nodes[0].mtbi_seconds, 30.0 * kDay / 4);
  EXPECT_EQ(nodes[1].node, "node-a");
  EXPECT_TRUE(nodes[1].lemon);
  EXPECT_EQ(nodes[1].incidents, 3);
  EXPECT_EQ(nodes[1].by_cause[static_cast<std::size_t>(Cause::Nic)], 1);
  EXPECT_EQ(nodes[1].last_at, now - kDay);
  // Two each, not lemons: the latest incident first.
  EXPECT_EQ(nodes[2].node, "node-e");
  EXPECT_FALSE(nodes[2].lemon);
  EXPECT_EQ(nodes[3].node, "node-c");
  EXPECT_EQ(nodes[3].incidents, 1);
  EXPECT_DOUBLE_EQ(nodes[3].mtbi_seconds, 30.0 * kDay);
  EXPECT_EQ(nodes[2].incidents, 2);

  // A stricter policy and a fleet watched for 10 days only.
  LemonPolicy strict;
  strict.window_seconds = 30 * kDay;
  strict.min_incidents = 2;
  const auto young = node_reliability(incidents, now, strict, now - 10 * kDay);
  ASSERT_EQ(young.size(), 4u);
  EXPECT_EQ(young[0].node, "node-b");
  EXPECT_EQ(young[0].incidents, 4);
  EXPECT_DOUBLE_EQ(young[0].mtbi_seconds, 10.0 * kDay / 4);
  EXPECT_EQ(young[1].node, "node-a");
  EXPECT_TRUE(young[1].lemon);
  EXPECT_EQ(young[2].node, "node-c");  // c2 at 4 days; node-e's second lies before
  EXPECT_FALSE(young[2].lemon);
  EXPECT_EQ(young[3].node, "node-e");
  EXPECT_EQ(young[3].incidents, 1);
}

TEST(GoodputFleet, ABadLemonPolicyIsRefused) {
  LemonPolicy p;
  p.window_seconds = 0;
  try {
    (void)node_reliability({}, T, p);
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("window 0s is not positive"), std::string::npos);
  }
  p = LemonPolicy{};
  p.min_incidents = 0;
  EXPECT_THROW((void)node_reliability({}, T, p), core::InvalidInput);
}

const char* kRemediation = R"({
  "apiVersion": "gpufleet.io/v1alpha1", "kind": "Remediation",
  "metadata": {"name": "gpu-node-7-m7kq2x1", "creationTimestamp": "2025-03-01T10:05:02Z",
               "labels": {"sentinel.gpufleet.io/node": "gpu-node-7"}},
  "spec": {"nodeName": "gpu-node-7", "reason": "Fault", "entities": ["xid/GPU-5d3a", "gpu/GPU-5d3a"],
           "rules": ["xid-fatal"], "action": "gpu-reset", "cordon": true,
           "taints": ["sentinel.gpufleet.io/fault:NoSchedule"], "detectedAt": "2025-03-01T10:05:00Z"},
  "status": {"phase": "Released", "quarantinedAt": "2025-03-01T10:05:03Z",
             "drainStartedAt": "2025-03-01T10:05:04Z", "completedAt": "2025-03-01T10:40:00Z",
             "cordonLatencyMs": 3000}
})";

TEST(GoodputFleet, RemediationsAsEventsAndRecords) {
  const auto e = event_from_remediation(core::parse_json(kRemediation), "remediation");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->incident, "gpu-node-7-m7kq2x1");
  EXPECT_EQ(e->cause, Cause::GpuXid);
  EXPECT_EQ(e->node, "gpu-node-7");
  EXPECT_EQ(e->fault_at, T + 300);
  EXPECT_EQ(e->acted_at, T + 303);
  EXPECT_EQ(e->ended_at, T + 2400);
  const auto r = incident_from_remediation(core::parse_json(kRemediation), "remediation");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "gpu-node-7-m7kq2x1");
  EXPECT_EQ(r->at, T + 300);

  core::Value open = core::parse_json(kRemediation);
  open["status"]["phase"] = "Draining";
  open["spec"]["entities"] = core::Value(core::List{"ib-port/mlx5_0/1"});
  open["spec"].as_map().erase("detectedAt");
  const auto o = event_from_remediation(open, "remediation");
  EXPECT_EQ(o->cause, Cause::Nic);
  EXPECT_FALSE(o->ended_at);        // not final: not ended
  EXPECT_EQ(o->fault_at, T + 302);  // creationTimestamp
  open["spec"]["entities"] = core::Value(core::List{"maintenance/evt-1"});
  EXPECT_EQ(event_from_remediation(open, "remediation")->cause, Cause::SentinelRemediation);

  core::Value fresh = core::parse_json(kRemediation);
  fresh["spec"]["reason"] = "NewNode";
  EXPECT_FALSE(event_from_remediation(fresh, "remediation"));
  EXPECT_FALSE(incident_from_remediation(fresh, "remediation"));

  core::Value bad = core::parse_json(kRemediation);
  bad["status"]["quarantinedAt"] = "soon";
  try {
    (void)event_from_remediation(bad, "Remediation gpu-node-7-m7kq2x1");
    FAIL();
  } catch (const core::InvalidInput& err) {
    EXPECT_EQ(std::string(err.what()),
              "Remediation gpu-node-7-m7kq2x1: status.quarantinedAt: value \"soon\" is not an RFC "
              "3339 time (the API server writes times as \"2025-03-01T12:00:00Z\")");
  }
  core::Value nameless = core::parse_json(kRemediation);
  nameless["spec"].as_map().erase("nodeName");
  EXPECT_THROW((void)incident_from_remediation(nameless, "r"), core::InvalidInput);
}

TEST(GoodputFleet, CauseOfEntities) {
  EXPECT_EQ(cause_of_entities({"ib-port/mlx5_0/1", "xid/GPU-a"}), Cause::GpuXid);
  EXPECT_EQ(cause_of_entities({"ib-port/mlx5_0/1"}), Cause::Nic);
  EXPECT_EQ(cause_of_entities({"maintenance/e1"}), Cause::SentinelRemediation);
  EXPECT_EQ(cause_of_entities({}), Cause::SentinelRemediation);
}

}  // namespace
}  // namespace gpufleet::goodput
