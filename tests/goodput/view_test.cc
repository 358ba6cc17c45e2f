// `gpufleet goodput`'s view: ledger ConfigMaps as the controller writes them (and a bad one),
// Remediations as sentinel writes them, into the document and the table.
#include "goodput/view.h"

#include <gtest/gtest.h>

#include "core/json.h"
#include "goodput/controller.h"
#include "goodput/ledger.h"

namespace gpufleet::goodput {
namespace {

constexpr std::int64_t T = 1740823200;  // 2025-03-01T10:00:00Z

// A ConfigMap as the API returns the controller's write, its ledger.json given.
core::Value configmap(const std::string& name, const std::string& ledger_json) {
  core::Value cm = core::parse_json(R"({
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "", "namespace": "gpufleet-system", "resourceVersion": "4711",
      "labels": {"app.kubernetes.io/managed-by": "gpufleet",
                 "goodput.gpufleet.io/job": "llama", "goodput.gpufleet.io/job-namespace": "train"},
      "annotations": {"goodput.gpufleet.io/job-key": "train/llama",
                      "goodput.gpufleet.io/observed": "0123456789abcdef"}},
    "data": {}})");
  cm["metadata"]["name"] = name;
  cm["data"]["ledger.json"] = ledger_json;
  return cm;
}

// Runs from T+100 on 16 GPUs, a GPU Xid at 1500 (quarantine 1530), pods gone at 1700, back at
// 2000; checkpoint at 1000.
Ledger llama() {
  Ledger l(JobKey{"train", std::string(kJobLabel), "llama"});
  auto obs = [](std::int64_t dt, JobState s) {
    Observation o;
    o.time = T + dt;
    o.state = s;
    o.nodes = {"node-a", "node-b"};
    o.gpus = 16;
    o.reports_checkpoints = true;
    if (dt >= 1100) o.last_checkpoint = T + 1000;
    return o;
  };
  l.observe(obs(0, JobState::Pending));
  l.observe(obs(100, JobState::Running));
  l.observe(obs(1100, JobState::Running));
  InterruptionEvent e;
  e.incident = "node-a-m7kq2";
  e.cause = Cause::GpuXid;
  e.node = "node-a";
  e.fault_at = T + 1500;
  e.acted_at = T + 1530;
  l.interruption(e);
  l.observe(obs(1700, JobState::Interrupted));
  l.observe(obs(2000, JobState::Running));
  return l;
}

core::Value remediation(const std::string& name, const std::string& node,
                        const std::string& detected) {
  core::Value r = core::parse_json(R"({
    "apiVersion": "gpufleet.io/v1alpha1", "kind": "Remediation",
    "metadata": {"name": "", "creationTimestamp": "2025-03-01T10:05:02Z"},
    "spec": {"nodeName": "", "reason": "Fault", "entities": ["xid/GPU-5d3a"], "rules": ["xid-fatal"],
             "action": "reboot", "cordon": true, "detectedAt": ""},
    "status": {"phase": "Released", "quarantinedAt": "2025-03-01T10:05:03Z"}})");
  r["metadata"]["name"] = name;
  r["spec"]["nodeName"] = node;
  r["spec"]["detectedAt"] = detected;
  return r;
}

TEST(GoodputView, DocumentFromLedgerConfigMapsAndRemediations) {
  const Ledger l = llama();
  const std::vector<core::Value> cms = {
      configmap(ledger_configmap_name(l.key()), core::to_json(l.to_value())),
      configmap("goodput-train-broken-00000000", R"({"version": 1, "state": "Runing"})")};
  const std::vector<core::Value> rems = {
      remediation("node-a-1", "node-a", "2025-03-01T09:00:00Z"),
      remediation("node-a-2", "node-a", "2025-03-01T09:30:00Z"),
      remediation("node-a-m7kq2", "node-a", "2025-03-01T10:25:00Z"),
      remediation("node-c-1", "node-c", "2025-03-01T10:10:00Z")};
  const core::Value doc = goodput_document(cms, rems, T + 2400);
  ASSERT_EQ(doc.find("jobs")->size(), 1U);
  const core::Value& j = (*doc.find("jobs"))[0];
  EXPECT_EQ(j.get_string({"name"}), "llama");
  EXPECT_EQ(j.get_string({"state"}), "Running");
  EXPECT_EQ(j.find("gpus")->as_int(), 16);
  EXPECT_EQ(j.find("wallSeconds")->as_int(), 2300);
  // detection 30 + drain 170 + restart 300 + redone 500 (checkpoint 1000 → fault 1500)
  EXPECT_EQ(j.find("lostSeconds")->as_int(), 1000);
  EXPECT_EQ(j.find("productiveSeconds")->as_int(), 1300);
  EXPECT_EQ(j.find("interruptions")->as_int(), 1);
  EXPECT_EQ(j.get_string({"lastCause"}), "GpuXid");
  EXPECT_EQ(j.get({"lostSecondsByCause", "GpuXid"})->as_int(), 1000);
  const core::Value& fleet = *doc.find("fleet");
  EXPECT_DOUBLE_EQ(fleet.find("ettr")->as_double(), 1300.0 / 2300.0);
  EXPECT_DOUBLE_EQ(fleet.get({"gpuHoursLost", "GpuXid"})->as_double(), 1000.0 * 16 / 3600);
  EXPECT_DOUBLE_EQ(fleet.get({"gpuHoursLost", "Nic"})->as_double(), 0.0);
  ASSERT_EQ(doc.find("lemonNodes")->size(), 1U);
  EXPECT_EQ((*doc.find("lemonNodes"))[0].as_string(), "node-a");
  EXPECT_EQ(doc.find("nodes")->size(), 2U);
  ASSERT_EQ(doc.find("errors")->size(), 1U);
  EXPECT_NE((*doc.find("errors"))[0].as_string().find(
                "configmap gpufleet-system/goodput-train-broken-00000000"),
            std::string::npos)
      << (*doc.find("errors"))[0].as_string();

  const std::string table = render_goodput(doc);
  EXPECT_NE(table.find("Fleet ETTR 56.5% over 1 job(s), 1 interruption(s); GPU-hours lost: "
                       "GpuXid 4.44\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("JOB          STATE    GPUS  WALL    PRODUCTIVE  LOST    ETTR   "
                       "INTERRUPTIONS  LAST CAUSE\n"
                       "train/llama  Running  16    38m20s  21m40s      16m40s  56.5%  1      "
                       "        GpuXid\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Lemon nodes (3+ incidents in 30 days): \n  node-a  3 incidents"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("error: configmap gpufleet-system/goodput-train-broken-00000000"),
            std::string::npos);
}

TEST(GoodputView, Empty) {
  const core::Value doc = goodput_document({}, {}, T);
  EXPECT_EQ(render_goodput(doc),
            "Fleet ETTR 100.0% over 0 job(s), 0 interruption(s); GPU-hours lost: none\n\n"
            "No jobs with a goodput ledger.\n\nLemon nodes (3+ incidents in 30 days): none\n");
}

TEST(GoodputView, HumanSeconds) {
  EXPECT_EQ(human_seconds(0), "0s");
  EXPECT_EQ(human_seconds(45), "45s");
  EXPECT_EQ(human_seconds(725), "12m05s");
  EXPECT_EQ(human_seconds(7380), "2h03m");
  EXPECT_EQ(human_seconds(3 * 86400 + 4 * 3600 + 59), "3d04h");
}

}  // namespace
}  // namespace gpufleet::goodput
