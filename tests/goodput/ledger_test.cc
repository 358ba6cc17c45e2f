// The ledger: exact seconds per phase and cause for real timelines, restart safety (the same
// or older input changes nothing; a ledger read back from its persisted form goes on as if
// never stopped) and the strict reader of the persisted form.
#include "goodput/ledger.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::goodput {
namespace {

constexpr std::int64_t T = 1740823200;  // 2025-03-01T10:00:00Z

Observation at(std::int64_t dt, JobState s, std::optional<std::int64_t> ckpt_dt = {},
               bool reports = false) {
  Observation o;
  o.time = T + dt;
  o.state = s;
  o.nodes = {"node-b", "node-a"};
  o.gpus = 16;
  o.reports_checkpoints = reports || ckpt_dt.has_value();
  if (ckpt_dt) o.last_checkpoint = T + *ckpt_dt;
  return o;
}

InterruptionEvent xid(std::int64_t fault_dt, std::optional<std::int64_t> acted_dt = {},
                      std::string id = "node-a-m7kq2", std::string node = "node-a") {
  InterruptionEvent e;
  e.incident = std::move(id);
  e.cause = Cause::GpuXid;
  e.node = std::move(node);
  e.fault_at = T + fault_dt;
  if (acted_dt) e.acted_at = T + *acted_dt;
  return e;
}

// Queued 100 s, runs from 100, checkpoints at 1000, a GPU Xid at 1500 that sentinel
// quarantines at 1530, the pods gone at 1700, running again at 2000.
Ledger xid_timeline(bool checkpoints) {
  Ledger l(JobKey{"train", "jobset.sigs.k8s.io/jobset-name", "llama"});
  EXPECT_TRUE(l.observe(at(0, JobState::Pending)));
  EXPECT_TRUE(l.observe(at(100, JobState::Running)));
  EXPECT_TRUE(
      l.observe(checkpoints ? at(1100, JobState::Running, 1000) : at(1100, JobState::Running)));
  EXPECT_TRUE(l.observe(at(1600, JobState::Running)));
  EXPECT_TRUE(l.interruption(xid(1500, 1530)));
  EXPECT_TRUE(l.observe(at(1700, JobState::Interrupted)));
  EXPECT_TRUE(l.observe(at(1800, JobState::Pending)));  // the replacement pod waits
  EXPECT_TRUE(l.observe(at(2000, JobState::Running)));
  return l;
}

TEST(GoodputLedger, OneGpuXidWithACheckpoint) {
  const Ledger l = xid_timeline(true);
  ASSERT_EQ(l.history().size(), 1u);
  const Interruption& i = l.history()[0];
  EXPECT_EQ(i.incident, "node-a-m7kq2");
  EXPECT_EQ(i.cause, Cause::GpuXid);
  EXPECT_EQ(i.phases.detection, 30);  // 1500 -> 1530
  EXPECT_EQ(i.phases.drain, 170);     // 1530 -> 1700
  EXPECT_EQ(i.phases.restart, 300);   // 1700 -> 2000
  EXPECT_EQ(i.phases.redone, 500);    // checkpoint 1000 -> fault 1500
  EXPECT_FALSE(l.open());

  const Summary s = l.summary(T + 2500);
  EXPECT_EQ(s.queued, 100);
  EXPECT_EQ(s.wall, 2400);
  EXPECT_EQ(s.productive, 1400);  // ran 1400 + 500, less 500 redone
  EXPECT_EQ(s.lost, 1000);
  EXPECT_EQ(s.of(Cause::GpuXid).lost(), 1000);
  EXPECT_EQ(s.of(Cause::GpuXid).interruptions, 1);
  EXPECT_EQ(s.interruptions, 1);
  EXPECT_EQ(s.redone_unknown, 0);
  EXPECT_DOUBLE_EQ(s.ettr, 1400.0 / 2400.0);
  EXPECT_EQ(s.gpus, 16);
}

TEST(GoodputLedger, WithoutCheckpointsTheRedoneWorkIsUnknown) {
  const Ledger l = xid_timeline(false);
  ASSERT_EQ(l.history().size(), 1u);
  EXPECT_FALSE(l.history()[0].phases.redone);
  const Summary s = l.summary(T + 2500);
  EXPECT_EQ(s.productive, 1900);
  EXPECT_EQ(s.lost, 500);
  EXPECT_EQ(s.redone_unknown, 1);
  EXPECT_EQ(s.of(Cause::GpuXid).redone_unknown, 1);
  EXPECT_EQ(s.of(Cause::GpuXid).redone, 0);
}

TEST(GoodputLedger, ACheckpointNotYetWrittenRedoesTheWholeRun) {
  // "none": the job reports checkpoints and has written none: all since its start is redone.
  Ledger l;
  l.observe(at(0, JobState::Running, {}, true));
  l.observe(at(600, JobState::Interrupted));
  l.observe(at(700, JobState::Running));
  ASSERT_EQ(l.history().size(), 1u);
  EXPECT_EQ(l.history()[0].cause, Cause::Unknown);
  EXPECT_EQ(l.history()[0].phases.redone, 600);
  EXPECT_EQ(l.history()[0].phases.restart, 100);
  EXPECT_EQ(l.history()[0].phases.detection, 0);
  EXPECT_EQ(l.summary(T + 700).productive, 0);
}

TEST(GoodputLedger, TwoInterruptions) {
  Ledger l;
  l.observe(at(0, JobState::Running, 0));
  l.observe(at(400, JobState::Running, 300));
  // The job stops and nothing explains it: Unknown, no detection.
  l.observe(at(1000, JobState::Interrupted));
  l.observe(at(1060, JobState::Running));
  // A hostpkg rollout cordons node-b at 2000 and drains it at 2100.
  InterruptionEvent pkg;
  pkg.incident = "hostpkg/sysctl-tuning/node-b/3";
  pkg.cause = Cause::HostPackage;
  pkg.node = "node-b";
  pkg.fault_at = T + 2000;
  pkg.acted_at = T + 2000;
  l.observe(at(2050, JobState::Running, 1800));
  EXPECT_TRUE(l.interruption(pkg));
  l.observe(at(2100, JobState::Interrupted));
  l.observe(at(2400, JobState::Running));

  ASSERT_EQ(l.history().size(), 2u);
  const Interruption& a = l.history()[0];
  EXPECT_EQ(a.cause, Cause::Unknown);
  EXPECT_EQ(a.phases, (Phases{0, 0, 60, 700}));  // checkpoint 300 -> stop 1000
  const Interruption& b = l.history()[1];
  EXPECT_EQ(b.cause, Cause::HostPackage);
  EXPECT_EQ(b.phases, (Phases{0, 100, 300, 200}));  // checkpoint 1800 -> cordon 2000
  const Summary s = l.summary(T + 3000);
  EXPECT_EQ(s.wall, 3000);
  EXPECT_EQ(s.of(Cause::Unknown).lost(), 760);
  EXPECT_EQ(s.of(Cause::HostPackage).lost(), 600);
  EXPECT_EQ(s.productive, 3000 - 760 - 600);
  EXPECT_EQ(s.interruptions, 2);
}

TEST(GoodputLedger, AnIncidentLearnedAfterTheStopExplainsIt) {
  Ledger l;
  l.observe(at(0, JobState::Running));
  l.observe(at(500, JobState::Interrupted));
  ASSERT_TRUE(l.open());
  EXPECT_EQ(l.open()->cause, Cause::Unknown);
  EXPECT_TRUE(l.interruption(xid(450, 480)));
  EXPECT_EQ(l.open()->cause, Cause::GpuXid);
  l.observe(at(800, JobState::Running));
  ASSERT_EQ(l.history().size(), 1u);
  EXPECT_EQ(l.history()[0].phases, (Phases{30, 20, 300, std::nullopt}));
  EXPECT_EQ(l.summary(T + 800).productive, 450);
  // An incident that began after the job stopped does not explain it; it is recorded beside.
  Ledger m;
  m.observe(at(0, JobState::Running));
  m.observe(at(500, JobState::Interrupted));
  EXPECT_TRUE(m.interruption(xid(510)));
  EXPECT_EQ(m.open()->cause, Cause::Unknown);
  EXPECT_EQ(m.open()->also, (std::vector<std::string>{"node-a-m7kq2"}));
}

TEST(GoodputLedger, AnIncidentThatEndsWhileTheJobRunsCostsNothing) {
  Ledger l;
  l.observe(at(0, JobState::Running));
  l.observe(at(100, JobState::Running));
  InterruptionEvent nic = xid(100, 110, "node-a-nic1");
  nic.cause = Cause::Nic;
  EXPECT_TRUE(l.interruption(nic));
  EXPECT_EQ(l.summary(T + 200).of(Cause::Nic).lost(), 100);  // in progress: held back
  l.observe(at(300, JobState::Running));
  nic.ended_at = T + 250;
  EXPECT_TRUE(l.interruption(nic));
  EXPECT_FALSE(l.open());
  EXPECT_TRUE(l.history().empty());
  const Summary s = l.summary(T + 400);
  EXPECT_EQ(s.productive, 400);
  EXPECT_EQ(s.lost, 0);
  // Fed again on the next pass, the ended incident changes nothing.
  EXPECT_FALSE(l.interruption(nic));
  EXPECT_EQ(l.summary(T + 400).productive, 400);
}

TEST(GoodputLedger, IgnoredEvents) {
  Ledger l;
  EXPECT_FALSE(l.interruption(xid(0)));  // never observed
  l.observe(at(0, JobState::Pending));
  EXPECT_FALSE(l.interruption(xid(0)));  // queueing is not lost time
  l.observe(at(100, JobState::Running));
  EXPECT_FALSE(l.interruption(xid(150, {}, "node-z-1", "node-z")));  // not the job's node
  EXPECT_FALSE(l.interruption(xid(50)));                             // before this run began
  EXPECT_FALSE(l.open());
  // A fault after the last observation: the job ran on until it, unchanged.
  EXPECT_TRUE(l.interruption(xid(200, 230)));
  EXPECT_EQ(l.observed_at(), T + 200);
  EXPECT_FALSE(l.observe(at(150, JobState::Interrupted)));  // older than the fault now
  l.observe(at(260, JobState::Interrupted));
  l.observe(at(300, JobState::Running));
  ASSERT_EQ(l.history().size(), 1u);
  EXPECT_EQ(l.history()[0].phases, (Phases{30, 30, 40, std::nullopt}));
  EXPECT_EQ(l.summary(T + 300).productive, 100);
}

TEST(GoodputLedger, DuplicateAndOutOfOrderInputChangesNothing) {
  Ledger l = xid_timeline(true);
  const Ledger before = l;
  EXPECT_FALSE(l.observe(at(2000, JobState::Running)));      // the same again
  EXPECT_FALSE(l.observe(at(1000, JobState::Interrupted)));  // older
  EXPECT_FALSE(l.interruption(xid(1500, 1530)));             // recovered from already
  EXPECT_EQ(l, before);
  // The same event twice while open.
  Ledger m;
  m.observe(at(0, JobState::Running));
  m.observe(at(100, JobState::Running));
  EXPECT_TRUE(m.interruption(xid(50, 60)));
  const Ledger once = m;
  EXPECT_FALSE(m.interruption(xid(50, 60)));
  EXPECT_EQ(m, once);
  // More known on a later pass: the earlier acted time is kept.
  EXPECT_FALSE(m.interruption(xid(50, 70)));
  EXPECT_EQ(m.open()->acted_at, T + 60);
  // A second incident during the interruption is recorded, not a second cause.
  EXPECT_TRUE(m.interruption(xid(80, {}, "node-b-q1", "node-b")));
  EXPECT_EQ(m.open()->incident, "node-a-m7kq2");
  EXPECT_EQ(m.open()->also, (std::vector<std::string>{"node-b-q1"}));
  EXPECT_FALSE(m.interruption(xid(80, {}, "node-b-q1", "node-b")));
}

TEST(GoodputLedger, AJobThatFailsDuringAnInterruption) {
  Ledger l;
  l.observe(at(0, JobState::Running));
  l.observe(at(1000, JobState::Running));
  EXPECT_TRUE(l.interruption(xid(900, 950)));
  l.observe(at(1100, JobState::Interrupted));
  l.observe(at(1400, JobState::Failed));
  ASSERT_EQ(l.history().size(), 1u);
  EXPECT_EQ(l.history()[0].phases, (Phases{50, 150, 300, std::nullopt}));
  EXPECT_FALSE(l.history()[0].resumed_at);
  const Summary s = l.summary(T + 99999);  // ended: wall stops at the end
  EXPECT_EQ(s.state, JobState::Failed);
  EXPECT_EQ(s.wall, 1400);
  EXPECT_EQ(s.productive, 900);
  EXPECT_FALSE(l.observe(at(1500, JobState::Running)));  // final
}

TEST(GoodputLedger, WallIsProductivePlusLostAtEveryStep) {
  Ledger l;
  const std::vector<std::pair<std::int64_t, JobState>> steps = {
      {0, JobState::Pending},    {50, JobState::Running},    {300, JobState::Interrupted},
      {320, JobState::Pending},  {400, JobState::Running},   {900, JobState::Interrupted},
      {1000, JobState::Running}, {1500, JobState::Succeeded}};
  for (const auto& [dt, state] : steps) {
    l.observe(at(dt, state, dt >= 400 ? std::optional<std::int64_t>(380) : std::nullopt));
    if (dt == 400) l.interruption(xid(390, 395, "late"));  // before this run: ignored
    if (dt == 900) l.interruption(xid(850, 870, "x2"));
    const Summary s = l.summary(T + dt + 10);
    std::int64_t lost = 0;
    for (const auto& c : s.by_cause) lost += c.lost();
    EXPECT_EQ(s.wall, s.productive + lost) << "at " << dt;
  }
  EXPECT_EQ(l.summary(T + 2000).wall, 1450);
}

TEST(GoodputLedger, ALedgerReadBackGoesOnAsIfNeverStopped) {
  // One controller sees everything; another restarts after the stop, reads the persisted
  // ledger, then (level-triggered) feeds the latest observation and every incident again.
  Ledger full = xid_timeline(true);
  full.observe(at(2600, JobState::Running));

  Ledger part(JobKey{"train", "jobset.sigs.k8s.io/jobset-name", "llama"});
  part.observe(at(0, JobState::Pending));
  part.observe(at(100, JobState::Running));
  part.observe(at(1100, JobState::Running, 1000));
  part.observe(at(1600, JobState::Running));
  part.interruption(xid(1500, 1530));
  part.observe(at(1700, JobState::Interrupted));
  const std::string persisted = core::to_json(part.to_value());
  Ledger restored = Ledger::from_value(core::parse_json(persisted), "test");
  EXPECT_EQ(restored, part);
  EXPECT_FALSE(restored.observe(at(1700, JobState::Interrupted)));
  EXPECT_FALSE(restored.interruption(xid(1500, 1530)));
  restored.observe(at(1800, JobState::Pending));
  restored.observe(at(2000, JobState::Running));
  EXPECT_FALSE(restored.interruption(xid(1500, 1530)));
  restored.observe(at(2600, JobState::Running));
  EXPECT_EQ(restored, full);
  EXPECT_EQ(core::to_json(restored.to_value()), core::to_json(full.to_value()));
}

TEST(GoodputLedger, PersistedShape) {
  const Ledger l = xid_timeline(true);
  EXPECT_EQ(
      core::to_json(l.to_value()),
      R"({"checkpoints":{"lastAt":"2025-03-01T10:16:40Z","reported":true},"gpus":16,)"
      R"("history":[{"actedAt":"2025-03-01T10:25:30Z","cause":"GpuXid",)"
      R"("checkpointAt":"2025-03-01T10:16:40Z","detectionSeconds":30,"drainSeconds":170,)"
      R"("faultAt":"2025-03-01T10:25:00Z","incident":"node-a-m7kq2","node":"node-a",)"
      R"("redoneSeconds":500,"reportsCheckpoints":true,"restartSeconds":300,)"
      R"("resumedAt":"2025-03-01T10:33:20Z","runSince":"2025-03-01T10:01:40Z",)"
      R"("stoppedAt":"2025-03-01T10:28:20Z"}],)"
      R"("job":{"label":"jobset.sigs.k8s.io/jobset-name","name":"llama","namespace":"train"},)"
      R"("nodes":["node-a","node-b"],"observedAt":"2025-03-01T10:33:20Z","queuedSeconds":100,)"
      R"("runSince":"2025-03-01T10:33:20Z","runningSeconds":1400,)"
      R"("startedAt":"2025-03-01T10:01:40Z","state":"Running",)"
      R"("totals":{"GpuXid":{"detectionSeconds":30,"drainSeconds":170,"interruptions":1,)"
      R"("redoneSeconds":500,"redoneUnknown":0,"restartSeconds":300}},"version":1})");
}

TEST(GoodputLedger, RoundTripsEveryShape) {
  std::vector<Ledger> ledgers;
  ledgers.push_back(Ledger{});
  ledgers.push_back(xid_timeline(false));
  Ledger open;
  open.observe(at(0, JobState::Running, 0));
  open.observe(at(100, JobState::Running));
  open.interruption(xid(90, 95));
  open.interruption(xid(92, {}, "node-b-2", "node-b"));
  ledgers.push_back(open);
  open.observe(at(200, JobState::Interrupted));
  ledgers.push_back(open);
  open.observe(at(300, JobState::Failed));
  ledgers.push_back(open);
  Ledger many;
  many.observe(at(0, JobState::Running));
  for (int i = 1; i <= 20; ++i) {
    many.observe(at(i * 100, JobState::Interrupted));
    many.observe(at(i * 100 + 10, JobState::Running));
  }
  EXPECT_EQ(many.history().size(), kMaxHistory);
  EXPECT_EQ(many.summary(T + 2010).of(Cause::Unknown).interruptions, 20);  // totals keep all
  ledgers.push_back(many);
  for (const auto& l : ledgers) {
    const Ledger back = Ledger::from_value(core::parse_json(core::to_json(l.to_value())), "t");
    EXPECT_EQ(back, l) << core::to_json(l.to_value());
  }
}

// The persisted form of xid_timeline(true) with `edit` applied; the reader's message.
std::string rejection(const std::function<void(core::Value&)>& edit) {
  core::Value v = xid_timeline(true).to_value();
  edit(v);
  try {
    (void)Ledger::from_value(v, "Pod train/llama-0 annotation");
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "accepted";
}

TEST(GoodputLedger, TheReaderRejectsBadFields) {
  EXPECT_EQ(rejection([](core::Value& v) { v["runingSeconds"] = 5; }),
            "Pod train/llama-0 annotation: runingSeconds: is not a known field (did you mean "
            "\"runningSeconds\"? fields here: checkpoints, endedAt, gpus, history, job, nodes, "
            "observedAt, open, queuedSeconds, runSince, runningSeconds, startedAt, state, "
            "totals, version)");
  EXPECT_EQ(rejection([](core::Value& v) { v["runningSeconds"] = -1; }),
            "Pod train/llama-0 annotation: runningSeconds: value -1 is out of range: must be "
            "between 0 and 315537897599 (write whole seconds, 0 or more)");
  EXPECT_EQ(rejection([](core::Value& v) { v["observedAt"] = "10:00"; }),
            "Pod train/llama-0 annotation: observedAt: value \"10:00\" is not an RFC 3339 time "
            "(write an RFC 3339 time, e.g. \"2025-03-01T12:00:00Z\")");
  EXPECT_EQ(rejection([](core::Value& v) { v["version"] = 2; }),
            "Pod train/llama-0 annotation: version: value 2 is out of range: must be between 1 "
            "and 1 (this gpufleet reads ledger version 1)");
  EXPECT_EQ(rejection([](core::Value& v) { v["state"] = "Runing"; }),
            "Pod train/llama-0 annotation: state: value \"Runing\" is not supported (use one "
            "of: Pending, Running, Interrupted, Succeeded, Failed)");
  EXPECT_EQ(rejection([](core::Value& v) { v["history"].as_list()[0]["cause"] = "Xid"; }),
            "Pod train/llama-0 annotation: history[0].cause: value \"Xid\" is not supported "
            "(use one of: GpuXid, Nic, HostPackage, SentinelRemediation, User, Unknown)");
  EXPECT_EQ(rejection([](core::Value& v) { v["history"].as_list()[0]["drainSeconds"] = "170"; }),
            "Pod train/llama-0 annotation: history[0].drainSeconds: value \"170\" is not an "
            "integer (write whole seconds, 0 or more)");
  EXPECT_EQ(rejection([](core::Value& v) { v["totals"]["Gpu"] = core::Value::map(); }),
            "Pod train/llama-0 annotation: totals.Gpu: is not a cause (use one of: GpuXid, Nic, "
            "HostPackage, SentinelRemediation, User, Unknown)");
  EXPECT_EQ(rejection([](core::Value& v) {
              v["nodes"] = core::Value(core::List{"b", "a"});
            }),
            "Pod train/llama-0 annotation: nodes: value a list is not sorted or has duplicates "
            "(list each name once, sorted)");
  EXPECT_EQ(rejection([](core::Value& v) { v["state"] = "Interrupted"; }),
            "Pod train/llama-0 annotation: state: value \"Interrupted\" is Interrupted without "
            "an open interruption (an Interrupted job has `open`)");
  EXPECT_EQ(rejection([](core::Value& v) { v["state"] = "Succeeded"; }),
            "Pod train/llama-0 annotation: state: value \"Succeeded\" needs endedAt (endedAt is "
            "set exactly when the state is Succeeded or Failed)");
  EXPECT_EQ(rejection([](core::Value& v) {
              v["history"].as_list()[0]["faultAt"] = "2025-03-01T10:00:00Z";
            }),
            "Pod train/llama-0 annotation: history[0].faultAt: value \"2025-03-01T10:00:00Z\" is "
            "before runSince (an interruption's fault lies within the run it stopped)");
  EXPECT_EQ(rejection([](core::Value& v) { v["open"] = v["history"].as_list()[0]; }),
            "Pod train/llama-0 annotation: open.detectionSeconds: value 30 is set on the open "
            "interruption (only a settled interruption (in history) has it)");
  EXPECT_EQ(rejection([](core::Value& v) { v.as_map().erase("job"); }),
            "Pod train/llama-0 annotation: job: is required (write {namespace, name[, label]})");
  EXPECT_EQ(rejection([](core::Value&) {}), "accepted");
}

TEST(GoodputLedger, CauseNamesRoundTrip) {
  for (Cause c : kCauses) EXPECT_EQ(parse_cause(cause_name(c)), c);
  EXPECT_FALSE(parse_cause("gpuxid"));
}

}  // namespace
}  // namespace gpufleet::goodput
