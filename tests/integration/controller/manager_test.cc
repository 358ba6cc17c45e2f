// The Manager against kube-apiserver: caches shared between controllers, /readyz, /metrics,
// owner mapping end to end, and status conditions written by server-side apply.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "controller/manager.h"
#include "controller/status.h"
#include "core/errors.h"
#include "core/yaml.h"
#include "kube/api/conditions.h"
#include "process.h"
#include "test_env.h"

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;
using testing::wait_until;

class Recording : public Reconciler {
 public:
  Result reconcile(const Request& r, std::stop_token) override {
    std::lock_guard lock(mu);
    keys.insert(r.key());
    return {};
  }
  bool has(const std::string& k) {
    std::lock_guard lock(mu);
    return keys.contains(k);
  }
  std::mutex mu;
  std::set<std::string> keys;
};

core::Value config_map(const std::string& ns, const std::string& name,
                       const std::string& labels_yaml = "{}") {
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = name;
  cm["metadata"]["namespace"] = ns;
  cm["metadata"]["labels"] = core::parse_yaml(labels_yaml, "labels");
  return cm;
}

TEST(Manager, SharesCachesServesHealthAndMapsOwners) {
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "mgr-it");
  auto cms = kube::resources::config_maps();
  core::metrics::Registry registry;
  ManagerOptions mo;
  mo.name = "manager-test";
  mo.metrics_address = "127.0.0.1:0";
  mo.registry = &registry;
  Manager manager(client, mo);
  SourceOptions in_ns;
  in_ns.cache.namespace_ = ns.name();
  auto a = std::make_shared<Recording>(), b = std::make_shared<Recording>();
  // Two controllers on the same ConfigMaps: one cache for both. "b" reconciles the
  // ConfigMaps labelled role=selector, and the controlling owner of any ConfigMap (owns()).
  Cache& cache = manager.cache(cms, in_ns.cache);
  manager.controller("a").for_resource(cms, "ConfigMap", in_ns).complete(a);
  SourceOptions selectors;
  selectors.cache.namespace_ = ns.name();
  selectors.cache.label_selector = "role=selector";
  manager.controller("b").for_resource(cms, "ConfigMap", selectors).owns(cms, in_ns).complete(b);
  EXPECT_EQ(&manager.cache(cms, in_ns.cache), &cache);  // shared, not a second informer
  EXPECT_THROW(manager.controller("a").for_resource(cms, "ConfigMap").complete(a),
               core::InvalidInput);

  std::jthread run([&](std::stop_token stop) { manager.run(stop); });
  ASSERT_TRUE(wait_until([&] { return manager.metrics_port() != 0; }, 10s));
  int port = manager.metrics_port();
  ASSERT_TRUE(wait_until([&] { return testing::http_get(port, "/readyz").first == 200; }, 30s));
  EXPECT_EQ(testing::http_get(port, "/healthz").first, 200);
  std::string caches = testing::http_get(port, "/debug/caches").second;
  // Two shapes, then the transport line.
  EXPECT_EQ(std::count(caches.begin(), caches.end(), '\n'), 3) << caches;
  EXPECT_NE(caches.find("transport requests="), std::string::npos) << caches;
  EXPECT_NE(caches.find(" slow_requests=0 "), std::string::npos) << caches;

  client.create(cms, config_map(ns.name(), "sel", "{role: selector}"));
  core::Value owner = client.create(cms, config_map(ns.name(), "parent"));
  core::Value child = config_map(ns.name(), "child");
  core::Value ref;
  ref["apiVersion"] = "v1";
  ref["kind"] = "ConfigMap";
  ref["name"] = "parent";
  ref["uid"] = kube::uid_of(owner);
  ref["controller"] = true;
  child["metadata"]["ownerReferences"].push_back(ref);
  client.create(cms, child);
  std::string k_sel = ns.name() + "/sel", k_parent = ns.name() + "/parent",
              k_child = ns.name() + "/child";
  EXPECT_TRUE(
      wait_until([&] { return a->has(k_sel) && a->has(k_parent) && a->has(k_child); }, 30s));
  EXPECT_TRUE(wait_until([&] { return b->has(k_sel) && b->has(k_parent); }, 30s));
  EXPECT_FALSE(b->has(k_child));  // not a primary of b: only its owner is reconciled

  // Events are reported as the controller, from this replica's identity.
  kube::EventRecorder& events = manager.event_recorder("a");
  EXPECT_TRUE(events.record(owner, kube::EventType::Normal, "Reconciled", "Reconcile", "tested"))
      << events.last_error();
  EXPECT_EQ(&manager.event_recorder("a"), &events);

  std::string text = testing::http_get(port, "/metrics").second;
  EXPECT_EQ(testing::metric(text, "gpufleet_controller_leader{manager=\"manager-test\"}"), 1.0);
  EXPECT_GE(testing::metric(
                text, "gpufleet_controller_reconcile_total{controller=\"a\",result=\"success\"}")
                .value_or(0),
            3.0)
      << text;
  run.request_stop();
  run.join();
}

// Conditions on a custom resource's status subresource: two controllers (field managers)
// each own their condition; lastTransitionTime moves only when the status changes.
TEST(StatusWriter, AppliesConditionsWithKubernetesSemantics) {
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "status-it");
  auto crds = kube::resources::custom_resource_definitions();
  core::Value crd = core::parse_yaml(R"(
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.runtime-test.gpufleet.io}
spec:
  group: runtime-test.gpufleet.io
  scope: Namespaced
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type, status, lastTransitionTime, reason, message]
                  properties:
                    type: {type: string}
                    status: {type: string, enum: ["True", "False", "Unknown"]}
                    observedGeneration: {type: integer, format: int64}
                    lastTransitionTime: {type: string, format: date-time}
                    reason: {type: string}
                    message: {type: string}
)",
                                     "crd");
  kube::ApplyOptions ao;
  ao.field_manager = "controller-it";
  ao.force = true;
  client.apply(crds, crd, ao);
  kube::ResourceId gadgets{"runtime-test.gpufleet.io", "v1", "gadgets", true};
  ASSERT_TRUE(wait_until(
      [&] {
        try {
          client.list(gadgets, ns.name());
          return true;
        } catch (const std::exception&) {
          return false;
        }
      },
      30s));
  core::Value g;
  g["apiVersion"] = "runtime-test.gpufleet.io/v1";
  g["kind"] = "Gadget";
  g["metadata"]["name"] = "g1";
  g["metadata"]["namespace"] = ns.name();
  g["spec"]["size"] = 1;
  core::Value current = client.create(gadgets, g);

  StatusWriter certify(client, gadgets, "Gadget", "gpufleet-certify");
  StatusWriter sentinel(client, gadgets, "Gadget", "gpufleet-sentinel");
  auto t0 = std::chrono::system_clock::from_time_t(1'900'000'000);
  EXPECT_TRUE(
      certify.apply_conditions(current, {{"Certified", "False", "BurnInRunning", "", 0, {}}}, t0));
  current = client.get(gadgets, ns.name(), "g1");
  EXPECT_TRUE(sentinel.apply_conditions(current, {{"Healthy", "True", "NoXid", "", 0, {}}}, t0));
  current = client.get(gadgets, ns.name(), "g1");
  const core::Value& conds = *current.get({"status", "conditions"});
  ASSERT_EQ(conds.size(), 2u) << "each manager keeps its own condition";
  auto certified = kube::get_condition(conds, "Certified");
  ASSERT_TRUE(certified);
  EXPECT_EQ(certified->observed_generation, 1);
  EXPECT_EQ(certified->last_transition_time, t0);
  // Unchanged: no write at all.
  std::string rv(kube::resource_version_of(current));
  EXPECT_FALSE(certify.apply_conditions(
      current, {{"Certified", "False", "BurnInRunning", "", 0, {}}}, t0 + 60s));
  // New reason, same status: written, transition time kept.
  EXPECT_TRUE(certify.apply_conditions(current, {{"Certified", "False", "BurnInSlow", "", 0, {}}},
                                       t0 + 60s));
  current = client.get(gadgets, ns.name(), "g1");
  EXPECT_EQ(kube::get_condition(*current.get({"status", "conditions"}), "Certified")
                ->last_transition_time,
            t0);
  EXPECT_NE(kube::resource_version_of(current), rv);
  // Status change: transition time moves; the other manager's condition stays.
  EXPECT_TRUE(certify.apply_conditions(
      current, {{"Certified", "True", "BurnInPassed", "ok", 0, {}}}, t0 + 120s));
  current = client.get(gadgets, ns.name(), "g1");
  EXPECT_EQ(kube::get_condition(*current.get({"status", "conditions"}), "Certified")
                ->last_transition_time,
            t0 + 120s);
  EXPECT_TRUE(kube::get_condition(*current.get({"status", "conditions"}), "Healthy"));
  // Invalid condition: refused before anything is sent.
  EXPECT_THROW(certify.apply_conditions(current, {{"Certified", "Yes", "Bad reason", "", 0, {}}}),
               core::InvalidInput);

  // Read-modify-write with conflict retry: a stale concurrent writer does not lose updates.
  std::atomic<int> attempts{0};
  update_with_conflict_retry(client, gadgets, ns.name(), "g1", [&](core::Value& obj) {
    if (attempts.fetch_add(1) == 0) {  // someone else writes in between the first get and update
      core::Value p;
      p["spec"]["other"] = "x";
      client.patch(gadgets, ns.name(), "g1", kube::PatchType::Merge, p);
    }
    obj["spec"]["size"] = 2;
    return true;
  });
  EXPECT_EQ(attempts.load(), 2);
  current = client.get(gadgets, ns.name(), "g1");
  EXPECT_EQ(current.get({"spec", "size"})->as_int(), 2);
  EXPECT_EQ(current.get_string({"spec", "other"}), "x");
}

}  // namespace
}  // namespace gpufleet::controller

namespace gpufleet::controller {
namespace {

// /readyz stays 503 while a cache cannot sync (here: a resource the server does not serve),
// and no controller starts on unsynced caches.
TEST(Manager, NotReadyUntilEveryCacheHasSynced) {
  kube::Client client(kube::testing::admin_config());
  core::metrics::Registry registry;
  ManagerOptions mo;
  mo.name = "unsynced-test";
  mo.metrics_address = "127.0.0.1:0";
  mo.registry = &registry;
  Manager manager(client, mo);
  kube::ResourceId missing{"absent.gpufleet.io", "v1", "things", true};
  auto rec = std::make_shared<Recording>();
  manager.controller("things").for_resource(missing, "Thing").complete(rec);
  std::jthread run([&](std::stop_token stop) { manager.run(stop); });
  ASSERT_TRUE(wait_until([&] { return manager.metrics_port() != 0; }, 10s));
  int port = manager.metrics_port();
  std::this_thread::sleep_for(2s);
  auto [status, body] = testing::http_get(port, "/readyz");
  EXPECT_EQ(status, 503);
  EXPECT_NE(body.find("caches not synced"), std::string::npos) << body;
  EXPECT_EQ(testing::http_get(port, "/healthz").first, 200);
  EXPECT_NE(testing::http_get(port, "/debug/caches").second.find("synced=false"),
            std::string::npos);
  EXPECT_FALSE(manager.is_leader());
  EXPECT_EQ(manager.controllers().front()->stats().active_workers, 0);
  run.request_stop();
  run.join();
}

}  // namespace
}  // namespace gpufleet::controller
