// The built configurations: (a) no gpufleet and (b) gpufleet node-level. (b) decides through
// sentinel's own code: the kernel-log monitor's Xid → health mapping, the policy's compiled
// rules, the policy's circuit breaker and its remediation settings.
#include <algorithm>
#include <string>

#include "core/xid_catalog.h"
#include "goodput/model/model.h"
#include "sentinel/breaker.h"
#include "sentinel/ib_monitor.h"
#include "sentinel/kmsg_monitor.h"
#include "sentinel/policy.h"
#include "sentinel/rules.h"

namespace gpufleet::goodput::model {
namespace {

class NoGpufleet final : public Configuration {
 public:
  explicit NoGpufleet(const Scenario& s) : s_(s) {}
  [[nodiscard]] std::string name() const override { return "no-gpufleet"; }

  FaultResponse respond(const Fault& f, const FleetView& /*view*/) override {
    return manual_response(s_, f);
  }

  // Also what (b) does with a fault no monitor sees or the breaker refused.
  static FaultResponse manual_response(const Scenario& s, const Fault& f) {
    FaultResponse r;
    const ManualPolicy& m = s.manual;
    r.action = "manual";
    switch (f.category) {
      case Category::Software:
        r.stops_job = true;  // the process exits; its restart policy runs it again
        return r;
      case Category::LinkFlap:
        r.stops_job = f.crashes_job;  // NCCL aborts on the error; the link is back already
        return r;
      case Category::Straggler:
        // Nobody sees a slow node until a person looks into a slow job: then the job is
        // restarted without it and the node repaired.
        r.stops_job = true;
        r.stop_after_s = m.straggler_notice_s;
        r.out_gpus = s.gpus_per_node;
        r.out_after_s = m.straggler_notice_s;
        r.out_for_s = m.repair_s;
        return r;
      case Category::Gpu:
        if (f.scope == Scope::None) {  // an application error: the job restarts where it was
          r.stops_job = true;
          return r;
        }
        break;
      case Category::Network:
      case Category::Host: break;
    }
    // A broken GPU, link or host: the other ranks hang until the watchdog kills the job; a
    // person finds the node the crash points at, takes it out and repairs it, and the job
    // restarts without it.
    r.stops_job = true;
    r.stop_after_s = m.crash_detect_s;
    r.resume_after_s = m.triage_s;
    r.out_gpus = s.gpus_per_node;
    r.out_after_s = m.crash_detect_s + m.triage_s;
    r.out_for_s = m.repair_s + (f.hardware ? s.hardware_repair_s : 0);
    return r;
  }

 private:
  const Scenario& s_;
};

class NodeLevel final : public Configuration {
 public:
  explicit NodeLevel(const Scenario& s)
      : s_(s),
        policy_(sentinel::Policy::from_spec(s.policy)),
        rules_(sentinel::RuleSet::compile(policy_.rules, policy_.cost_limit)),
        breaker_(policy_.breaker) {}
  [[nodiscard]] std::string name() const override { return "gpufleet-node-level"; }

  FaultResponse respond(const Fault& f, const FleetView& view) override {
    core::Value event;
    bool seen = false;
    bool needs_reboot = false;
    if (f.category == Category::Gpu) {
      const sentinel::XidHealth h = sentinel::xid_health(core::XidCatalog::builtin(), f.xid);
      // An Xid that changes no health state is an event only: no rule sees it.
      seen = !h.state.empty();
      needs_reboot = h.needs_reboot;
      event["check"] = std::string(sentinel::kXidCheck);
      event["entity"] = gpu_uuid(f);
      event["kind"] = "GPU";
      event["state"] = h.state;
      event["reason"] = h.reason;
      event["message"] = h.reason + " on " + gpu_uuid(f);
    } else if (f.category == Category::Network || f.category == Category::LinkFlap) {
      // The ib-port monitor reports a port down that lasts at least one poll (a shorter flap
      // shows only in its counters, a Warning after 3 in 10 minutes).
      const std::int64_t poll_s =
          std::max<std::int64_t>(1, sentinel::IbMonitorOptions{}.interval.count() / 1000);
      seen = f.category == Category::Network || s_.link_flap_down_s >= poll_s;
      event["check"] = std::string(sentinel::kIbCheck);
      event["entity"] = "mlx5_" + std::to_string(f.gpu) + "/1";
      event["kind"] = "NIC";
      event["state"] = "Fatal";
      event["reason"] = "PortDown";
      event["message"] = "port down";
    }
    if (!seen) return NoGpufleet::manual_response(s_, f);
    const std::string node = node_name(f.node);
    core::Value health;
    core::Value entity = event;
    health["metadata"]["name"] = node;
    core::Value check;
    check["name"] = std::string(event.get_string({"check"}));
    check["state"] = std::string(event.get_string({"state"}));
    check["entities"].push_back(entity);
    health["status"]["checks"].push_back(check);
    core::Value node_obj;
    node_obj["metadata"]["name"] = node;
    node_obj["metadata"]["labels"]["nvidia.com/gpu.present"] = "true";
    const sentinel::Decision d =
        rules_.evaluate(event, health, node_obj, core::Value(core::List{}), nullptr);
    if (!d.cordon && d.taints.empty()) return NoGpufleet::manual_response(s_, f);
    const std::int64_t now_ms = (kEpoch + view.now) * 1000;
    const sentinel::BreakerDecision admitted =
        breaker_.admit(node, now_ms, static_cast<std::size_t>(view.nodes));
    if (!admitted.admitted) {
      FaultResponse r = NoGpufleet::manual_response(s_, f);
      r.breaker_refused = true;
      return r;
    }
    // The incident's action: the strongest a matching rule asked for, else the policy's
    // default (docs/sentinel.md "Remediation actions").
    std::string action = d.remediate.empty() ? policy_.remediation.default_action : d.remediate;
    if (!policy_.remediation.enabled) action = "none";
    const GpufleetTimes& t = s_.gpufleet;
    std::int64_t remediate_s = 0;
    if (action == "gpu-reset") {
      // A GPU that needs a reboot stays faulty after its reset: the attempts are used up and
      // the incident escalates to a reboot.
      remediate_s = t.gpu_reset_s * (needs_reboot ? policy_.remediation.max_attempts : 1) +
                    (needs_reboot ? t.reboot_s : 0);
    } else if (action == "reboot") {
      remediate_s = t.reboot_s;
    } else if (action == "replace") {
      remediate_s = s_.manual.repair_s;
    }
    FaultResponse r;
    r.quarantined = true;
    r.gpufleet_acts = true;
    r.acted_after_s = t.detect_s;
    r.incident_check = std::string(event.get_string({"check"}));
    r.action = action;
    // sentinel drains the node at once: the job stops when its pods there are gone.
    r.stops_job = true;
    r.stop_after_s = t.detect_s + t.drain_s;
    r.out_gpus = s_.gpus_per_node;
    if (f.category == Category::LinkFlap) {
      // The port is back before the drain ends: the incident is released, no validation.
      r.out_for_s = std::max(s_.link_flap_down_s, r.stop_after_s);
      return r;
    }
    r.out_for_s = t.detect_s + t.drain_s + remediate_s + t.validate_s;
    if (f.category == Category::Network) {
      // No action sentinel has brings a dead link back: the validation fails, the node stays
      // out until a person repairs it.
      r.out_for_s += s_.manual.triage_s + s_.manual.repair_s;
    } else if (f.hardware) {
      // The reset or reboot did not fix it: validation fails, the incident Fails and the node
      // stays out for a hardware repair.
      r.out_for_s += s_.manual.triage_s + s_.hardware_repair_s;
    }
    return r;
  }

 private:
  static std::string node_name(std::int64_t n) { return "node-" + std::to_string(n); }
  static std::string gpu_uuid(const Fault& f) {
    return "GPU-" + std::to_string(f.node) + "-" + std::to_string(f.gpu);
  }

  const Scenario& s_;
  sentinel::Policy policy_;
  sentinel::RuleSet rules_;
  sentinel::CircuitBreaker breaker_;
};

}  // namespace

std::unique_ptr<Configuration> no_gpufleet(const Scenario& s) {
  return std::make_unique<NoGpufleet>(s);
}

std::unique_ptr<Configuration> gpufleet_node_level(const Scenario& s) {
  return std::make_unique<NodeLevel>(s);
}

}  // namespace gpufleet::goodput::model
