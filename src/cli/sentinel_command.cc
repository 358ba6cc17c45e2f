// The `sentinel` controller's registration (run by `gpufleet controller --controllers=sentinel`)
// and the operator verbs: `gpufleet sentinel status` (quarantined nodes, incidents by phase,
// breaker state; table or -o json) and `gpufleet sentinel reset-breaker`.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>

#include "cli/command.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/time.h"
#include "kube/api/cordon.h"
#include "kube/api/meta.h"
#include "kube/api/names.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "sentinel/controller.h"
#include "sentinel/quarantine.h"
#include "sim/control_inbox.h"

namespace gpufleet::cli {
namespace {

// Remediation on the simulator: the reboot (or GPU reset) really happens in the simulated
// fleet, through its control inbox, as an operator's `gpufleet sim inject` would. A marker per
// (incident, attempt) under <state-dir>/control/sentinel/ makes the request idempotent.
class SimRemediator final : public sentinel::Remediator {
 public:
  SimRemediator(std::string state_dir, std::string down)
      : dir_(std::move(state_dir)), down_(std::move(down)) {}
  void request(const sentinel::RemediationRequest& r) override {
    const std::filesystem::path marks = std::filesystem::path(dir_) / "control" / "sentinel";
    const std::filesystem::path mark = marks / (r.incident + "-" + std::to_string(r.attempt));
    std::error_code ec;
    if (std::filesystem::exists(mark, ec)) return;
    core::Value ev = core::Value::map();
    ev["node"] = r.node;
    if (r.action == "reboot") {
      ev["type"] = "reboot";
      ev["down"] = down_;
      sim::submit_control_event(dir_, ev);
    } else if (r.gpus.empty()) {
      ev["type"] = "gpuReset";
      sim::submit_control_event(dir_, ev);
    } else {
      ev["type"] = "gpuReset";
      for (const auto& uuid : r.gpus) {  // only the faulty GPUs
        ev["uuid"] = uuid;
        sim::submit_control_event(dir_, ev);
      }
    }
    std::filesystem::create_directories(marks, ec);
    std::ofstream(mark) << r.action << "\n";
  }

 private:
  std::string dir_;
  std::string down_;
};

// Node replacement on the simulator (provider "simulator"): the machine behind the node is
// re-provisioned — its faults cleared and rebooted, so it comes back with a new boot id — and
// its Node object is deleted (only the one being replaced: uid precondition); the simulated
// kubelet registers it again under the same name, as a new Node (new uid) that sentinel holds
// until certify passes it. A marker per (incident, attempt) under <state-dir>/control/sentinel/
// makes the request idempotent: "requested" once the simulator has it, "deleted" once the old
// Node is gone.
class SimReplacementProvider final : public sentinel::ReplacementProvider {
 public:
  SimReplacementProvider(std::string state_dir, std::string down, kube::Client& client)
      : dir_(std::move(state_dir)), down_(std::move(down)), client_(client) {}

  void request(const sentinel::ReplacementRequest& r) override {
    const std::filesystem::path marks = std::filesystem::path(dir_) / "control" / "sentinel";
    const std::filesystem::path mark =
        marks / ("replace-" + r.incident + "-" + std::to_string(r.attempt));
    const std::string state = read_mark(mark);
    if (state == "deleted") return;
    std::error_code ec;
    std::filesystem::create_directories(marks, ec);
    if (state.empty()) {
      core::Value ev = core::Value::map();
      ev["node"] = r.node;
      ev["type"] = "clear";  // a fresh machine: no fault of the old one
      sim::submit_control_event(dir_, ev);
      ev["type"] = "reboot";
      ev["down"] = down_;
      sim::submit_control_event(dir_, ev);
      std::ofstream(mark) << "requested\n";
    }
    kube::DeleteOptions o;
    o.precondition_uid = r.node_uid;  // never the replacement, should it be there already
    try {
      client_.remove(kube::resources::nodes(), "", r.node, o);
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::NotFound) && !e.is(kube::Reason::Conflict)) throw;
    }
    std::ofstream(mark) << "deleted\n";
  }

  sentinel::ReplacementStatus poll(const sentinel::ReplacementRequest& r) override {
    const std::filesystem::path mark = std::filesystem::path(dir_) / "control" / "sentinel" /
                                       ("replace-" + r.incident + "-" + std::to_string(r.attempt));
    if (read_mark(mark) != "deleted") return {};
    return {sentinel::ReplacementStatus::State::Done,
            "the simulator re-provisioned " + r.node + " and deleted its Node " + r.node_uid};
  }

 private:
  static std::string read_mark(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::string line;
    std::getline(in, line);
    return line;
  }
  std::string dir_;
  std::string down_;
  kube::Client& client_;
};

// --set sentinel.policy=a,b: the names followed ("" follows every SentinelPolicy).
std::vector<std::string> policy_names(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size() && !list.empty()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, end - start);
    if (std::string why = kube::check_dns_subdomain(name); !why.empty()) {
      throw core::InvalidInput("--set sentinel.policy=" + list + ": \"" + name +
                               "\" is not a SentinelPolicy name (" + why +
                               "); give names separated by commas, or leave it unset to follow "
                               "every policy");
    }
    out.push_back(std::move(name));
    start = end + 1;
  }
  return out;
}

const controller::Registration kSentinel({
    .name = "sentinel",
    .description = "quarantines faulty GPU nodes behind a circuit breaker, drains, remediates "
                   "and returns them once certify passes them (SentinelPolicy, Remediation)",
    .settings = {{"sentinel.policy",
                  "the SentinelPolicies followed, comma-separated (default: every one)"},
                 {"sentinel.workers", "nodes reconciled in parallel (default 8)"},
                 {"sentinel.sim-state-dir",
                  "remediate through this simulator's control inbox instead of the agent"},
                 {"sentinel.sim-reboot-down",
                  "how long a simulated reboot keeps the node down "
                  "(default 5s)"},
                 {"sentinel.sim-replacement-state-dir",
                  "register the replacement provider \"simulator\" on this simulator "
                  "(default: sentinel.sim-state-dir)"}},
    .setup =
        [](controller::Manager& m, const controller::Context& ctx) {
          sentinel::SentinelOptions o;
          o.policies = policy_names(ctx.setting("sentinel.policy", ""));
          const std::string workers = ctx.setting("sentinel.workers", "8");
          try {
            o.workers = std::stoi(workers);
          } catch (const std::exception&) {
            o.workers = 0;
          }
          if (o.workers < 1 || o.workers > 64) {
            throw core::InvalidInput("--set sentinel.workers=" + workers +
                                     ": use an integer in [1, 64]");
          }
          const std::string sim = ctx.setting("sentinel.sim-state-dir", "");
          if (!sim.empty()) {
            o.remediator =
                std::make_unique<SimRemediator>(sim, ctx.setting("sentinel.sim-reboot-down", "5s"));
          }
          const std::string replace_dir = ctx.setting("sentinel.sim-replacement-state-dir", sim);
          if (!replace_dir.empty()) {
            o.providers["simulator"] = std::make_shared<SimReplacementProvider>(
                replace_dir, ctx.setting("sentinel.sim-reboot-down", "5s"), m.client());
          }
          sentinel::setup_sentinel(m, std::move(o));
        },
});

struct SentinelFlags {
  std::string kubeconfig;
  std::string context;
  std::string output = "table";
  std::string policy;  // status: "" shows every policy; reset-breaker: required
};

// An integer field, or 0 when absent or not an integer.
std::int64_t int_at(const core::Value& v, std::initializer_list<std::string_view> path) {
  const core::Value* f = v.get(path);
  const std::int64_t* i = f != nullptr ? f->if_int() : nullptr;
  return i != nullptr ? *i : 0;
}

core::Value policy_summary(const core::Value& pol) {
  core::Value p = core::Value::map();
  p["name"] = kube::name_of(pol);
  p["priority"] = int_at(pol, {"spec", "priority"});
  p["gpuNodes"] = int_at(pol, {"status", "gpuNodes"});
  p["overlappingNodes"] = int_at(pol, {"status", "overlappingNodes"});
  core::Value breaker = core::Value::map();
  breaker["state"] = "Unknown";  // until the controller has written the policy's status
  if (const core::Value* b = pol.get({"status", "breaker"})) {
    for (const char* k : {"state", "uniqueNodes", "threshold", "refused", "message"})
      if (const core::Value* v = b->find(k)) breaker[k] = *v;
  }
  p["breaker"] = std::move(breaker);
  return p;
}

// `policy_name` "" reports every SentinelPolicy and every incident; a name reports that policy
// and the incidents opened under it, and a policy that does not exist is an error.
core::Value status_json(kube::Client& client, const std::string& policy_name) {
  core::Value out = core::Value::map();
  core::Value policies = core::Value::list();
  if (policy_name.empty()) {
    for (const auto& pol : client.list(sentinel::api::sentinel_policies(), "").items)
      policies.push_back(policy_summary(pol));
  } else {
    auto pol = client.try_get(sentinel::api::sentinel_policies(), "", policy_name);
    if (!pol)
      throw core::NotFound("--policy " + policy_name +
                           ": no SentinelPolicy of that name (kubectl get sentinelpolicies "
                           "lists them; leave --policy out to see every policy)");
    policies.push_back(policy_summary(*pol));
  }
  out["policies"] = std::move(policies);
  core::Value phases = core::Value::map();
  core::Value incidents = core::Value::list();
  for (const auto& r : client.list(sentinel::api::remediations(), "").items) {
    std::string under(kube::annotation_of(r, sentinel::kPolicyLabel));
    if (!policy_name.empty() && under != policy_name) continue;
    std::string phase(r.get_string({"status", "phase"}));
    if (phase.empty()) phase = "Detected";
    const core::Value* n = phases.find(phase);
    phases[phase] = (n != nullptr ? n->as_int() : 0) + 1;
    if (phase == "Released" || phase == "Cancelled") continue;
    core::Value i = core::Value::map();
    i["name"] = kube::name_of(r);
    i["node"] = r.get_string({"spec", "nodeName"});
    i["policy"] = std::move(under);
    i["phase"] = phase;
    i["reason"] = r.get_string({"spec", "reason"});
    i["message"] = r.get_string({"status", "message"});
    incidents.push_back(std::move(i));
  }
  out["incidentsByPhase"] = std::move(phases);
  out["openIncidents"] = std::move(incidents);
  core::Value quarantined = core::Value::list();
  for (const auto& n : client.list(kube::resources::nodes(), "").items) {
    if (kube::annotation_of(n, sentinel::kQuarantineAnnotation).empty()) continue;
    core::Value q = core::Value::map();
    q["node"] = kube::name_of(n);
    q["cordonOwners"] = kube::annotation_of(n, kube::kCordonOwnersAnnotation);
    // A parsed object, not the annotation's JSON text: no JSON inside JSON.
    const std::string record(kube::annotation_of(n, sentinel::kQuarantineAnnotation));
    try {
      q["quarantine"] = core::parse_json(record);
    } catch (const core::InvalidInput&) {
      q["quarantine"] = record;  // unreadable: shown as it is
    }
    quarantined.push_back(std::move(q));
  }
  out["quarantinedNodes"] = std::move(quarantined);
  return out;
}

void print_table(const core::Value& s) {
  std::cout << "POLICIES\n";
  std::cout << "  " << std::left << std::setw(28) << "NAME" << std::setw(10) << "PRIORITY"
            << std::setw(11) << "GPU NODES" << std::setw(10) << "BREAKER"
            << "WINDOW NODES / THRESHOLD\n";
  for (const auto& p : s.get({"policies"})->as_list()) {
    std::cout << "  " << std::left << std::setw(28) << p.get_string({"name"}) << std::setw(10)
              << int_at(p, {"priority"}) << std::setw(11) << int_at(p, {"gpuNodes"})
              << std::setw(10) << p.get_string({"breaker", "state"}, "Unknown");
    const core::Value* u = p.get({"breaker", "uniqueNodes"});
    const core::Value* t = p.get({"breaker", "threshold"});
    if (u != nullptr && t != nullptr) std::cout << core::to_json(*u) << " / " << core::to_json(*t);
    std::cout << "\n";
    if (auto m = p.get_string({"breaker", "message"}); !m.empty()) std::cout << "    " << m << "\n";
  }
  std::cout << "\nINCIDENTS BY PHASE\n";
  for (const auto& e : s.get({"incidentsByPhase"})->as_map())
    std::cout << "  " << std::left << std::setw(12) << e.key << " " << core::to_json(e.value)
              << "\n";
  std::cout << "\nOPEN INCIDENTS\n";
  std::cout << "  " << std::left << std::setw(40) << "NAME" << std::setw(24) << "NODE"
            << std::setw(20) << "POLICY" << std::setw(12) << "PHASE"
            << "MESSAGE\n";
  for (const auto& i : s.get({"openIncidents"})->as_list())
    std::cout << "  " << std::left << std::setw(40) << i.get_string({"name"}) << std::setw(24)
              << i.get_string({"node"}) << std::setw(20) << i.get_string({"policy"})
              << std::setw(12) << i.get_string({"phase"}) << i.get_string({"message"}) << "\n";
  std::cout << "\nQUARANTINED NODES\n";
  for (const auto& q : s.get({"quarantinedNodes"})->as_list()) {
    const core::Value* rec = q.get({"quarantine"});
    std::cout << "  " << std::left << std::setw(24) << q.get_string({"node"})
              << " owners=" << q.get_string({"cordonOwners"}) << " "
              << (rec != nullptr && rec->is_string() ? rec->as_string() : core::to_json(*rec))
              << "\n";
  }
}

void setup_sentinel_command(CLI::App& root) {
  auto flags = std::make_shared<SentinelFlags>();
  auto* cmd = root.add_subcommand("sentinel", "Health sentinel: incidents and circuit breaker");
  cmd->require_subcommand(1);
  // On each verb, so that `gpufleet sentinel status --kubeconfig K` reads naturally.
  auto common = [&](CLI::App* sub) {
    sub->add_option("--kubeconfig", flags->kubeconfig, "kubeconfig file");
    sub->add_option("--context", flags->context, "kubeconfig context");
  };
  auto* status =
      cmd->add_subcommand("status", "quarantined nodes, incidents by phase, breaker state");
  common(status);
  status->add_option("--policy", flags->policy, "one SentinelPolicy (default: every policy)");
  status->add_option("-o,--output", flags->output, "table or json")->capture_default_str();
  status->callback([flags] {
    if (flags->output != "table" && flags->output != "json")
      throw core::InvalidInput("-o " + flags->output + ": use table or json");
    kube::Client client(kube::load_default_config(flags->kubeconfig, flags->context));
    core::Value s = status_json(client, flags->policy);
    if (flags->output == "json") {
      std::cout << core::to_json(s) << "\n";
    } else {
      print_table(s);
    }
  });
  auto* reset = cmd->add_subcommand(
      "reset-breaker", "close a tripped circuit breaker (new quarantines allowed again)");
  common(reset);
  reset->add_option("--policy", flags->policy, "the SentinelPolicy whose breaker to close")
      ->required();
  reset->callback([flags] {
    kube::Client client(kube::load_default_config(flags->kubeconfig, flags->context));
    core::Value patch;
    // A new token each time: the controller resets when the token differs from the last one
    // it applied (status.breaker.lastResetToken), so the verb is level-triggered and durable.
    patch["metadata"]["annotations"][sentinel::kResetBreakerAnnotation] =
        core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Nanos);
    client.patch(sentinel::api::sentinel_policies(), "", flags->policy, kube::PatchType::Merge,
                 patch);
    std::cout << "sentinelpolicy/" << flags->policy << ": breaker reset requested\n";
  });
}

const CommandRegistration kSentinelCommand(setup_sentinel_command);

}  // namespace
}  // namespace gpufleet::cli
