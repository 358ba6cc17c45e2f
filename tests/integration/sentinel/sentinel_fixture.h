// The fixture of sentinel's integration tests against the real kube-apiserver of kube-local.
// The tests play the agents (they write NodeHealth as an agent would) and certify (they answer
// ValidationRequests by writing their status), which exercises both contracts; Nodes and Pods
// are plain API objects. Included once by each test file of sentinel_integration_test.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "controller/budget.h"
#include "controller/manager.h"
#include "core/json.h"
#include "core/metrics.h"
#include "core/time.h"
#include "core/yaml.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/errors.h"
#include "process.h"
#include "sentinel/controller.h"
#include "sentinel/quarantine.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet::sentinel {
namespace {

using namespace std::chrono_literals;
using controller::testing::wait_until;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SentinelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kube::Client client(kube::testing::admin_config());
    for (const char* f :
         {"nodehealth", "sentinelpolicy", "remediation", "validationrequest", "disruptionbudget"}) {
      core::Value crd = core::parse_yaml(
          read_file(std::string(GPUFLEET_SOURCE_DIR) + "/deploy/crds/" + f + ".yaml"));
      client.apply(kube::resources::custom_resource_definitions(), crd,
                   {.field_manager = "sentinel-test", .force = true});
    }
    for (const auto& r : {api::node_healths(), api::sentinel_policies(), api::remediations(),
                          api::validation_requests()}) {
      ASSERT_TRUE(wait_until(
          [&] {
            try {
              (void)client.list_page(r, "", {});
              return true;
            } catch (const std::exception&) {
              return false;
            }
          },
          30s))
          << r.resource;
    }
  }

  void SetUp() override {
    client_ = std::make_unique<kube::Client>(kube::testing::admin_config());
    prefix_ = kube::testing::unique_name("sn");
    policy_ = prefix_ + "-policy";
  }

  void TearDown() override {
    stop_manager();
    for (const auto& n : nodes_) {
      try {
        client_->remove(kube::resources::nodes(), "", n);
      } catch (const std::exception&) {
      }
      try {
        client_->remove(api::node_healths(), "", n);
      } catch (const std::exception&) {
      }
    }
    for (const auto& r : {api::remediations(), api::validation_requests()}) {
      for (const auto& o : client_->list(r, "").items) {
        if (std::string(kube::name_of(o)).rfind(prefix_, 0) == 0)
          client_->remove(r, "", kube::name_of(o));
      }
    }
    for (const auto& p : follow_.empty() ? std::vector<std::string>{policy_} : follow_) {
      try {
        client_->remove(api::sentinel_policies(), "", p);
      } catch (const std::exception&) {
      }
    }
  }

  // The policy: rules for Fatal xid entities (cordon + taint, reboot) and IB ports (cordon).
  void create_policy(const std::string& extra_yaml = "") {
    std::string yaml =
        "apiVersion: gpufleet.io/v1alpha1\nkind: SentinelPolicy\nmetadata: {name: " + policy_ +
        "}\nspec:\n"
        "  rules:\n"
        "  - {name: xid-fatal, when: \"event.check == 'xid' && event.state == "
        "'Fatal'\", cordon: true, taint: 'nvidia.com/gpu-error=fatal:NoSchedule', "
        "remediate: none}\n"
        "  - {name: ib-down, when: \"event.check == 'ib-port' && event.state == "
        "'Fatal'\", cordon: true}\n"
        "  - {name: thermal-dry, when: \"event.check == 'thermal'\", cordon: true, "
        "dryRun: true}\n"
        "  - {name: needs-label, when: \"node.metadata.labels['absent-label'] == "
        "'x'\", cordon: true}\n" +
        extra_yaml;
    client_->create(api::sentinel_policies(), core::parse_yaml(yaml));
  }

  void start_manager(std::map<std::string, std::shared_ptr<ReplacementProvider>> providers = {}) {
    controller::ManagerOptions mo;
    mo.name = prefix_;
    mo.metrics_address = "";
    mo.registry = &registry_;
    manager_ = std::make_unique<controller::Manager>(*client_, mo);
    SentinelOptions o;
    o.policies = follow_.empty() ? std::vector<std::string>{policy_} : follow_;
    o.providers = std::move(providers);
    setup_sentinel(*manager_, std::move(o));
    run_ = std::jthread([this](std::stop_token stop) { manager_->run(stop); });
  }

  void stop_manager() {
    if (run_.joinable()) {
      run_.request_stop();
      run_.join();
    }
    manager_.reset();
  }

  std::string node(const std::string& suffix, bool cordoned = false, const std::string& owners = "",
                   const std::string& taint_key = "",
                   const std::map<std::string, std::string>& labels = {}) {
    std::string name = prefix_ + "-" + suffix;
    core::Value n;
    n["apiVersion"] = "v1";
    n["kind"] = "Node";
    n["metadata"]["name"] = name;
    n["metadata"]["labels"]["nvidia.com/gpu.present"] = "true";
    for (const auto& [k, v] : labels) n["metadata"]["labels"][k] = v;
    if (!owners.empty()) n["metadata"]["annotations"]["gpufleet.io/cordon-owners"] = owners;
    if (cordoned) n["spec"]["unschedulable"] = true;
    if (!taint_key.empty()) {
      core::Value t;
      t["key"] = taint_key;
      t["value"] = "manual";
      t["effect"] = "NoSchedule";
      n["spec"]["taints"].push_back(t);
    }
    client_->create(kube::resources::nodes(), n);
    nodes_.push_back(name);
    return name;
  }

  // Plays the node's agent: the NodeHealth status with these entities ("check/id" -> state).
  void health(const std::string& node, const std::map<std::string, std::string>& entities) {
    auto cur = client_->try_get(api::node_healths(), "", node);
    if (!cur) {
      core::Value nh;
      nh["apiVersion"] = "gpufleet.io/v1alpha1";
      nh["kind"] = "NodeHealth";
      nh["metadata"]["name"] = node;
      nh["spec"]["nodeName"] = node;
      cur = client_->create(api::node_healths(), nh);
    }
    std::map<std::string, core::Value> checks;
    const std::string now = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
    for (const auto& [key, state] : entities) {
      auto slash = key.find('/');
      std::string check = key.substr(0, slash);
      if (!checks.contains(check)) {
        checks[check]["name"] = check;
        checks[check]["state"] = "Healthy";
      }
      core::Value e;
      e["id"] = key.substr(slash + 1);
      e["state"] = state;
      e["reason"] = state == "Fatal" ? "Xid79" : "Recovered";
      e["lastTransitionTime"] = now;
      checks[check]["entities"].push_back(e);
      if (state == "Fatal") checks[check]["state"] = "Fatal";
    }
    core::Value obj = *cur;
    core::Value list = core::Value::list();
    for (auto& [k, c] : checks) list.push_back(c);
    obj["status"]["checks"] = std::move(list);
    obj["status"]["state"] = "Healthy";
    client_->update_status(api::node_healths(), obj);
  }

  // The node's incidents (Remediations), oldest first.
  std::vector<core::Value> incidents(const std::string& node) {
    kube::ListOptions o;
    o.label_selector = std::string(kNodeLabel) + "=" + node;
    auto items = client_->list(api::remediations(), "", o).items;
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return kube::name_of(a) < kube::name_of(b); });
    return items;
  }

  std::string phase(const std::string& node) {
    auto items = incidents(node);
    if (items.empty()) return "";
    std::string p(items.back().get_string({"status", "phase"}));
    return p.empty() ? "Detected" : p;
  }

  bool wait_phase(const std::string& node, const std::string& want,
                  std::chrono::milliseconds timeout = 20s) {
    bool ok = wait_until([&] { return phase(node) == want; }, timeout);
    if (!ok) {
      auto items = incidents(node);
      ADD_FAILURE() << node << ": phase " << phase(node) << ", want " << want << "; "
                    << (items.empty() ? "no incident" : core::to_json(items.back()));
    }
    return ok;
  }

  core::Value get_node(const std::string& name) {
    return client_->get(kube::resources::nodes(), "", name);
  }

  // Plays certify: answers the incident's ValidationRequest.
  void answer_validation(const std::string& node, const std::string& verdict) {
    std::string name;
    ASSERT_TRUE(wait_until(
        [&] {
          auto items = incidents(node);
          if (items.empty()) return false;
          name = std::string(items.back().get_string({"status", "validationRequest"}));
          return !name.empty() && client_->try_get(api::validation_requests(), "", name);
        },
        20s));
    core::Value vr = client_->get(api::validation_requests(), "", name);
    EXPECT_EQ(vr.get_string({"spec", "requester"}), "sentinel");
    EXPECT_EQ((*vr.get({"spec", "nodeNames"}))[0].as_string(), node);
    vr["status"]["phase"] = verdict;
    vr["status"]["nodeCount"] = 1;
    core::Value r;
    r["node"] = node;
    r["verdict"] = verdict;
    if (verdict == "Failed") {
      r["reason"] = "HardwareFailure";
      r["message"] = "dcgm-r2: memory test failed on GPU 0";
      vr["status"]["failedCount"] = 1;
    }
    vr["status"]["results"].push_back(r);
    client_->update_status(api::validation_requests(), vr);
  }

  core::Value pod(const std::string& node, const std::string& ns, const std::string& name,
                  const std::map<std::string, std::string>& labels = {}) {
    core::Value p;
    p["apiVersion"] = "v1";
    p["kind"] = "Pod";
    p["metadata"]["name"] = name;
    p["metadata"]["namespace"] = ns;
    for (const auto& [k, v] : labels) p["metadata"]["labels"][k] = v;
    p["spec"]["nodeName"] = node;
    p["spec"]["terminationGracePeriodSeconds"] = 1;
    core::Value c;
    c["name"] = "main";
    c["image"] = "busybox";
    p["spec"]["containers"].push_back(c);
    return client_->create(kube::resources::pods(), p);
  }

  bool pod_gone(const std::string& ns, const std::string& name) {
    return !client_->try_get(kube::resources::pods(), ns, name).has_value();
  }

  // Read-modify-write of a status that someone else may write too (the node lifecycle
  // controller writes Nodes): again on 409.
  void update_status_retrying(const kube::ResourceId& r, const std::string& name,
                              const std::function<void(core::Value&)>& change) {
    for (int i = 0;; ++i) {
      core::Value obj = client_->get(r, "", name);
      change(obj);
      try {
        client_->update_status(r, obj);
        return;
      } catch (const kube::ApiError& e) {
        if (!e.is(kube::Reason::Conflict) || i >= 20) throw;
      }
    }
  }

  // Plays the kubelet: the Node's boot id and a fresh Ready condition.
  void node_status(const std::string& name, const std::string& boot_id) {
    update_status_retrying(kube::resources::nodes(), name,
                           [&](core::Value& n) { set_node_status(n, boot_id); });
  }
  static void set_node_status(core::Value& n, const std::string& boot_id) {
    n["status"]["nodeInfo"]["bootID"] = boot_id;
    core::Value ready;
    ready["type"] = "Ready";
    ready["status"] = "True";
    ready["reason"] = "KubeletReady";
    const std::string now = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Seconds);
    ready["lastHeartbeatTime"] = now;
    ready["lastTransitionTime"] = now;
    n["status"]["conditions"] = core::Value::list();
    n["status"]["conditions"].push_back(ready);
  }

  // Plays the agent that took a remediation request: NodeHealth status.remediation.
  void agent_reports(const std::string& node, const std::string& incident, std::int64_t request,
                     const std::string& action, const std::string& state,
                     const std::string& error = "") {
    core::Value r;
    r["incident"] = incident;
    r["attempt"] = request;
    r["action"] = action;
    r["state"] = state;
    r["message"] = action + " " + state;
    if (!error.empty()) r["error"] = error;
    r["recordId"] = 100 + request;
    r["time"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
    update_status_retrying(api::node_healths(), node,
                           [&](core::Value& nh) { nh["status"]["remediation"] = r; });
  }

  // The node's remediation request annotation, as the agent reads it ({} when none).
  core::Value request_of(const std::string& node) {
    std::string text(
        kube::annotation_of(get_node(node), "sentinel.gpufleet.io/remediation-request"));
    return text.empty() ? core::Value::map() : core::parse_json(text, "request");
  }

  // Events sentinel recorded about `node` with this reason.
  std::vector<core::Value> node_events(const std::string& node, const std::string& reason) {
    std::vector<core::Value> out;
    for (const auto& e : client_->list(kube::resources::events(), "default").items)
      if (e.get_string({"regarding", "name"}) == node && e.get_string({"reason"}) == reason)
        out.push_back(e);
    return out;
  }

  core::metrics::Registry registry_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<controller::Manager> manager_;
  std::jthread run_;
  std::string prefix_, policy_;
  std::vector<std::string> follow_;  // the policies the controller follows; empty: policy_
  std::vector<std::string> nodes_;
};

[[maybe_unused]] inline const char* kNoDrain =
    "  drain: {enabled: false}\n"
    "  validation: {newNodes: false}\n"
    "  breaker: {maxNodes: 100}\n";

}  // namespace
}  // namespace gpufleet::sentinel
