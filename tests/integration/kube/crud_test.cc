// REST verbs, patches, server-side apply, subresources and discovery against kube-apiserver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/json.h"
#include "core/yaml.h"
#include "kube/api/objects.h"
#include "kube/client.h"
#include "test_env.h"

namespace gpufleet::kube {
namespace {

using testing::admin_config;
using ::testing::HasSubstr;
using testing::TestNamespace;
using testing::unique_name;

core::Value config_map(const std::string& ns, const std::string& name) {
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = name;
  cm["metadata"]["namespace"] = ns;
  cm["metadata"]["labels"]["app"] = "kube-it";
  cm["data"]["a"] = "1";
  return cm;
}

TEST(Crud, ConfigMapLifecycle) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  core::Value created = client.create(cms, config_map(ns.name(), "cm1"));
  EXPECT_FALSE(resource_version_of(created).empty());
  EXPECT_FALSE(uid_of(created).empty());

  // Create again: AlreadyExists.
  try {
    client.create(cms, config_map(ns.name(), "cm1"));
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::AlreadyExists)) << e.what();
    EXPECT_EQ(e.code(), 409);
  }

  core::Value got = client.get(cms, ns.name(), "cm1");
  EXPECT_EQ(got.get_string({"data", "a"}), "1");

  // Update with the current resourceVersion succeeds ...
  got["data"]["a"] = "2";
  core::Value updated = client.update(cms, got);
  EXPECT_EQ(updated.get_string({"data", "a"}), "2");
  // ... and with the stale one fails with Conflict.
  got["data"]["a"] = "3";
  try {
    client.update(cms, got);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Conflict)) << e.what();
  }

  // Merge patch, JSON patch, strategic merge patch.
  core::Value merge;
  merge["data"]["b"] = "m";
  client.patch(cms, ns.name(), "cm1", PatchType::Merge, merge);
  core::Value json_patch = core::parse_json(R"([{"op":"replace","path":"/data/a","value":"j"}])");
  client.patch(cms, ns.name(), "cm1", PatchType::Json, json_patch);
  core::Value smp;
  smp["metadata"]["labels"]["tier"] = "x";
  core::Value patched = client.patch(cms, ns.name(), "cm1", PatchType::StrategicMerge, smp);
  EXPECT_EQ(patched.get_string({"data", "a"}), "j");
  EXPECT_EQ(patched.get_string({"data", "b"}), "m");
  EXPECT_EQ(label_of(patched, "tier"), "x");
  EXPECT_EQ(label_of(patched, "app"), "kube-it");

  // Delete with a wrong precondition fails; with the right one succeeds.
  DeleteOptions wrong;
  wrong.precondition_uid = "00000000-0000-0000-0000-000000000000";
  try {
    client.remove(cms, ns.name(), "cm1", wrong);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Conflict)) << e.what();
  }
  DeleteOptions right;
  right.precondition_uid = std::string(uid_of(created));
  right.propagation_policy = "Background";
  right.grace_period_seconds = 0;
  client.remove(cms, ns.name(), "cm1", right);
  EXPECT_EQ(client.try_get(cms, ns.name(), "cm1"), std::nullopt);
  try {
    client.get(cms, ns.name(), "cm1");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::NotFound));
    EXPECT_THAT(e.what(), HasSubstr("cannot get configmaps " + ns.name() + "/cm1: NotFound"));
  }
}

TEST(Crud, ListPaginatesWithSelectors) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  for (int i = 0; i < 25; ++i) {
    core::Value cm = config_map(ns.name(), "page-" + std::to_string(i));
    cm["metadata"]["labels"]["parity"] = i % 2 ? "odd" : "even";
    client.create(cms, cm);
  }
  ListOptions o;
  o.limit = 4;
  o.label_selector = "app=kube-it,parity=odd";
  ListResult page = client.list_page(cms, ns.name(), o);
  EXPECT_EQ(page.items.size(), 4u);
  EXPECT_FALSE(page.continue_token.empty());
  ListResult all = client.list(cms, ns.name(), o);
  EXPECT_EQ(all.items.size(), 12u);
  EXPECT_FALSE(all.resource_version.empty());
  o.label_selector.clear();
  o.field_selector = "metadata.name=page-3";
  EXPECT_EQ(client.list(cms, ns.name(), o).items.size(), 1u);
  // Metadata only: PartialObjectMetadata without data.
  ObjectShape meta;
  meta.metadata_only = true;
  ListResult partial = client.list(cms, ns.name(), {}, meta);
  ASSERT_GE(partial.items.size(), 25u);
  EXPECT_EQ(partial.items[0].find("data"), nullptr);
  EXPECT_FALSE(name_of(partial.items[0]).empty());
  core::Value one = client.get(cms, ns.name(), "page-1", meta);
  EXPECT_EQ(one.get_string({"kind"}), "PartialObjectMetadata");
}

TEST(Crud, ServerSideApplyConflictBetweenManagers) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  core::Value desired = config_map(ns.name(), "ssa");
  client.apply(cms, desired, {"manager-a"});
  core::Value other = config_map(ns.name(), "ssa");
  other["data"]["a"] = "from-b";
  try {
    client.apply(cms, other, {"manager-b"});
    FAIL() << "expected a conflict";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Conflict)) << e.what();
    ASSERT_FALSE(e.causes().empty());
    EXPECT_EQ(e.causes()[0].reason, "FieldManagerConflict");
    EXPECT_EQ(e.causes()[0].field, ".data.a");
    EXPECT_THAT(e.causes()[0].message, HasSubstr("manager-a"));
  }
  core::Value forced = client.apply(cms, other, {"manager-b", true});
  EXPECT_EQ(forced.get_string({"data", "a"}), "from-b");
}

TEST(Crud, UpdateConflictThenRetryOnFreshObject) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  client.create(cms, config_map(ns.name(), "counter"));
  core::Value stale = client.get(cms, ns.name(), "counter");
  core::Value racer = stale;
  racer["data"]["a"] = "racer";
  client.update(cms, racer);
  // The usual read-modify-write loop: a Conflict means "re-read and try again".
  int attempts = 0;
  core::Value current = stale;
  for (;;) {
    ++attempts;
    current["data"]["mine"] = "yes";
    try {
      client.update(cms, current);
      break;
    } catch (const ApiError& e) {
      ASSERT_TRUE(e.is(Reason::Conflict)) << e.what();
      ASSERT_LT(attempts, 5);
      current = client.get(cms, ns.name(), "counter");
    }
  }
  EXPECT_EQ(attempts, 2);
  core::Value final_state = client.get(cms, ns.name(), "counter");
  EXPECT_EQ(final_state.get_string({"data", "a"}), "racer");
  EXPECT_EQ(final_state.get_string({"data", "mine"}), "yes");
}

TEST(Crud, InvalidObjectReportsFieldCauses) {
  Client client(admin_config());
  TestNamespace ns(client);
  core::Value bad = config_map(ns.name(), "Not_A_Valid_Name");
  try {
    client.create(resources::config_maps(), bad);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Invalid)) << e.what();
    ASSERT_FALSE(e.causes().empty());
    EXPECT_EQ(e.causes()[0].field, "metadata.name");
  }
}

const char* kWidgetCrd = R"(
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.kubeclient.gpufleet.io
spec:
  group: kubeclient.gpufleet.io
  scope: Namespaced
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, minimum: 0}
          status:
            type: object
            properties:
              replicas: {type: integer}
              phase: {type: string}
)";

TEST(Crud, CustomResourceWithStatusAndScaleSubresources) {
  Client client(admin_config());
  auto crds = resources::custom_resource_definitions();
  core::Value crd = core::parse_yaml(kWidgetCrd);
  client.apply(crds, crd, {"kube-it", true});
  // Wait for the CRD to be served; discovery refreshes on a miss.
  ResourceId gadgets;
  for (int i = 0;; ++i) {
    try {
      gadgets = client.resource_for("kubeclient.gpufleet.io/v1alpha1", "Gadget");
      break;
    } catch (const ApiError& e) {
      ASSERT_TRUE(e.is(Reason::NotFound)) << e.what();
      ASSERT_LT(i, 100) << "CRD not served after 10 s";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_EQ(gadgets.resource, "gadgets");
  EXPECT_TRUE(gadgets.namespaced);
  TestNamespace ns(client);
  core::Value g;
  g["apiVersion"] = "kubeclient.gpufleet.io/v1alpha1";
  g["kind"] = "Gadget";
  g["metadata"]["name"] = "g1";
  g["metadata"]["namespace"] = ns.name();
  g["spec"]["replicas"] = 1;
  g["status"]["phase"] = "ignored-on-create";
  core::Value created = client.create(gadgets, g);
  EXPECT_EQ(created.find("status"), nullptr);  // status is a subresource
  created["status"]["phase"] = "Ready";
  created["status"]["replicas"] = 1;
  core::Value with_status = client.update_status(gadgets, created);
  EXPECT_EQ(with_status.get_string({"status", "phase"}), "Ready");
  // Status via SSA on the subresource.
  core::Value st;
  st["apiVersion"] = "kubeclient.gpufleet.io/v1alpha1";
  st["kind"] = "Gadget";
  st["metadata"]["name"] = "g1";
  st["metadata"]["namespace"] = ns.name();
  st["status"]["phase"] = "Degraded";
  EXPECT_EQ(
      client.apply(gadgets, st, {"kube-it-status", true}, "status").get_string({"status", "phase"}),
      "Degraded");
  // Scale subresource.
  core::Value scale = client.set_scale(gadgets, ns.name(), "g1", 3);
  EXPECT_EQ(scale.get_string({"kind"}), "Scale");
  EXPECT_EQ(client.get(gadgets, ns.name(), "g1").get({"spec", "replicas"})->as_int(), 3);
  EXPECT_EQ(client.get_scale(gadgets, ns.name(), "g1").get({"spec", "replicas"})->as_int(), 3);
  // Schema validation.
  g["metadata"]["name"] = "g2";
  g["spec"]["replicas"] = -1;
  try {
    client.create(gadgets, g);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Invalid)) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("spec.replicas"));
  }
  client.remove(gadgets, ns.name(), "g1");
}

TEST(Discovery, BuiltInsAndGroupVersions) {
  Client client(admin_config());
  ResourceId deploy = client.resource_for("apps/v1", "Deployment");
  EXPECT_EQ(deploy, resources::deployments());
  EXPECT_EQ(client.resource_for("v1", "Node"), resources::nodes());
  EXPECT_EQ(client.resource_for("coordination.k8s.io/v1", "Lease"), resources::leases());
  EXPECT_THROW(client.resource_for("v1", "Gizmo"), ApiError);
  auto gvs = client.server_group_versions();
  EXPECT_THAT(gvs, ::testing::Contains("v1"));
  EXPECT_THAT(gvs, ::testing::Contains("policy/v1"));
  EXPECT_THAT(client.get_raw("/readyz"), HasSubstr("ok"));
}

TEST(Transport, ManyWatchesAndRequestsShareOneHttp2Connection) {
  Client client(admin_config());
  TestNamespace ns(client);
  std::vector<std::unique_ptr<WatchStream>> watches;
  for (const auto& r : {resources::config_maps(), resources::pods(), resources::leases(),
                        resources::events(), resources::service_accounts()}) {
    WatchOptions wo;
    wo.timeout_seconds = 1;
    watches.push_back(client.watch(r, ns.name(), wo));
  }
  for (int i = 0; i < 10; ++i) client.list(resources::config_maps(), ns.name());
  for (auto& w : watches) {
    while (w->next()) {
    }
  }
  watches.clear();
  Client::TransportStats s = client.transport_stats();
  EXPECT_GE(s.requests, 15u);
  EXPECT_EQ(s.http2_requests, s.requests);
  EXPECT_EQ(s.connections, 1u);
}

// kMaps ConfigMaps of ~900 KiB in `ns` (7 MB, labelled app=kube-it): a list far over
// Client::kListBacklogBytes.
constexpr int kMaps = 8;
void create_big_config_maps(Client& client, const std::string& ns) {
  const std::string payload(900 * 1024, 'x');
  for (int i = 0; i < kMaps; ++i) {
    core::Value cm = config_map(ns, "big-" + std::to_string(i));
    cm["data"]["payload"] = payload;
    client.create(resources::config_maps(), cm);
  }
}

// A streamed list read slower than the server sends it is paused at Client::kListBacklogBytes:
// the rest waits in the socket and the server, not in this process (issue 15: peak memory of an
// informer's sync). Eight ConfigMaps of ~900 KiB are 7 MB, seven times the bound.
TEST(Transport, StreamedListPausesForASlowReaderAndKeepsItsBacklogBounded) {
  Client client(admin_config());
  TestNamespace ns(client);
  create_big_config_maps(client, ns.name());
  const Client::TransportStats before = client.transport_stats();
  ListOptions lo;
  lo.resource_version = "0";          // from the watch cache, as an informer lists
  lo.label_selector = "app=kube-it";  // not the namespace's kube-root-ca.crt
  std::size_t items = 0;
  std::size_t bytes = 0;
  client.list_page_streamed_text(resources::config_maps(), ns.name(), lo, false,
                                 [&](std::string_view item) {
                                   ++items;
                                   bytes += item.size();
                                   // A reader far slower than loopback: the backlog would be the
                                   // whole list without backpressure.
                                   std::this_thread::sleep_for(std::chrono::milliseconds(150));
                                 });
  const Client::TransportStats after = client.transport_stats();
  EXPECT_EQ(items, std::size_t{kMaps});
  ASSERT_GT(bytes, 6 * Client::kListBacklogBytes);
  EXPECT_GE(after.stream_pauses, before.stream_pauses + 1);
  // The bound plus what libcurl hands over in one write callback.
  EXPECT_LE(after.max_stream_backlog, Client::kListBacklogBytes + 256 * 1024);
  EXPECT_EQ(after.requests, before.requests + 1);
  EXPECT_EQ(after.http2_requests, before.http2_requests);  // its own HTTP/1.1 connection
  // Everything else still shares the one HTTP/2 connection.
  ListOptions labelled;
  labelled.label_selector = "app=kube-it";
  EXPECT_EQ(client.list(resources::config_maps(), ns.name(), labelled).items.size(),
            std::size_t{kMaps});
  EXPECT_EQ(client.transport_stats().http2_requests, after.http2_requests + 1);
}

// A controller's start: a big list paused for its slow reader while watches and requests
// start beside it. With the paused HTTP/1.1 lists in the same libcurl multi handle as the
// HTTP/2 connection, the watches waited for a connection forever (a sentinel controller at
// 5,000 NodeHealths never synced); lists now have a transport of their own.
TEST(Transport, WatchesAndRequestsGoOnWhileAListIsPaused) {
  Client setup(admin_config());
  TestNamespace ns(setup);
  create_big_config_maps(setup, ns.name());
  // A fresh client, as a controller starts: no connection yet; six informers list at once
  // (one big list, paused because its reader takes nothing until the others are done), then
  // each small one watches, and requests go beside them.
  Client client(admin_config());
  std::atomic<int> listed{0};
  std::atomic<bool> watched{false};
  std::jthread lister([&] {
    ListOptions lo;
    lo.resource_version = "0";
    lo.label_selector = "app=kube-it";
    client.list_page_streamed_text(resources::config_maps(), ns.name(), lo, false,
                                   [&](std::string_view) {
                                     for (int i = 0; i < 600 && !watched; ++i)
                                       std::this_thread::sleep_for(std::chrono::milliseconds(100));
                                     ++listed;
                                   });
  });
  std::mutex errors_mu;
  std::vector<std::string> errors;
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::jthread> informers;
    for (const auto& r : {resources::jobs(), resources::pods(), resources::leases(),
                          resources::events(), resources::service_accounts()}) {
      informers.emplace_back([&client, &ns, &errors_mu, &errors, r] {
        try {
          ListOptions lo;
          lo.resource_version = "0";
          client.list_page_streamed_text(r, ns.name(), lo, false, [](std::string_view) {});
          WatchOptions wo;
          wo.timeout_seconds = 1;
          auto w = client.watch(r, ns.name(), wo);
          while (w->next()) {
          }
          for (int i = 0; i < 3; ++i) client.list(r, ns.name());
        } catch (const std::exception& e) {
          // With one libcurl multi handle: "Received HTTP/0.9 when not allowed" on a watch.
          std::lock_guard lock(errors_mu);
          errors.push_back(e.what());
        }
      });
    }
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Read before the reader is let go: once `watched` is set it may take its next item at once.
  const int listed_while_paused = listed.load();
  watched = true;
  EXPECT_THAT(errors, ::testing::IsEmpty());
  EXPECT_EQ(listed_while_paused, 0);
  // 1 s watches; the stall lasted until the request timeout (30 s and more).
  EXPECT_LT(took, 15.0) << "lists, watches and requests waited for the paused list";
  lister.join();
  EXPECT_EQ(listed.load(), kMaps);
  EXPECT_GT(client.transport_stats().stream_pauses, 0u) << "the list never paused";
}

}  // namespace
}  // namespace gpufleet::kube
