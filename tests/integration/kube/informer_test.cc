// Watches and informers against kube-apiserver, including an API server restart, etcd
// compaction (410 Gone, relist) and 1,000 concurrent updates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "kube/api/objects.h"
#include "kube/informer.h"
#include "test_env.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using testing::admin_config;
using testing::env_or_empty;
using testing::run_command;
using testing::TestNamespace;

core::Value config_map(const std::string& ns, const std::string& name, const std::string& v) {
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = name;
  cm["metadata"]["namespace"] = ns;
  cm["data"]["v"] = v;
  return cm;
}

// What the handlers saw: the last state per key, and any delivery of an unchanged state.
class Recorder {
 public:
  EventHandlers handlers() {
    EventHandlers h;
    h.on_add = [this](const core::Value& o) { set(o); };
    h.on_update = [this](const core::Value& old_obj, const core::Value& new_obj) {
      if (resource_version_of(old_obj) == resource_version_of(new_obj)) ++duplicates;
      set(new_obj);
    };
    h.on_delete = [this](const core::Value& o, bool unknown) {
      std::lock_guard lock(mu);
      state.erase(object_key(o));
      if (unknown) ++deleted_while_away;
    };
    return h;
  }
  std::map<std::string, std::string> snapshot() {
    std::lock_guard lock(mu);
    return state;
  }
  std::atomic<int> duplicates{0};
  std::atomic<int> deleted_while_away{0};

 private:
  void set(const core::Value& o) {
    std::lock_guard lock(mu);
    state[object_key(o)] = std::string(o.get_string({"data", "v"}));
  }
  std::mutex mu;
  std::map<std::string, std::string> state;
};

std::map<std::string, std::string> server_state(Client& client, const std::string& ns) {
  std::map<std::string, std::string> out;
  for (const auto& cm : client.list(resources::config_maps(), ns).items) {
    if (name_of(cm) == "kube-root-ca.crt") continue;
    out[object_key(cm)] = std::string(cm.get_string({"data", "v"}));
  }
  return out;
}

std::map<std::string, std::string> cache_state(const Informer& inf) {
  std::map<std::string, std::string> out;
  for (const auto& cm : inf.store().list()) {
    if (name_of(*cm) == "kube-root-ca.crt") continue;
    out[object_key(*cm)] = std::string(cm->get_string({"data", "v"}));
  }
  return out;
}

std::map<std::string, std::string> without_root_ca(std::map<std::string, std::string> m,
                                                   const std::string& ns) {
  m.erase(ns + "/kube-root-ca.crt");
  return m;
}

// Waits until the cache and the handlers agree with the server.
void expect_converges(Client& client, Informer& inf, Recorder& rec, const std::string& ns,
                      std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::map<std::string, std::string> server, cache, seen;
  while (std::chrono::steady_clock::now() < deadline) {
    server = server_state(client, ns);
    cache = cache_state(inf);
    seen = without_root_ca(rec.snapshot(), ns);
    if (server == cache && server == seen) return;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(cache, server) << "informer cache did not converge; last error: " << inf.last_error();
  EXPECT_EQ(seen, server) << "handlers did not see the final state";
}

InformerOptions config_map_informer(const std::string& ns) {
  InformerOptions o;
  o.resource = resources::config_maps();
  o.namespace_ = ns;
  o.shape.prune = {"metadata.managedFields"};
  o.backoff_base = 200ms;
  o.backoff_max = 2000ms;
  return o;
}

TEST(Watch, StreamsEventsFromAResourceVersion) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  ListResult start = client.list(cms, ns.name());
  client.create(cms, config_map(ns.name(), "w1", "a"));
  core::Value p;
  p["data"]["v"] = "b";
  client.patch(cms, ns.name(), "w1", PatchType::Merge, p);
  client.remove(cms, ns.name(), "w1");
  WatchOptions wo;
  wo.resource_version = start.resource_version;
  wo.timeout_seconds = 5;
  auto watch = client.watch(cms, ns.name(), wo, {false, {"metadata.managedFields"}});
  std::vector<std::string> seen;
  while (auto ev = watch->next()) {
    if (ev->type == WatchEvent::Type::Bookmark || name_of(ev->object) != "w1") continue;
    EXPECT_EQ(ev->object.get({"metadata", "managedFields"}), nullptr);
    seen.push_back(std::string(watch_event_type_name(ev->type)) + ":" +
                   std::string(ev->object.get_string({"data", "v"})));
    if (ev->type == WatchEvent::Type::Deleted) break;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED:a", "MODIFIED:b", "DELETED:b"}));
}

TEST(Informer, IndexesHandlersAndTrimming) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  client.create(cms, config_map(ns.name(), "before", "1"));
  InformerOptions o = config_map_informer(ns.name());
  o.transform = [](core::Value& obj) { obj["metadata"].as_map().erase("uid"); };
  Informer inf(client, o);
  inf.add_index("value", [](const core::Value& obj) {
    return std::vector<std::string>{std::string(obj.get_string({"data", "v"}))};
  });
  Recorder rec;
  inf.add_handlers(rec.handlers());
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s)) << inf.last_error();
  EXPECT_TRUE(inf.has_synced());
  client.create(cms, config_map(ns.name(), "after", "2"));
  expect_converges(client, inf, rec, ns.name(), 20s);
  ASSERT_EQ(inf.store().by_index("value", "2").size(), 1u);
  auto cached = inf.store().get(ns.name() + "/after");
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->get({"metadata", "managedFields"}), nullptr);  // pruned while decoding
  EXPECT_EQ(cached->get({"metadata", "uid"}), nullptr);            // transform
  client.remove(cms, ns.name(), "before");
  expect_converges(client, inf, rec, ns.name(), 20s);
  EXPECT_EQ(rec.duplicates.load(), 0);
  inf.stop();
}

TEST(Informer, ResyncRedeliversCachedObjects) {
  Client client(admin_config());
  TestNamespace ns(client);
  client.create(resources::config_maps(), config_map(ns.name(), "steady", "1"));
  InformerOptions o = config_map_informer(ns.name());
  o.resync_period = 300ms;
  Informer inf(client, o);
  std::atomic<int> resyncs{0};
  EventHandlers h;
  h.on_update = [&](const core::Value& a, const core::Value& b) {
    if (name_of(b) == "steady" && resource_version_of(a) == resource_version_of(b)) ++resyncs;
  };
  inf.add_handlers(h);
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s));
  for (int i = 0; i < 100 && resyncs < 2; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_GE(resyncs.load(), 2);
}

TEST(Informer, MetadataOnly) {
  Client client(admin_config());
  TestNamespace ns(client);
  client.create(resources::config_maps(), config_map(ns.name(), "m", "big"));
  InformerOptions o = config_map_informer(ns.name());
  o.shape.metadata_only = true;
  Informer inf(client, o);
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s)) << inf.last_error();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!inf.store().get(ns.name() + "/m") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  auto cached = inf.store().get(ns.name() + "/m");
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->find("data"), nullptr);
  EXPECT_EQ(cached->get_string({"kind"}), "PartialObjectMetadata");
}

TEST(Informer, ConvergesUnderAThousandConcurrentUpdates) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  constexpr int kObjects = 20;
  for (int i = 0; i < kObjects; ++i) {
    client.create(cms, config_map(ns.name(), "c" + std::to_string(i), "initial"));
  }
  Informer inf(client, config_map_informer(ns.name()));
  Recorder rec;
  inf.add_handlers(rec.handlers());
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s)) << inf.last_error();
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 250; ++i) {
        core::Value p;
        p["data"]["v"] = std::to_string(w * 1000 + i);
        try {
          client.patch(cms, ns.name(), "c" + std::to_string((w * 250 + i) % kObjects),
                       PatchType::Merge, p);
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures.load(), 0);
  expect_converges(client, inf, rec, ns.name(), 60s);
  EXPECT_EQ(rec.duplicates.load(), 0);
  Informer::Stats st = inf.stats();
  EXPECT_EQ(st.gone, 0u);
  EXPECT_EQ(st.lists, 1u);
  // Every patch changed the object (no value repeats, none equals "initial"), so every one of
  // them must arrive as its own event.
  EXPECT_GE(st.events, 1000u) << "watches " << st.watches << ", failures " << st.failures
                              << ", last error: " << inf.last_error();
}

// A compact informer without a transform decodes list items and watch events straight from
// JSON into the compact form, projected while decoding; core::Value handlers and compact
// handlers both see every change, and a stopped informer resumes from its resourceVersion.
TEST(Informer, CompactDecodesStraightFromJsonAndProjects) {
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  core::Value big = config_map(ns.name(), "before", "1");
  big["data"]["dropped"] = std::string(2000, 'x');
  big["metadata"]["labels"]["tier"] = "gpu";
  client.create(cms, big);
  InformerOptions o = config_map_informer(ns.name());
  o.compact = true;
  o.project = {"data.v", "metadata.labels"};  // name, namespace, resourceVersion always kept
  Informer inf(client, o);
  Recorder rec;
  inf.add_handlers(rec.handlers());
  std::mutex mu;
  std::map<std::string, std::string> compact_seen;
  int compact_updates = 0;
  EventHandlers ch;
  auto record = [&](const CompactObject& obj) {
    std::lock_guard lock(mu);
    compact_seen[object_key(obj.namespace_(), obj.name())] =
        std::string(obj.root().get_string({"data", "v"}));
  };
  ch.on_add_compact = record;
  ch.on_update_compact = [&](const CompactObject& old_obj, const CompactObject& new_obj) {
    std::lock_guard lock(mu);
    EXPECT_NE(old_obj.resource_version(), new_obj.resource_version());
    ++compact_updates;
    compact_seen[object_key(new_obj.namespace_(), new_obj.name())] =
        std::string(new_obj.root().get_string({"data", "v"}));
  };
  ch.on_delete_compact = [&](const CompactObject& obj, bool) {
    std::lock_guard lock(mu);
    compact_seen.erase(object_key(obj.namespace_(), obj.name()));
  };
  inf.add_handlers(ch);
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s)) << inf.last_error();
  client.create(cms, config_map(ns.name(), "after", "2"));
  core::Value p;
  p["data"]["v"] = "3";
  client.patch(cms, ns.name(), "before", PatchType::Merge, p);
  expect_converges(client, inf, rec, ns.name(), 20s);
  CompactPtr cached = inf.store().get_compact(ns.name() + "/before");
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->root().get_string({"data", "v"}), "3");
  EXPECT_FALSE(cached->root().get({"data", "dropped"}).has_value());  // projected away
  EXPECT_FALSE(cached->root().get({"metadata", "uid"}).has_value());
  EXPECT_FALSE(cached->root().get({"metadata", "managedFields"}).has_value());
  EXPECT_EQ(cached->root().get_string({"metadata", "labels", "tier"}), "gpu");
  EXPECT_FALSE(cached->resource_version().empty());
  // Stopped, changed, started again: the watch resumes from the cached resourceVersion.
  inf.stop();
  client.remove(cms, ns.name(), "after");
  p["data"]["v"] = "4";
  client.patch(cms, ns.name(), "before", PatchType::Merge, p);
  inf.start();
  expect_converges(client, inf, rec, ns.name(), 20s);
  EXPECT_EQ(inf.stats().lists, 1u);
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(without_root_ca(compact_seen, ns.name()), server_state(client, ns.name()));
    EXPECT_GE(compact_updates, 2);
  }
  EXPECT_EQ(rec.duplicates.load(), 0);
  inf.stop();
}

std::string kube_local(const std::string& args) {
  std::string bin = env_or_empty("KUBE_LOCAL_BIN");
  std::string dir = env_or_empty("GPUFLEET_KUBE_LOCAL_DIR");
  if (bin.empty() || dir.empty()) return {};
  return bin + " " + args + " --data-dir " + dir + " >/dev/null";
}

TEST(Informer, ResumesAcrossAnApiServerRestartWithoutLosingUpdates) {
  if (kube_local("down").empty()) GTEST_SKIP() << "KUBE_LOCAL_BIN/GPUFLEET_KUBE_LOCAL_DIR unset";
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  for (int i = 0; i < 10; ++i)
    client.create(cms, config_map(ns.name(), "r" + std::to_string(i), "0"));
  Informer inf(client, config_map_informer(ns.name()));
  Recorder rec;
  inf.add_handlers(rec.handlers());
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s));
  expect_converges(client, inf, rec, ns.name(), 20s);
  auto watches_before = inf.stats().watches;

  ASSERT_EQ(run_command(kube_local("down")), 0);
  ASSERT_EQ(run_command(kube_local("up --detach")), 0);
  // Changes right after the restart, while the informer is still reconnecting.
  for (int i = 0; i < 10; i += 2) {
    core::Value p;
    p["data"]["v"] = "after-restart";
    client.patch(cms, ns.name(), "r" + std::to_string(i), PatchType::Merge, p);
  }
  client.remove(cms, ns.name(), "r1");
  client.create(cms, config_map(ns.name(), "r-new", "new"));
  expect_converges(client, inf, rec, ns.name(), 60s);
  EXPECT_GT(inf.stats().watches, watches_before);
  EXPECT_EQ(rec.duplicates.load(), 0);
}

TEST(Informer, RelistsAfterCompactionGone) {
  if (kube_local("down").empty()) GTEST_SKIP() << "KUBE_LOCAL_BIN/GPUFLEET_KUBE_LOCAL_DIR unset";
  Client client(admin_config());
  TestNamespace ns(client);
  auto cms = resources::config_maps();
  for (int i = 0; i < 5; ++i)
    client.create(cms, config_map(ns.name(), "g" + std::to_string(i), "0"));
  InformerOptions o = config_map_informer(ns.name());
  Informer inf(client, o);
  Recorder rec;
  inf.add_handlers(rec.handlers());
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(30s));
  expect_converges(client, inf, rec, ns.name(), 20s);
  std::string old_rv = inf.resource_version();

  // While the informer is stopped: changes, etcd compaction past its resourceVersion, and an
  // API server restart (which empties the watch cache that could otherwise replay them).
  inf.stop();
  client.remove(cms, ns.name(), "g0");
  client.create(cms, config_map(ns.name(), "g-new", "new"));
  core::Value p;
  p["data"]["v"] = "changed";
  client.patch(cms, ns.name(), "g1", PatchType::Merge, p);
  ASSERT_EQ(run_command(kube_local("compact")), 0);
  ASSERT_EQ(run_command(kube_local("down")), 0);
  ASSERT_EQ(run_command(kube_local("up --detach")), 0);
  inf.start();

  // A plain watch from the compacted version is refused with 410.
  WatchOptions wo;
  wo.resource_version = old_rv;
  wo.timeout_seconds = 5;
  try {
    auto w = client.watch(cms, ns.name(), wo);
    while (w->next()) {
    }
    ADD_FAILURE() << "watch from a compacted resourceVersion was not refused";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 410) << e.what();
  }
  // The same over protobuf, where the 410 Status arrives in protobuf (a Node watch: versions
  // are etcd's revisions, shared by every kind).
  wo.protobuf = true;
  try {
    auto w = client.watch(resources::nodes(), "", wo);
    while (w->next_compact({})) {
    }
    ADD_FAILURE() << "protobuf watch from a compacted resourceVersion was not refused";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 410) << e.what();
    EXPECT_TRUE(e.is(Reason::Gone) || e.is(Reason::Expired)) << e.what();
  }
  expect_converges(client, inf, rec, ns.name(), 60s);
  EXPECT_GE(inf.stats().gone, 1u);
  EXPECT_GE(inf.stats().lists, 2u);
  EXPECT_EQ(rec.duplicates.load(), 0);
  EXPECT_EQ(rec.deleted_while_away.load(), 1);  // g0, reported by the relist
}

}  // namespace
}  // namespace gpufleet::kube
