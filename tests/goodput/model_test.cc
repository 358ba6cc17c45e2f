// The goodput benchmark's fleet model: the sampler's rates, determinism, tiny scenarios whose
// figures are computed by hand, and each configuration's decisions.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/xid_catalog.h"
#include "core/yaml.h"
#include "goodput/model/model.h"
#include "sentinel/kmsg_monitor.h"
#include "support/source_paths.h"

namespace gpufleet::goodput::model {
namespace {

// One job on node 0 of a 2-node fleet for a day, no random faults: the faults are the test's.
Scenario tiny(std::int64_t days = 1) {
  Scenario s = Scenario::defaults();
  s.nodes = 2;
  s.days = days;
  JobSpec j;
  j.name = "train";
  j.nodes = 1;
  j.checkpoint_s = 3600;
  j.restart_s = 600;
  s.jobs = {j};
  s.interruptions_per_gpu_hour = 0;
  s.link_flaps_per_node_day = 0;
  s.stragglers_per_node_day = 0;
  return s;
}

Fault gpu_fault(std::int64_t at, int xid, std::int64_t node = 0) {
  Fault f;
  f.at = at;
  f.category = Category::Gpu;
  f.xid = xid;
  f.scope = xid_scope(xid);
  f.node = node;
  f.gpu = 3;
  return f;
}

TEST(GoodputModel, SamplerMatchesTheConfiguredRates) {
  Scenario s = Scenario::defaults();
  s.days = 365;  // a year of 8,192 GPUs: ~1,400 interruptions, ~3,700 flaps, ~750 stragglers
  const std::vector<Fault> faults = sample_faults(s);
  std::array<double, kCategoryCount> n{};
  std::map<int, double> by_xid;
  for (const Fault& f : faults) {
    n[static_cast<std::size_t>(f.category)] += 1;
    if (f.category == Category::Gpu) by_xid[f.xid] += 1;
  }
  const auto within = [](double got, double expected, const char* what) {
    // Poisson counts: 4 standard deviations on a fixed seed.
    EXPECT_LT(std::abs(got - expected), 4 * std::sqrt(expected))
        << what << ": " << got << " drawn, " << expected << " expected";
  };
  const double hours = 365.0 * 24;
  const double interruptions = s.interruptions_per_gpu_hour * 8192 * hours;
  const double drawn = n[0] + n[1] + n[2] + n[3];
  within(drawn, interruptions, "interruptions");
  within(n[static_cast<std::size_t>(Category::Gpu)], interruptions * 0.587, "GPU-related");
  within(n[static_cast<std::size_t>(Category::Host)], interruptions * 0.413 * 0.4, "host");
  within(n[static_cast<std::size_t>(Category::LinkFlap)], 0.01 * 1024 * 365, "link flaps");
  within(n[static_cast<std::size_t>(Category::Straggler)], 0.002 * 1024 * 365, "stragglers");
  within(by_xid[79], n[0] * 0.25, "Xid 79");
  within(by_xid[13], n[0] * 0.15, "Xid 13");
  for (std::size_t i = 1; i < faults.size(); ++i) ASSERT_LE(faults[i - 1].at, faults[i].at);
  // Nodes are drawn uniformly: the first half of the fleet gets about half.
  double low = 0;
  for (const Fault& f : faults) low += f.node < 512 ? 1 : 0;
  within(low, static_cast<double>(faults.size()) / 2, "faults on nodes 0..511");
}

TEST(GoodputModel, TheScopeOfAnXidComesFromTheCatalog) {
  EXPECT_EQ(xid_scope(79), Scope::Node);  // reboot-node
  EXPECT_EQ(xid_scope(48), Scope::Gpu);   // reset-gpu
  EXPECT_EQ(xid_scope(74), Scope::Gpu);   // decode (NVLink)
  EXPECT_EQ(xid_scope(13), Scope::None);  // restart-app
  EXPECT_EQ(xid_scope(63), Scope::None);  // ignore
  try {
    (void)xid_scope(9999);
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_STREQ(e.what(), "Xid 9999 is not in the Xid catalog (data/xid/catalog.yaml)");
  }
}

TEST(GoodputModel, XidHealthIsTheMonitorsMapping) {
  const auto& c = core::XidCatalog::builtin();
  EXPECT_EQ(sentinel::xid_health(c, 79).state, "Fatal");
  EXPECT_TRUE(sentinel::xid_health(c, 79).needs_reboot);
  EXPECT_EQ(sentinel::xid_health(c, 48).state, "Fatal");
  EXPECT_FALSE(sentinel::xid_health(c, 48).needs_reboot);
  EXPECT_EQ(sentinel::xid_health(c, 13).state, "Warning");
  EXPECT_EQ(sentinel::xid_health(c, 63).state, "");
  EXPECT_EQ(sentinel::xid_health(c, 9999).state, "Warning");
  EXPECT_EQ(sentinel::xid_health(c, 9999).reason, "Xid9999");
}

TEST(GoodputModel, TheSameSeedGivesTheSameFigures) {
  Scenario s = Scenario::defaults();
  s.days = 7;
  s.rate_multiplier = 5;
  const auto a = sample_faults(s);
  const auto b = sample_faults(s);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].at, b[i].at);
    EXPECT_EQ(a[i].node, b[i].node);
    EXPECT_EQ(a[i].xid, b[i].xid);
  }
  const auto report = [&](const std::vector<Fault>& faults) {
    std::vector<ConfigurationResult> results;
    for (auto& c : {no_gpufleet(s), gpufleet_node_level(s)}) results.push_back(run(s, faults, *c));
    return core::to_json(report_to_value(s, faults, results));
  };
  EXPECT_EQ(report(a), report(b));
  s.seed = 2;
  EXPECT_NE(report(sample_faults(s)), report(a));
}

// Xid 48 (a double-bit ECC error: Critical, reset-gpu) at 10,000 s on the job's node; the job
// checkpoints hourly (the last before the fault at 7,200 s) and restarts in 600 s.
TEST(GoodputModel, AGpuFaultWithoutGpufleetByHand) {
  const Scenario s = tiny();
  const std::vector<Fault> faults = {gpu_fault(10'000, 48)};
  auto c = no_gpufleet(s);
  const ConfigurationResult r = run(s, faults, *c);
  // The job hangs until the watchdog (600 s): it stops at 10,600; a person's triage (3,600 s)
  // then the restart (600 s): it runs again at 14,800 on the spare node. Lost: 10,600 − 7,200
  // of work computed again (the hang included) and 4,200 s down.
  EXPECT_NEAR(r.ettr, (86400.0 - 3400 - 4200) / 86400, 1e-9);
  EXPECT_NEAR(r.lost_by_category[static_cast<std::size_t>(Category::Gpu)], 7600.0 * 8 / 3600, 1e-9);
  // Nothing gpufleet knows explains it: the ledger's cause is Unknown.
  EXPECT_NEAR(r.lost_by_cause[static_cast<std::size_t>(Cause::Unknown)], 7600.0 * 8 / 3600, 1e-9);
  EXPECT_EQ(r.disruptions, 1);
  EXPECT_EQ(r.interruptions, 1);
  EXPECT_EQ(r.quarantines, 0);
  // The node is out from the triage (14,200) for the repair (8 h), all 8 GPUs.
  EXPECT_NEAR(r.out_of_service_gpu_hours, 8.0 * 8, 1e-9);
  EXPECT_EQ(r.gpu_scoped_faults, 1);
  EXPECT_NEAR(r.lost_per_gpu_scoped_fault(), 7600.0 * 8 / 3600 + 64, 1e-9);
}

TEST(GoodputModel, AGpuFaultWithGpufleetNodeLevelByHand) {
  const Scenario s = tiny();
  const std::vector<Fault> faults = {gpu_fault(10'000, 48)};
  auto c = gpufleet_node_level(s);
  const ConfigurationResult r = run(s, faults, *c);
  // Detected in 5 s, drained in 30 s, restarted in 600 s; 2,800 s of work redone.
  EXPECT_NEAR(r.ettr, (86400.0 - 5 - 30 - 600 - 2800) / 86400, 1e-9);
  EXPECT_NEAR(r.lost_by_cause[static_cast<std::size_t>(Cause::GpuXid)], 3435.0 * 8 / 3600, 1e-9);
  EXPECT_EQ(r.quarantines, 1);
  // The whole node is out for detection, drain, the policy's reboot and the validation.
  EXPECT_NEAR(r.out_of_service_gpu_hours, 8.0 * (5 + 30 + 600 + 900) / 3600, 1e-9);
  EXPECT_NEAR(r.jobs_disrupted_per_gpu_fault(), 1.0, 1e-12);
}

TEST(GoodputModel, AnApplicationXidRestartsTheJobInPlace) {
  // Xid 13 is a Warning (restart-app): no rule of the policy acts, the job's process exits
  // and it restarts on the same node in both configurations.
  const Scenario s = tiny();
  const std::vector<Fault> faults = {gpu_fault(10'000, 13)};
  for (auto& c : {no_gpufleet(s), gpufleet_node_level(s)}) {
    const ConfigurationResult r = run(s, faults, *c);
    EXPECT_NEAR(r.ettr, (86400.0 - 2800 - 600) / 86400, 1e-9) << r.name;
    EXPECT_EQ(r.quarantines, 0) << r.name;
    EXPECT_EQ(r.out_of_service_gpu_hours, 0) << r.name;
  }
}

TEST(GoodputModel, AStragglerSlowsItsJobUntilAPersonNotices) {
  Scenario s = tiny(3);
  Fault f;
  f.at = 1000;
  f.category = Category::Straggler;
  f.scope = Scope::Node;
  f.crashes_job = false;
  for (auto& c : {no_gpufleet(s), gpufleet_node_level(s)}) {
    const ConfigurationResult r = run(s, {f}, *c);
    // 20 % of 8 GPUs for two days, then a restart without the node: the work since the last
    // checkpoint (172,800 of the run's start: 1,000 s) and 600 s of restart.
    EXPECT_NEAR(r.straggler_gpu_hours, 0.2 * 8 * 172800 / 3600, 1e-9) << r.name;
    EXPECT_NEAR(r.ledger_ettr, (259200.0 - 1000 - 600) / 259200, 1e-9) << r.name;
    EXPECT_NEAR(r.ettr, (259200.0 - 1000 - 600 - 0.2 * 172800) / 259200, 1e-9) << r.name;
  }
}

TEST(GoodputModel, NoSpareNodeHoldsTheRestartUntilANodeReturns) {
  Scenario s = tiny();
  s.nodes = 1;  // no spare: the job waits for its own node's repair
  auto c = gpufleet_node_level(s);
  const ConfigurationResult r = run(s, {gpu_fault(10'000, 48)}, *c);
  // Stopped at 10,035; the node is back at 11,535 (5 + 30 + 600 + 900 s); the restart then.
  EXPECT_NEAR(r.ettr, (86400.0 - 2800 - 35 - (11535 - 10035) - 600) / 86400, 1e-9);
}

TEST(GoodputModel, NodeLevelDecisions) {
  const Scenario s = Scenario::defaults();
  auto c = gpufleet_node_level(s);
  FleetView v;
  v.nodes = 1024;
  v.node_runs_job = true;
  const FaultResponse off_bus = c->respond(gpu_fault(0, 79, 1), v);
  EXPECT_TRUE(off_bus.quarantined);
  EXPECT_EQ(off_bus.action, "reboot");  // the rule's remediate
  EXPECT_EQ(off_bus.incident_check, "xid");
  EXPECT_EQ(off_bus.out_gpus, 8);
  EXPECT_EQ(off_bus.out_for_s, 5 + 30 + 600 + 900);
  Fault host;
  host.category = Category::Host;
  host.node = 2;
  const FaultResponse h = c->respond(host, v);  // no monitor sees it: the manual path
  EXPECT_FALSE(h.quarantined);
  EXPECT_EQ(h.stop_after_s, s.manual.crash_detect_s);
  Fault flap;
  flap.category = Category::LinkFlap;
  flap.scope = Scope::Link;
  flap.node = 3;
  flap.crashes_job = false;
  const FaultResponse fl = c->respond(flap, v);  // seen as a port down: cordoned and drained
  EXPECT_TRUE(fl.quarantined);
  EXPECT_TRUE(fl.stops_job);
  EXPECT_EQ(fl.incident_check, "ib-port");
  EXPECT_EQ(fl.out_for_s, 35);
  auto a = no_gpufleet(s);
  EXPECT_FALSE(a->respond(flap, v).stops_job);  // without gpufleet the job rides it out
}

TEST(GoodputModel, TheCircuitBreakerLimitsConcurrentQuarantines) {
  Scenario s = Scenario::defaults();
  s.policy["breaker"] = core::parse_yaml("{windowSeconds: 600, maxNodes: 2}");
  auto c = gpufleet_node_level(s);
  FleetView v;
  v.nodes = 1024;
  EXPECT_TRUE(c->respond(gpu_fault(0, 48, 1), v).quarantined);
  v.now = 10;
  EXPECT_TRUE(c->respond(gpu_fault(10, 48, 2), v).quarantined);
  v.now = 20;
  const FaultResponse third = c->respond(gpu_fault(20, 48, 3), v);
  EXPECT_FALSE(third.quarantined);
  EXPECT_TRUE(third.breaker_refused);
  EXPECT_EQ(third.stop_after_s, s.manual.crash_detect_s);  // left to the manual path
}

TEST(GoodputModel, AJobAwareConfigurationPlugsIn) {
  // The extension point: a configuration that checkpoints before the drain loses no work.
  class CheckpointFirst final : public Configuration {
   public:
    explicit CheckpointFirst(const Scenario& s) : inner_(gpufleet_node_level(s)) {}
    [[nodiscard]] std::string name() const override { return "checkpoint-first"; }
    FaultResponse respond(const Fault& f, const FleetView& v) override {
      FaultResponse r = inner_->respond(f, v);
      r.checkpoint_before_stop = true;
      return r;
    }

   private:
    std::unique_ptr<Configuration> inner_;
  };
  const Scenario s = tiny();
  Fault flap;
  flap.at = 10'000;
  flap.category = Category::LinkFlap;
  flap.scope = Scope::Link;
  flap.crashes_job = false;
  CheckpointFirst c(s);
  const ConfigurationResult r = run(s, {flap}, c);
  // No work redone: detection, drain and the restart only.
  EXPECT_NEAR(r.ettr, (86400.0 - 35 - 600) / 86400, 1e-9);
}

TEST(GoodputModel, TheScenarioIsReadStrictly) {
  const auto read = [](std::string_view yaml) {
    return Scenario::from_value(core::parse_yaml(yaml), "scenario.yaml");
  };
  EXPECT_EQ(read("{nodes: 1000, days: 3}").nodes, 1000);
  EXPECT_THROW(read("{nodse: 900}"), core::InvalidInput);
  try {
    read("{nodes: 16}");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("16 nodes cannot hold the jobs' 960 nodes"),
              std::string::npos)
        << e.what();
  }
  try {
    read("{xids: [{code: 4242, weight: 1}]}");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("xids[0].code"), std::string::npos) << e.what();
  }
  const std::string text = core::read_file(GPUFLEET_SOURCE_DIR + "/bench/goodput/llama3-1024.yaml");
  const Scenario file = read(text);
  const Scenario d = Scenario::defaults();
  EXPECT_EQ(file.nodes, d.nodes);
  EXPECT_EQ(file.jobs.size(), d.jobs.size());
  EXPECT_NEAR(file.interruptions_per_gpu_hour, d.interruptions_per_gpu_hour, 1e-8);
  EXPECT_EQ(core::to_json(file.policy), core::to_json(d.policy));
}

}  // namespace
}  // namespace gpufleet::goodput::model
