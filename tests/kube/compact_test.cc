// The compact cached form: a faithful round trip for every kind of value, in-place lookups,
// the interner's bounds and its thread safety (this file runs under TSan too), and a compact
// Store behaving like a plain one.
#include "kube/api/compact.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/json.h"
#include "kube/api/meta.h"
#include "kube/api/store.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

core::Value node_fixture() {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/node-gpu.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  return core::parse_json(ss.str(), "node-gpu.json");
}

TEST(Compact, RoundTripsEveryKind) {
  core::Value v = core::parse_json(
      R"({"a":null,"b":true,"c":false,"i":-42,"big":9223372036854775807,"neg":-9223372036854775808,
          "u":18446744073709551615,"d":2.5,"s":"text","empty":"","l":[1,"x",[],{}],
          "m":{"z":1,"a":{"deep":["v"]}},"name":"unique-name"})");
  v["bytes"] = core::Value(core::Bytes{std::string("\0\x01\xff", 3)});
  v[std::string(300, 'k')] = std::string(1000, 'v');  // too long to intern: stored inline
  StringInterner interner;
  CompactPtr c = CompactObject::encode(v, interner);
  EXPECT_EQ(c->to_value(), v);
  EXPECT_EQ(core::to_json(c->to_value()), core::to_json(v));
}

TEST(Compact, RealNodeRoundTripsAndIsSmall) {
  core::Value node = node_fixture();
  StringInterner interner;
  CompactPtr c = CompactObject::encode(node, interner);
  EXPECT_EQ(c->to_value(), node);
  // The tape holds at most the JSON's size (keys and repeated values are ids).
  EXPECT_LT(c->tape_bytes(), core::to_json(node).size());
  EXPECT_EQ(c->name(), name_of(node));
  EXPECT_EQ(c->resource_version(), resource_version_of(node));
}

TEST(Compact, LookupsInPlace) {
  core::Value v = core::parse_json(
      R"({"metadata":{"name":"n1","labels":{"a":"1","b":"2","c":"3"}},"spec":{"n":7,"t":true},
          "status":{"conditions":[{"type":"Ready","status":"True"},{"type":"X","status":"False"}]}})");
  StringInterner interner;
  CompactPtr c = CompactObject::encode(v, interner);
  CompactView root = c->root();
  EXPECT_TRUE(root.is_map());
  EXPECT_EQ(root.size(), 3u);
  EXPECT_EQ(root.get_string({"metadata", "labels", "b"}), "2");
  EXPECT_EQ(root.get_string({"metadata", "labels", "zz"}, "none"), "none");
  EXPECT_FALSE(root.get({"metadata", "nope"}).has_value());
  EXPECT_FALSE(root.get({"metadata", "name", "deeper"}).has_value());  // not a map
  EXPECT_EQ(root.get({"spec", "n"})->int_value(), 7);
  EXPECT_EQ(root.get({"spec", "t"})->bool_value(), true);
  EXPECT_FALSE(root.get({"spec", "t"})->string().has_value());
  std::vector<std::string> seen;
  root.get({"status", "conditions"})->for_each_element([&](CompactView cond) {
    seen.push_back(std::string(cond.get_string({"type"})) + "=" +
                   std::string(cond.get_string({"status"})));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"Ready=True", "X=False"}));
  std::vector<std::string> keys;
  root.get({"metadata", "labels"})->for_each_entry([&](std::string_view k, CompactView) {
    keys.emplace_back(k);
  });
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Compact, SharesRepeatedStringsButNotUniqueOnes) {
  StringInterner interner;
  for (int i = 0; i < 100; ++i) {
    core::Value v;
    v["metadata"]["name"] = "node-" + std::to_string(i);
    v["metadata"]["resourceVersion"] = std::to_string(1000 + i);
    v["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3";
    (void)CompactObject::encode(v, interner);
  }
  // metadata, name, resourceVersion, labels, the label key and its value; no per-node names.
  EXPECT_EQ(interner.size(), 6u);
}

TEST(Compact, InternerIsBoundedAndFallsBackToInline) {
  StringInterner interner(/*max_strings=*/4, /*max_bytes=*/1024);
  core::Value v;
  for (int i = 0; i < 20; ++i) v["k" + std::to_string(i)] = "v" + std::to_string(i);
  CompactPtr c = CompactObject::encode(v, interner);
  EXPECT_EQ(interner.size(), 4u);
  EXPECT_EQ(c->to_value(), v);
  EXPECT_EQ(interner.intern(std::string(StringInterner::kMaxLength + 1, 'x')),
            StringInterner::kNone);
}

TEST(Compact, ConcurrentEncodersShareOneInterner) {
  StringInterner interner;
  std::vector<std::thread> threads;
  std::vector<CompactPtr> out(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        core::Value v;
        v["metadata"]["labels"]["k" + std::to_string(i % 50)] = "v" + std::to_string((i + t) % 30);
        out[t] = CompactObject::encode(v, interner);
        EXPECT_EQ(out[t]->to_value(), v);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(interner.size(), 3u + 50u + 30u);
}

TEST(CompactStore, BehavesLikeAPlainStore) {
  Store plain;
  Store compact(StoreOptions{true});
  for (Store* s : {&plain, &compact}) {
    s->add_index(kNamespaceIndex, index_by_namespace);
    s->add_index(kNodeNameIndex, index_by_node_name);
    auto pod = [](std::string name, std::string node, std::string rv) {
      core::Value p;
      p["metadata"]["namespace"] = "ns";
      p["metadata"]["name"] = name;
      p["metadata"]["resourceVersion"] = rv;
      p["spec"]["nodeName"] = node;
      return std::make_shared<const core::Value>(std::move(p));
    };
    EXPECT_EQ(s->upsert(pod("a", "n1", "1")), nullptr);
    ObjectPtr old = s->upsert(pod("a", "n2", "2"));
    ASSERT_NE(old, nullptr);
    EXPECT_EQ(old->get_string({"spec", "nodeName"}), "n1");
    EXPECT_EQ(s->by_index(kNodeNameIndex, "n1").size(), 0u);
    EXPECT_EQ(s->by_index(kNodeNameIndex, "n2").size(), 1u);
    EXPECT_EQ(s->get("ns/a")->get_string({"spec", "nodeName"}), "n2");
    EXPECT_EQ(s->get_compact("ns/a")->root().get_string({"spec", "nodeName"}), "n2");

    Store::CompactReplaceResult r = s->replace_compact(
        {CompactObject::encode(*pod("a", "n2", "2")), CompactObject::encode(*pod("b", "n3", "5"))});
    ASSERT_EQ(r.changed.size(), 1u);  // a is unchanged (same resourceVersion)
    EXPECT_EQ(r.changed[0].first, nullptr);
    EXPECT_EQ(r.changed[0].second->name(), "b");
    EXPECT_EQ(s->size(), 2u);
    EXPECT_EQ(s->by_index_compact(kNodeNameIndex, "n3").size(), 1u);

    Store::ReplaceResult r2 = s->replace({pod("b", "n4", "6")});
    ASSERT_EQ(r2.removed.size(), 1u);
    EXPECT_EQ(name_of(*r2.removed[0]), "a");
    ASSERT_EQ(r2.changed.size(), 1u);
    EXPECT_EQ(r2.changed[0].first->get_string({"spec", "nodeName"}), "n3");
    EXPECT_EQ(s->index_values(kNodeNameIndex), (std::vector<std::string>{"n4"}));
    int seen = 0;
    s->for_each_compact([&](const CompactObject& o) { seen += o.name() == "b" ? 1 : 0; });
    EXPECT_EQ(seen, 1);
    EXPECT_EQ(s->erase_compact("ns/b")->name(), "b");
    EXPECT_EQ(s->erase("ns/b"), nullptr);
    EXPECT_EQ(s->size(), 0u);
  }
}

TEST(CompactStore, ConcurrentReadersAndWriters) {
  Store s(StoreOptions{true});
  s.add_index(kNamespaceIndex, index_by_namespace);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      for (const auto& o : s.list_compact()) (void)o->root().get_string({"data", "v"});
      for (const auto& o : s.by_index(kNamespaceIndex, "ns")) (void)name_of(*o);
    }
  });
  for (int i = 0; i < 300; ++i) {
    core::Value v;
    v["metadata"]["namespace"] = "ns";
    v["metadata"]["name"] = "o" + std::to_string(i % 20);
    v["metadata"]["resourceVersion"] = std::to_string(i);
    v["data"]["v"] = std::to_string(i);
    s.upsert_compact(CompactObject::encode(v));
  }
  done = true;
  reader.join();
  EXPECT_EQ(s.size(), 20u);
}

}  // namespace
}  // namespace gpufleet::kube
