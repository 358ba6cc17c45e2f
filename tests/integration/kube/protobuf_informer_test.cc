// Informers of Nodes and Pods over protobuf against kube-apiserver: each runs beside the same
// informer over JSON, through paged lists and watch events (updates of labels, status and
// taints, deletes), and the two caches must hold the same compact objects, byte for byte.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "kube/api/objects.h"
#include "kube/api/trim.h"
#include "kube/informer.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using testing::admin_config;
using testing::TestNamespace;

core::Value testdata(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/" + name);
  std::ostringstream ss;
  ss << in.rdbuf();
  core::Value v = core::parse_json(ss.str(), name);
  for (const char* k : {"uid", "resourceVersion", "creationTimestamp", "managedFields",
                        "generateName", "ownerReferences", "finalizers"}) {
    v["metadata"].as_map().erase(k);
  }
  return v;
}

// Sets an object's status, retrying over controllers that change it meanwhile.
void put_status(Client& client, const ResourceId& r, const std::string& ns, const std::string& name,
                const std::function<void(core::Value&)>& change) {
  for (int attempt = 0;; ++attempt) {
    core::Value current = client.get(r, ns, name);
    change(current);
    try {
      client.update_status(r, current);
      return;
    } catch (const ApiError& e) {
      if (!e.is(Reason::Conflict) || attempt > 20) throw;
    }
  }
}

std::map<std::string, std::string> tapes(const Informer& inf) {
  std::map<std::string, std::string> out;
  for (const auto& obj : inf.store().list_compact()) {
    out[object_key(obj->namespace_(), obj->name())] = std::string(obj->tape());
  }
  return out;
}

// Waits until both caches hold `count` objects, satisfy `done` and are equal.
void expect_same_caches(const Informer& pb, const Informer& js, std::size_t count,
                        const std::function<bool(const Informer&)>& done) {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pb.store().size() == count && js.store().size() == count && done(pb) && done(js) &&
        tapes(pb) == tapes(js)) {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(pb.store().size(), count) << pb.last_error();
  EXPECT_TRUE(done(pb)) << pb.last_error();
  EXPECT_TRUE(done(js)) << js.last_error();
  std::map<std::string, std::string> a = tapes(pb);
  std::map<std::string, std::string> b = tapes(js);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, tape] : a) {
    ASSERT_TRUE(b.count(key)) << key;
    EXPECT_EQ(tape, b[key]) << key << ": protobuf "
                            << core::to_json(pb.store().get_compact(key)->to_value()) << "\njson "
                            << core::to_json(js.store().get_compact(key)->to_value());
  }
  EXPECT_TRUE(pb.asks_protobuf()) << pb.last_error();
}

std::string run_id() {
  std::random_device rd;
  return std::to_string(rd() % 1000000);
}

struct Variant {
  const char* name;
  std::vector<std::string> prune;
  std::vector<std::string> project;
};

TEST(ProtobufInformer, NodesMatchTheJsonCacheThroughPagedListsAndWatches) {
  Client client(admin_config());
  const std::string run = run_id();
  const std::string label = "gpufleet.io/pb-it";
  core::Value node = testdata("node-gpu.json");
  node["metadata"]["labels"][label] = run;
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {  // each variant deletes one: three stay
    core::Value n = node;
    n["metadata"]["name"] = "pb-it-" + run + "-" + std::to_string(i);
    client.create(resources::nodes(), n);
    put_status(client, resources::nodes(), "", std::string(name_of(n)),
               [&](core::Value& obj) { obj["status"] = node["status"]; });
    names.push_back(std::string(name_of(n)));
  }
  struct Cleanup {
    Client& c;
    std::vector<std::string>& names;
    ~Cleanup() {
      for (const auto& n : names) {
        try {
          c.remove(resources::nodes(), "", n);
        } catch (const std::exception&) {
        }
      }
    }
  } cleanup{client, names};

  // Paged lists (a consistent read, not the watch cache): continue tokens in protobuf too.
  {
    ListOptions lo;
    lo.label_selector = label + "=" + run;
    lo.limit = 2;
    std::size_t items = 0;
    int pages = 0;
    for (;;) {
      ListResult page = client.list_page_streamed_wire(
          resources::nodes(), "", lo, [](std::string_view) { FAIL() << "a JSON item"; },
          [&](std::string_view message) {
            CompactPtr c = decode_compact_protobuf(message, *ProtobufKind::find("Node"));
            EXPECT_EQ(c->root().get_string({"metadata", "labels", label}), run);
            ++items;
          });
      EXPECT_TRUE(page.protobuf);
      EXPECT_FALSE(page.resource_version.empty());
      ++pages;
      if (page.continue_token.empty()) break;
      lo.continue_token = page.continue_token;
    }
    EXPECT_EQ(items, names.size());
    EXPECT_EQ(pages, 3);  // 2 + 2 + 2
  }

  std::vector<Variant> variants{{"whole", {}, {}},
                                {"pruned", node_prune_paths(), {}},
                                {"health", node_prune_paths(), node_health_fields()}};
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    InformerOptions o;
    o.resource = resources::nodes();
    o.label_selector = label + "=" + run;
    o.compact = true;
    o.shape.prune = v.prune;
    o.project = v.project;
    Informer pb(client, o);
    o.protobuf = false;
    Informer js(client, o);
    EXPECT_FALSE(js.asks_protobuf());
    pb.start();
    js.start();
    ASSERT_TRUE(pb.wait_for_sync(30s)) << pb.last_error();
    ASSERT_TRUE(js.wait_for_sync(30s)) << js.last_error();
    EXPECT_EQ(pb.stats().protobuf_lists, 1U);  // from the watch cache: one page
    EXPECT_EQ(js.stats().protobuf_lists, 0U);
    expect_same_caches(pb, js, names.size(), [](const Informer&) { return true; });

    // Watch events: labels, a taint, a condition's status and a delete.
    const std::string stamp = v.name;
    core::Value patch;
    patch["metadata"]["labels"]["gpufleet.io/pb-it-step"] = stamp;
    client.patch(resources::nodes(), "", names[0], PatchType::Merge, patch);
    core::Value taint;
    taint["spec"]["taints"] = core::Value::list();
    core::Value t;
    t["key"] = "gpufleet.io/pb-it";
    t["value"] = stamp;
    t["effect"] = "NoSchedule";
    taint["spec"]["taints"].as_list().push_back(t);
    taint["spec"]["unschedulable"] = true;
    client.patch(resources::nodes(), "", names[1], PatchType::Merge, taint);
    // A condition of its own: the node lifecycle controller rewrites Ready on Nodes that do
    // not heartbeat.
    put_status(client, resources::nodes(), "", names[2], [&](core::Value& obj) {
      core::Value c;
      c["type"] = "PbItStep" + stamp;
      c["status"] = "True";
      c["reason"] = "Step";
      c["message"] = "";
      c["lastTransitionTime"] = "2026-01-02T03:04:05Z";
      obj["status"]["conditions"].as_list().push_back(c);
    });
    const std::string removed = names.back();
    client.remove(resources::nodes(), "", removed);
    names.pop_back();
    expect_same_caches(pb, js, names.size(), [&](const Informer& inf) {
      CompactPtr n0 = inf.store().get_compact(names[0]);
      CompactPtr n2c = inf.store().get_compact(names[2]);
      return n0 && n2c && !inf.store().get_compact(removed) &&
             (!v.project.empty() ||
              n0->root().get_string({"metadata", "labels", "gpufleet.io/pb-it-step"}) == stamp) &&
             core::to_json(n2c->to_value()).find("PbItStep" + stamp) != std::string::npos;
    });
    EXPECT_GE(pb.stats().protobuf_watches, 1U);
    EXPECT_GE(pb.stats().events, 4U);
    pb.stop();
    js.stop();
  }
}

TEST(ProtobufInformer, PodsMatchTheJsonCache) {
  Client client(admin_config());
  TestNamespace ns(client);
  // The namespace's service account: kube-local may run without the controller that makes it.
  core::Value sa;
  sa["apiVersion"] = "v1";
  sa["kind"] = "ServiceAccount";
  sa["metadata"]["name"] = "default";
  sa["metadata"]["namespace"] = ns.name();
  try {
    client.create(resources::service_accounts(), sa);
  } catch (const ApiError& e) {
    if (!e.is(Reason::AlreadyExists)) throw;
  }
  core::Value pod = testdata("pod-gpu.json");
  pod["metadata"]["namespace"] = ns.name();
  pod["spec"].as_map().erase("nodeName");  // unscheduled: deleted at once, no kubelet needed
  for (int i = 0; i < 3; ++i) {
    core::Value p = pod;
    p["metadata"]["name"] = "pb-it-" + std::to_string(i);
    for (int attempt = 0;; ++attempt) {  // the service account may take a moment to be seen
      try {
        client.create(resources::pods(), p);
        break;
      } catch (const ApiError& e) {
        if (attempt > 50 || !e.is(Reason::Forbidden)) throw;
        std::this_thread::sleep_for(100ms);
      }
    }
    put_status(client, resources::pods(), ns.name(), std::string(name_of(p)),
               [&](core::Value& obj) { obj["status"] = pod["status"]; });
  }
  InformerOptions o;
  o.resource = resources::pods();
  o.namespace_ = ns.name();
  o.compact = true;
  Informer pb(client, o);
  o.protobuf = false;
  Informer js(client, o);
  pb.start();
  js.start();
  ASSERT_TRUE(pb.wait_for_sync(30s)) << pb.last_error();
  ASSERT_TRUE(js.wait_for_sync(30s)) << js.last_error();
  EXPECT_EQ(pb.stats().protobuf_lists, 1U);
  expect_same_caches(pb, js, 3, [](const Informer&) { return true; });

  core::Value patch;
  patch["metadata"]["labels"]["step"] = "two";
  patch["metadata"]["annotations"]["note"] = "";
  client.patch(resources::pods(), ns.name(), "pb-it-0", PatchType::Merge, patch);
  DeleteOptions now;
  now.grace_period_seconds = 0;
  client.remove(resources::pods(), ns.name(), "pb-it-2", now);
  const std::string key0 = ns.name() + "/pb-it-0";
  expect_same_caches(pb, js, 2, [&](const Informer& inf) {
    CompactPtr p0 = inf.store().get_compact(key0);
    return p0 && p0->root().get_string({"metadata", "labels", "step"}) == "two";
  });
  EXPECT_GE(pb.stats().protobuf_watches, 1U);

  // Kinds this build has no schema for stay on JSON.
  InformerOptions cm;
  cm.resource = resources::config_maps();
  cm.namespace_ = ns.name();
  cm.compact = true;
  Informer config_maps(client, cm);
  EXPECT_FALSE(config_maps.asks_protobuf());
  pb.stop();
  js.stop();
}

}  // namespace
}  // namespace gpufleet::kube
