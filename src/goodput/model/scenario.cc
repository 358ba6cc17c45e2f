// The benchmark's scenario: its defaults and its strict reader.
#include <limits>
#include <string>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/xid_catalog.h"
#include "core/yaml.h"
#include "goodput/model/model.h"

namespace gpufleet::goodput::model {
namespace {

// The policy of the node-level configuration: the documented default rules (docs/sentinel.md
// "SentinelPolicy"), a reboot for a fatal Xid, nothing but the cordon for a link down.
constexpr std::string_view kDefaultPolicy = R"(
rules:
- {name: xid-fatal, when: "event.check == 'xid' && event.state == 'Fatal'", cordon: true,
   taint: "nvidia.com/gpu-error=fatal:NoSchedule", remediate: reboot}
- {name: ib-down, when: "event.check == 'ib-port' && event.state == 'Fatal'", cordon: true,
   remediate: none}
)";

constexpr std::int64_t kDay = 86400;

JobSpec job_shape(std::string name, std::int64_t count, std::int64_t nodes,
                  std::int64_t checkpoint_s) {
  JobSpec j;
  j.name = std::move(name);
  j.count = count;
  j.nodes = nodes;
  j.checkpoint_s = checkpoint_s;
  return j;
}

}  // namespace

Scenario Scenario::defaults() {
  Scenario s;
  s.jobs = {job_shape("pretrain", 1, 768, 3600), job_shape("finetune", 16, 8, 1800),
            job_shape("eval", 32, 2, 1800)};
  // Which Xids make up the GPU-related faults is an assumption (docs/goodput.md): the run's
  // report groups them by component, not by code.
  s.xids = {{79, 0.25}, {48, 0.15}, {64, 0.10}, {95, 0.10}, {119, 0.15}, {74, 0.10}, {13, 0.15}};
  s.policy = core::parse_yaml(kDefaultPolicy, "the default policy");
  return s;
}

Scenario Scenario::from_value(const core::Value& v, std::string_view source) {
  Scenario s = defaults();
  const std::string src(source);
  core::FieldReader r(v, src, "");
  s.seed = static_cast<std::uint64_t>(
      r.integer("seed", 1, 0, std::numeric_limits<std::int64_t>::max(), "a whole number"));
  s.nodes = r.integer("nodes", s.nodes, 1, 100'000, "a number of nodes, e.g. 1024");
  s.gpus_per_node = r.integer("gpusPerNode", s.gpus_per_node, 1, 16, "e.g. 8");
  s.days = r.integer("days", s.days, 1, 3650, "the simulated length in days, e.g. 28");
  s.interruptions_per_gpu_hour =
      r.number("interruptionsPerGpuHour", s.interruptions_per_gpu_hour, 0, 1,
               "interruptions per GPU-hour, e.g. 1.97e-5 (Llama 3)");
  s.rate_multiplier = r.number("rateMultiplier", s.rate_multiplier, 0, 1000, "e.g. 1");
  s.gpu_fraction = r.number("gpuFraction", s.gpu_fraction, 0, 1, "a share, e.g. 0.587");
  s.network_share = r.number("networkShare", s.network_share, 0, 1, "a share of the rest");
  s.host_share = r.number("hostShare", s.host_share, 0, 1, "a share of the rest");
  s.software_share = r.number("softwareShare", s.software_share, 0, 1, "a share of the rest");
  if (s.network_share + s.host_share + s.software_share <= 0) {
    r.fail("softwareShare", core::Value(s.software_share),
           "networkShare + hostShare + softwareShare is 0", "give at least one a share above 0");
  }
  s.hardware_fraction =
      r.number("hardwareFraction", s.hardware_fraction, 0, 1, "a share, e.g. 0.25");
  s.hardware_repair_s = r.integer("hardwareRepairSeconds", s.hardware_repair_s, 0, 365 * kDay,
                                  "seconds, e.g. 259200");
  s.link_flaps_per_node_day =
      r.number("linkFlapsPerNodeDay", s.link_flaps_per_node_day, 0, 100, "e.g. 0.01");
  s.link_flap_down_s =
      r.integer("linkFlapDownSeconds", s.link_flap_down_s, 1, 86400, "seconds, e.g. 20");
  s.link_flap_crash_fraction =
      r.number("linkFlapCrashFraction", s.link_flap_crash_fraction, 0, 1, "a share, e.g. 0.25");
  s.stragglers_per_node_day =
      r.number("stragglersPerNodeDay", s.stragglers_per_node_day, 0, 100, "e.g. 0.002");
  s.straggler_slowdown =
      r.number("stragglerSlowdown", s.straggler_slowdown, 0, 0.99, "a share, e.g. 0.2");
  if (const core::Value* x = r.get("xids")) {
    if (!x->is_list() || x->size() == 0) {
      r.fail("xids", *x, "is not a list of {code, weight}", "e.g. [{code: 79, weight: 1}]");
    }
    s.xids.clear();
    for (std::size_t i = 0; i < x->size(); ++i) {
      core::FieldReader e((*x)[i], src, "xids[" + std::to_string(i) + "]");
      XidShare share;
      share.code = static_cast<int>(e.integer("code", std::nullopt, 1, 1000, "an Xid code"));
      if (core::XidCatalog::builtin().find(share.code) == nullptr) {
        e.fail("code", core::Value(share.code), "is not in the Xid catalog",
               "use a code of data/xid/catalog.yaml");
      }
      share.weight = e.number("weight", std::nullopt, 0, 1e9, "a relative weight, e.g. 0.25");
      e.done();
      s.xids.push_back(share);
    }
  }
  if (const core::Value* j = r.get("jobs")) {
    if (!j->is_list() || j->size() == 0) {
      r.fail("jobs", *j, "is not a list of jobs", "e.g. [{name: pretrain, nodes: 768}]");
    }
    s.jobs.clear();
    std::int64_t used = 0;
    for (std::size_t i = 0; i < j->size(); ++i) {
      core::FieldReader e((*j)[i], src, "jobs[" + std::to_string(i) + "]");
      JobSpec spec;
      spec.name = e.required_string("name", "a name, e.g. pretrain");
      spec.count = e.integer("count", 1, 1, 100'000, "a number of jobs");
      spec.nodes = e.integer("nodes", std::nullopt, 1, 100'000, "nodes per job, e.g. 768");
      spec.checkpoint_s = e.integer("checkpointSeconds", spec.checkpoint_s, 60, 30 * kDay,
                                    "seconds between checkpoints, e.g. 1800");
      spec.restart_s = e.integer("restartSeconds", spec.restart_s, 0, kDay, "seconds, e.g. 600");
      e.done();
      used += spec.count * spec.nodes;
      s.jobs.push_back(std::move(spec));
    }
    if (used > s.nodes) {
      r.fail("jobs", *j,
             "asks for " + std::to_string(used) + " nodes, more than the fleet's " +
                 std::to_string(s.nodes),
             "fewer or smaller jobs, or more nodes");
    }
  }
  if (const core::Value* m = r.get("manual")) {
    core::FieldReader e(*m, src, "manual");
    s.manual.crash_detect_s =
        e.integer("crashDetectSeconds", s.manual.crash_detect_s, 0, kDay, "seconds, e.g. 600");
    s.manual.triage_s = e.integer("triageSeconds", s.manual.triage_s, 0, 30 * kDay, "seconds");
    s.manual.repair_s = e.integer("repairSeconds", s.manual.repair_s, 0, 365 * kDay, "seconds");
    s.manual.straggler_notice_s =
        e.integer("stragglerNoticeSeconds", s.manual.straggler_notice_s, 0, 365 * kDay, "seconds");
    e.done();
  }
  if (const core::Value* g = r.get("gpufleet")) {
    core::FieldReader e(*g, src, "gpufleet");
    s.gpufleet.detect_s = e.integer("detectSeconds", s.gpufleet.detect_s, 0, kDay, "seconds");
    s.gpufleet.drain_s = e.integer("drainSeconds", s.gpufleet.drain_s, 0, kDay, "seconds");
    s.gpufleet.gpu_reset_s =
        e.integer("gpuResetSeconds", s.gpufleet.gpu_reset_s, 0, kDay, "seconds");
    s.gpufleet.reboot_s = e.integer("rebootSeconds", s.gpufleet.reboot_s, 0, kDay, "seconds");
    s.gpufleet.validate_s = e.integer("validateSeconds", s.gpufleet.validate_s, 0, kDay, "seconds");
    e.done();
  }
  if (const core::Value* p = r.get("policy")) s.policy = *p;
  r.done();
  // The job set must fit also when read from the defaults with a smaller fleet.
  std::int64_t used = 0;
  for (const auto& j : s.jobs) used += j.count * j.nodes;
  if (used > s.nodes) {
    throw core::InvalidInput(core::located(src, "nodes") + ": " + std::to_string(s.nodes) +
                             " nodes cannot hold the jobs' " + std::to_string(used) +
                             " nodes (give `jobs` that fit, or more nodes)");
  }
  return s;
}

}  // namespace gpufleet::goodput::model
