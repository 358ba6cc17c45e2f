// One DisruptionBudget shared by hostpkg and sentinel, end to end on kube-local + the
// simulated fleet: both controllers and the budget controller run on one Manager, as
// `gpufleet controller --controllers=hostpkg,sentinel,budget` would, against the object
// `default` (topology key: a rack label this test sets, one node out per rack).
//  - rack A: sentinel holds a node (quarantined, its reboot not carried out yet); a rollout of
//    the other node of the rack is held (nothing cordoned, the set says it waits for the
//    cluster budget), then starts and completes once the incident is released;
//  - rack B: hostpkg holds a node (a slow package in progress); sentinel quarantines the other
//    node at once, but its reboot waits (phase Remediating, status.waitingFor budget, a
//    condition naming the rack and hostpkg's set) and is asked for only once the rollout is
//    done. The budget controller's status names the holders meanwhile.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <vector>

#include "controller/budget.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/time.h"
#include "core/yaml.h"
#include "hostpkg/controller/reconciler.h"
#include "hostpkg_env.h"
#include "kube/api/disruption_claims.h"
#include "kube/api/objects.h"
#include "kube/errors.h"
#include "sentinel/controller.h"
#include "support/source_paths.h"

namespace gpufleet {
namespace {

using namespace std::chrono_literals;
using hostpkg::testing::condition;
using hostpkg::testing::HostPkgEnv;
using ::testing::HasSubstr;

const kube::ResourceId kSets{"gpufleet.io", "v1alpha1", "hostpackagesets", false};
constexpr const char* kRack = "gpufleet.io/budget-itest-rack";

// Plays the node agent's executor: records each request; the test decides when the reboot
// happens (so a node stays out as long as a case needs).
class RecordingRemediator : public sentinel::Remediator {
 public:
  void request(const sentinel::RemediationRequest& r) override {
    std::lock_guard lock(mu_);
    asked_[r.node] = r.action;
  }
  bool asked(const std::string& node) {
    std::lock_guard lock(mu_);
    return asked_.contains(node);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> asked_;
};

class BudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = std::make_unique<HostPkgEnv>(4, false);
    apply_crds();
    kube::Client& c = env_->client();
    policy_ = "budget-itest-" + std::to_string(::getpid());
    // Racks: nodes 0 and 1 in A, 2 and 3 in B (values unique to this run).
    for (int i = 0; i < 4; ++i) {
      core::Value patch;
      patch["metadata"]["labels"][kRack] = rack(i < 2 ? "a" : "b");
      c.patch(kube::resources::nodes(), "", env_->node(i), kube::PatchType::Merge, patch);
    }
    c.create(sentinel::api::sentinel_policies(),
             core::parse_yaml("apiVersion: gpufleet.io/v1alpha1\nkind: SentinelPolicy\nmetadata: "
                              "{name: " +
                              policy_ +
                              "}\nspec:\n  rules:\n  - {name: xid-fatal, when: \"event.check == "
                              "'xid' && event.state == 'Fatal'\", cordon: true, remediate: "
                              "reboot}\n  breaker: {maxNodes: 10}\n  drain: {enabled: false}\n"
                              "  remediation: {maxAttempts: 2, timeoutSeconds: 300}\n"
                              "  validation: {newNodes: false}\n"));
    c.create(controller::disruption_budgets(),
             core::parse_yaml(std::string("apiVersion: gpufleet.io/v1alpha1\nkind: "
                                          "DisruptionBudget\nmetadata: {name: default}\nspec: "
                                          "{maxUnavailable: '100%', topologyKey: ") +
                              kRack + ", maxUnavailablePerDomain: 1}\n"));
    start();
  }

  void TearDown() override {
    kube::Client& c = env_->client();
    for (const auto& s : sets_) env_->remove_set(s);
    HostPkgEnv::eventually(
        [&] {
          for (const auto& s : sets_)
            if (c.try_get(kSets, "", s)) return false;
          return true;
        },
        30s);
    if (run_.joinable()) {
      run_.request_stop();
      run_.join();
    }
    manager_.reset();
    auto quiet = [](auto f) {
      try {
        f();
      } catch (const std::exception&) {
      }
    };
    quiet([&] { c.remove(controller::disruption_budgets(), "", "default"); });
    quiet([&] { c.remove(sentinel::api::sentinel_policies(), "", policy_); });
    for (int i = 0; i < 4; ++i) {
      const std::string n = env_->node(i);
      quiet([&] { c.remove(sentinel::api::node_healths(), "", n); });
      for (const auto& r : {sentinel::api::remediations(), sentinel::api::validation_requests()}) {
        kube::ListOptions o;
        o.label_selector = std::string(sentinel::kNodeLabel) + "=" + n;
        quiet([&] {
          for (const auto& obj : c.list(r, "", o).items) c.remove(r, "", kube::name_of(obj));
        });
      }
    }
    env_.reset();
  }

  std::string rack(const std::string& r) const { return r + "-" + std::to_string(::getpid()); }

  void apply_crds() {
    kube::Client& c = env_->client();
    std::vector<kube::ResourceId> rs;
    for (const char* f :
         {"nodehealth", "sentinelpolicy", "remediation", "validationrequest", "disruptionbudget"}) {
      core::Value crd = core::parse_yaml(
          core::read_file(std::string(GPUFLEET_SOURCE_DIR) + "/deploy/crds/" + f + ".yaml"));
      c.apply(kube::resources::custom_resource_definitions(), crd,
              {.field_manager = "budget-itest", .force = true});
    }
    for (const auto& r : {sentinel::api::node_healths(), sentinel::api::sentinel_policies(),
                          sentinel::api::validation_requests(), controller::disruption_budgets()}) {
      ASSERT_TRUE(HostPkgEnv::eventually(
          [&] {
            (void)c.list_page(r, "", {});
            return true;
          },
          30s))
          << r.resource;
    }
  }

  void start() {
    controller::ManagerOptions mo;
    mo.name = "budget-itest";
    mo.metrics_address = "";
    mo.shutdown_grace = 2s;
    mo.registry = &registry_;
    manager_ = std::make_unique<controller::Manager>(env_->client(), mo);
    hostpkg::ControllerSettings hs;
    hs.namespace_ = env_->stage_namespace();
    hs.runner_image = "example.com/gpufleet:test";
    hs.poll = 300ms;
    hostpkg::setup_hostpkg(*manager_, hs);
    sentinel::SentinelOptions so;
    so.policies = {policy_};
    auto rem = std::make_unique<RecordingRemediator>();
    remediator_ = rem.get();
    so.remediator = std::move(rem);
    sentinel::setup_sentinel(*manager_, std::move(so));
    controller::setup_budget(*manager_, controller::Context{});
    run_ = std::jthread([this](std::stop_token stop) { manager_->run(stop); });
  }

  // Plays the agent: an Xid 79 on GPU 0 of `node` in its NodeHealth.
  void fault(const std::string& node) {
    kube::Client& c = env_->client();
    core::Value nh;
    nh["apiVersion"] = "gpufleet.io/v1alpha1";
    nh["kind"] = "NodeHealth";
    nh["metadata"]["name"] = node;
    nh["spec"]["nodeName"] = node;
    core::Value obj = c.create(sentinel::api::node_healths(), nh);
    core::Value e;
    e["id"] = "gpu0";
    e["state"] = "Fatal";
    e["reason"] = "Xid79";
    e["lastTransitionTime"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
    core::Value check;
    check["name"] = "xid";
    check["state"] = "Fatal";
    check["entities"].push_back(e);
    obj["status"]["checks"].push_back(check);
    obj["status"]["state"] = "Healthy";
    c.update_status(sentinel::api::node_healths(), obj);
  }

  // The node's (only) incident, or an empty map.
  core::Value incident(const std::string& node) {
    kube::ListOptions o;
    o.label_selector = std::string(sentinel::kNodeLabel) + "=" + node;
    auto items = env_->client().list(sentinel::api::remediations(), "", o).items;
    return items.empty() ? core::Value::map() : items.back();
  }

  // Plays the agent carrying out the reboot, then certify passing the node.
  void reboot_and_validate(const std::string& node) {
    sim::SimEvent ev;
    ev.kind = sim::EventKind::Reboot;
    ev.nodes = {node};
    ev.down_s = 1;
    env_->sim().inject(ev);
    std::string vr;
    ASSERT_TRUE(HostPkgEnv::eventually(
        [&] {
          vr = std::string(incident(node).get_string({"status", "validationRequest"}));
          return !vr.empty() &&
                 env_->client().try_get(sentinel::api::validation_requests(), "", vr).has_value();
        },
        60s))
        << core::to_json(incident(node));
    core::Value v = env_->client().get(sentinel::api::validation_requests(), "", vr);
    v["status"]["phase"] = "Passed";
    v["status"]["nodeCount"] = 1;
    core::Value r;
    r["node"] = node;
    r["verdict"] = "Passed";
    v["status"]["results"].push_back(r);
    env_->client().update_status(sentinel::api::validation_requests(), v);
    ASSERT_TRUE(HostPkgEnv::eventually(
        [&] {
          return incident(node).get_string({"status", "phase"}) == "Released";
        },
        30s))
        << core::to_json(incident(node));
  }

  std::string set_yaml(const std::string& name, const std::string& node, const std::string& image) {
    sets_.push_back(name);
    return "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
           "}\nspec:\n  nodeSelector:\n    matchLabels: {kubernetes.io/hostname: " + node +
           "}\n  packages:\n    base:\n      version: 1.0.0\n      image: " + image + "\n";
  }

  std::string record(const std::string& node, const std::string& set) {
    return std::string(
        kube::annotation_of(env_->get_node(node), "hostpkg.gpufleet.io/record." + set));
  }

  std::vector<kube::DisruptionClaim> claims() {
    std::optional<core::Value> l = env_->client().try_get(kube::resources::leases(), "default",
                                                          std::string(kube::kDisruptionClaimsName));
    if (!l) return {};
    return kube::parse_disruption_claims(
        kube::annotation_of(*l, std::string(kube::kDisruptionClaimsAnnotation)));
  }
  // `racks`: the claim names the node's rack (the budget's topology key), else domain "".
  bool claimed(const std::string& node, const std::string& holder, bool racks = true) {
    const std::string domain =
        !racks ? "" : rack(node == env_->node(0) || node == env_->node(1) ? "a" : "b");
    for (const auto& c : claims())
      if (c.node == node && c.holder == holder && c.domain == domain) return true;
    return false;
  }
  double claim_writes() {
    const std::string text = registry_.render();
    const std::string name = "gpufleet_hostpkg_api_writes_total{kind=\"claim\"} ";
    std::size_t pos = text.find(name);
    return pos == std::string::npos ? 0 : std::stod(text.substr(pos + name.size()));
  }

  core::Value budget() {
    return env_->client().get(controller::disruption_budgets(), "", "default");
  }

  std::unique_ptr<HostPkgEnv> env_;
  core::metrics::Registry registry_;
  std::unique_ptr<controller::Manager> manager_;
  std::jthread run_;
  RecordingRemediator* remediator_ = nullptr;
  std::string policy_;
  std::vector<std::string> sets_;
};

TEST_F(BudgetTest, RolloutWaitsForSentinelAndRebootWaitsForHostpkg) {
  const std::string a0 = env_->node(0), a1 = env_->node(1), b2 = env_->node(2), b3 = env_->node(3);

  // Rack A: sentinel holds a0 (its reboot asked for, not carried out yet).
  fault(a0);
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return remediator_->asked(a0); }, 30s))
      << "a0's reboot was not asked for while rack A had room: " << core::to_json(incident(a0));
  ASSERT_TRUE(kube::node::unschedulable(env_->get_node(a0)));
  // The reboot went with a claim on the budget (the lock hostpkg counts too).
  EXPECT_TRUE(claimed(a0, "Sentinel/" + std::string(kube::name_of(incident(a0)))))
      << kube::disruption_claims_text(claims());
  // ... so a rollout of a1 (same rack) is held: nothing cordoned, the set says why.
  env_->apply(set_yaml("budget-a", a1, "example.com/base"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env_->get_set("budget-a").get_string({"status", "message"}) ==
               "1 node(s) wait for the cluster disruption budget";
      },
      30s))
      << core::to_json(env_->get_set("budget-a"));
  // The budget controller names the holder and the full rack.
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value b = budget();
        return condition(b, "DomainsAtLimit").status == "True" &&
               core::to_json(*b.get({"status", "holders"})).find("Sentinel") != std::string::npos;
      },
      30s))
      << core::to_json(budget());
  {
    core::Value b = budget();
    EXPECT_EQ(condition(b, "Exhausted").status, "False");
    EXPECT_THAT(condition(b, "DomainsAtLimit").message, HasSubstr(rack("a")));
    EXPECT_THAT(core::to_json(*b.get({"status", "holders"})), HasSubstr(a0));
  }
  std::this_thread::sleep_for(3s);  // several passes of hostpkg: still nothing started
  EXPECT_FALSE(kube::node::unschedulable(env_->get_node(a1)));
  EXPECT_THAT(record(a1, "budget-a"), ::testing::Not(HasSubstr("InProgress")));

  // Rack B: hostpkg holds b2 with a slow package ...
  env_->apply(set_yaml("budget-b", b2, "example.com/slow-base"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] { return record(b2, "budget-b").find("\"state\":\"InProgress\"") != std::string::npos; },
      30s))
      << core::to_json(env_->get_set("budget-b"));
  EXPECT_TRUE(claimed(b2, "HostPackageSet/budget-b")) << kube::disruption_claims_text(claims());
  // ... sentinel's quarantine of b3 never waits ...
  fault(b3);
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return kube::node::unschedulable(env_->get_node(b3)); }, 15s))
      << "the quarantine waited for the budget";
  // ... but its reboot does, naming the rack and hostpkg's set.
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value i = incident(b3);
        return i.get_string({"status", "phase"}) == "Remediating" &&
               i.get_string({"status", "waitingFor"}) == "budget";
      },
      20s))
      << core::to_json(incident(b3));
  {
    core::Value i = incident(b3);
    hostpkg::testing::Cond w = condition(i, "WaitingForBudget");
    EXPECT_EQ(w.status, "True");
    EXPECT_EQ(w.reason, "DomainAtLimit");
    EXPECT_THAT(w.message, HasSubstr(std::string(kRack) + "=" + rack("b")));
    EXPECT_THAT(w.message, HasSubstr(b2 + " (HostPackageSet/budget-b)"));
    EXPECT_FALSE(remediator_->asked(b3)) << "rebooted while rack B was full";
  }
  EXPECT_TRUE(record(b2, "budget-b").find("\"state\":\"InProgress\"") != std::string::npos)
      << "b2 finished before the wait was seen: the check above proved nothing";

  // Both proceed: a0's reboot happens and certify passes it, so a1's rollout starts and
  // completes; b2's rollout completes, so b3's reboot is asked for.
  reboot_and_validate(a0);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env_->get_set("budget-a").get_string({"status", "phase"}) == "Complete";
      },
      60s))
      << core::to_json(env_->get_set("budget-a"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env_->get_set("budget-b").get_string({"status", "phase"}) == "Complete";
      },
      60s))
      << core::to_json(env_->get_set("budget-b"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return remediator_->asked(b3); }, 30s))
      << core::to_json(incident(b3));
  core::Value i = incident(b3);
  EXPECT_EQ(i.get({"status", "waitingFor"}), nullptr);
  EXPECT_EQ(condition(i, "WaitingForBudget").status, "False");
  reboot_and_validate(b3);
  // hostpkg claimed once per batch it started (a1, b2: one node each), not once per pass.
  EXPECT_GE(claim_writes(), 2);
  EXPECT_LE(claim_writes(), 2);
  // Both racks have room again (other tests' nodes, without the rack label, may fill the
  // domain "" of a shared kube-local: only this test's racks are looked at).
  auto rack_full = [&](const core::Value& b, const std::string& r) {
    const core::Value* ds = b.get({"status", "domains"});
    if (ds == nullptr || !ds->is_list()) return false;
    for (const auto& d : ds->as_list())
      if (d.get_string({"domain"}) == r && d.find("unavailable")->as_int() >= 1) return true;
    return false;
  };
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value b = budget();
        return b.get({"status", "domains"}) != nullptr && !rack_full(b, rack("a")) &&
               !rack_full(b, rack("b"));
      },
      30s))
      << core::to_json(budget());
}

// The total maxUnavailable gates sentinel too (no topology key): hostpkg holds the last free
// slot of the cluster, so sentinel's quarantine goes at once but its reboot waits
// (ClusterAtLimit, from the claims), and goes once the rollout is done.
TEST_F(BudgetTest, RebootWaitsForTheTotalLimit) {
  kube::Client& c = env_->client();
  const std::string n2 = env_->node(2), n3 = env_->node(3);
  // Nodes out already in this shared kube-local (other tests' leftovers) leave exactly one
  // slot: the one hostpkg takes.
  std::int64_t out = 0;
  for (const auto& n : c.list(kube::resources::nodes(), "").items)
    out += kube::is_out(kube::node_out_facts(n, "", false)) ? 1 : 0;
  // A merge patch of the spec alone: the budget controller writes its status meanwhile, so a
  // read-then-update would race it (409).
  core::Value patch;
  patch["spec"]["maxUnavailable"] = out + 1;
  patch["spec"]["topologyKey"] = nullptr;
  patch["spec"]["maxUnavailablePerDomain"] = nullptr;
  c.patch(controller::disruption_budgets(), "", "default", kube::PatchType::Merge, patch);

  env_->apply(set_yaml("budget-total", n2, "example.com/slow-base"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return record(n2, "budget-total").find("\"state\":\"InProgress\"") != std::string::npos;
      },
      30s))
      << core::to_json(env_->get_set("budget-total"));
  fault(n3);
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return kube::node::unschedulable(env_->get_node(n3)); }, 15s))
      << "the quarantine waited for the budget";
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        core::Value i = incident(n3);
        return i.get_string({"status", "phase"}) == "Remediating" &&
               i.get_string({"status", "waitingFor"}) == "budget";
      },
      20s))
      << core::to_json(incident(n3));
  {
    hostpkg::testing::Cond w = condition(incident(n3), "WaitingForBudget");
    EXPECT_EQ(w.status, "True");
    EXPECT_EQ(w.reason, "ClusterAtLimit");
    EXPECT_THAT(w.message, HasSubstr("in the cluster without " + n3 + ", maxUnavailable " +
                                     std::to_string(out + 1)));
    EXPECT_FALSE(remediator_->asked(n3)) << "rebooted while the cluster was full";
  }
  EXPECT_TRUE(record(n2, "budget-total").find("\"state\":\"InProgress\"") != std::string::npos)
      << "n2 finished before the wait was seen: the check above proved nothing";
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env_->get_set("budget-total").get_string({"status", "phase"}) == "Complete";
      },
      60s))
      << core::to_json(env_->get_set("budget-total"));
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return remediator_->asked(n3); }, 30s))
      << core::to_json(incident(n3));
  EXPECT_EQ(condition(incident(n3), "WaitingForBudget").status, "False");
  EXPECT_TRUE(claimed(n3, "Sentinel/" + std::string(kube::name_of(incident(n3))), false))
      << kube::disruption_claims_text(claims());
  reboot_and_validate(n3);
}

}  // namespace
}  // namespace gpufleet
