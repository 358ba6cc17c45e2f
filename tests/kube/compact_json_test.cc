// decode_compact_json: JSON text straight into the compact tape must give exactly what the
// old path gave (parse_json with pruning, Projection::apply, CompactObject::encode) for real
// objects (a GPU Node, a Pod, the simulator's H100 Node, watch events), for random documents,
// and refuse malformed input, oversized strings and deep nesting with a ParseError.
#include "kube/api/compact_json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "core/errors.h"
#include "core/json.h"
#include "kube/api/trim.h"
#include "kube/watch_decoder.h"
#include "sim/node_object.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

std::string read_testdata(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/" + name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The old path: a core::Value tree, pruned while parsing, projected, then encoded.
CompactPtr via_value(std::string_view text, const std::vector<std::string>& prune,
                     const std::vector<std::string>* keep, StringInterner& interner) {
  core::JsonPrune p;
  for (const auto& path : prune) p.add(path);
  core::Value v = core::parse_json(text, "test", &p);
  if (keep != nullptr) v = Projection(*keep).apply(std::move(v));
  return CompactObject::encode(v, interner);
}

CompactPtr direct(std::string_view text, const std::vector<std::string>& prune,
                  const std::vector<std::string>* keep, StringInterner& interner) {
  core::JsonPrune p;
  for (const auto& path : prune) p.add(path);
  core::JsonPrune k = keep != nullptr ? projection_tree(*keep) : core::JsonPrune();
  return decode_compact_json(text, {&p, keep != nullptr ? &k : nullptr}, "test", interner);
}

std::string tape_of(const CompactObject& c) {
  // The tape itself: to_json of the rebuilt value plus the size catch any difference that
  // matters to readers; equal sizes and values mean equal interning and layout.
  return core::to_json(c.to_value()) + "#" + std::to_string(c.tape_bytes());
}

void expect_same(std::string_view text, const std::vector<std::string>& prune,
                 const std::vector<std::string>* keep) {
  StringInterner interner;
  CompactPtr a = via_value(text, prune, keep, interner);
  CompactPtr b = direct(text, prune, keep, interner);
  ASSERT_EQ(a->tape_bytes(), b->tape_bytes());
  EXPECT_EQ(tape_of(*a), tape_of(*b));
  EXPECT_EQ(a->to_value(), b->to_value());
}

TEST(CompactJson, RealNodeMatchesTheValuePath) {
  std::string node = read_testdata("node-gpu.json");
  expect_same(node, {}, nullptr);
  expect_same(node, node_prune_paths(), nullptr);
  expect_same(node, node_prune_paths(), &node_cache_fields());
  expect_same(node, node_prune_paths(), &node_health_fields());
  StringInterner interner;
  CompactPtr c = direct(node, node_prune_paths(), nullptr, interner);
  EXPECT_EQ(c->name(), "gpu-node-a100-0042");
  EXPECT_FALSE(c->root().get({"status", "images"}).has_value());
  EXPECT_FALSE(c->root().get({"metadata", "managedFields"}).has_value());
}

TEST(CompactJson, PodMatchesTheValuePath) {
  std::string pod = read_testdata("pod-gpu.json");
  expect_same(pod, {}, nullptr);
  expect_same(pod, {"metadata.managedFields"}, nullptr);
  std::vector<std::string> keep{"metadata.name",
                                "metadata.namespace",
                                "metadata.labels",
                                "spec.nodeName",
                                "spec.containers.resources",
                                "status.phase",
                                "status.conditions.type",
                                "status.containerStatuses.ready"};
  expect_same(pod, {"metadata.managedFields"}, &keep);
  StringInterner interner;
  CompactPtr c = direct(pod, {}, nullptr, interner);
  // Unicode escapes (a surrogate pair among them) arrive as UTF-8.
  EXPECT_EQ(c->root().get_string({"metadata", "annotations", "gpufleet.io/owner"}),
            "Zo\xc3\xab M\xc3\xbcller \xe2\x80\x94 team \xf0\x9f\x9a\x80");
  EXPECT_EQ(c->root().get_string({"spec", "nodeName"}), "gpu-node-h100-0007");
}

TEST(CompactJson, SimulatorNodeMatchesTheValuePath) {
  sim::FleetSpec fleet = sim::load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  fleet.pools.resize(1);
  fleet.pools[0].count = 2;
  std::vector<sim::NodeIdentity> ids = sim::expand_fleet(fleet);
  ASSERT_FALSE(ids.empty());
  sim::NodeRuntime rt =
      sim::initial_runtime(fleet, ids[0], sim::boot_id_for(ids[0], 0), "2026-01-01T00:00:00Z");
  std::string text = core::to_json(sim::node_object(fleet, ids[0], rt, "2026-01-01T00:00:00Z"));
  expect_same(text, node_prune_paths(), nullptr);
  expect_same(text, node_prune_paths(), &node_cache_fields());
  expect_same(text, node_prune_paths(), &node_health_fields());
}

TEST(CompactJson, WatchEventsMatchTheValueDecoder) {
  std::istringstream lines(read_testdata("watch-configmaps.jsonl"));
  std::string line;
  RequestInfo req{"watch", "configmaps", "gpufleet", ""};
  int n = 0;
  core::JsonPrune object_prune;
  object_prune.add("metadata.managedFields");
  core::JsonPrune event_prune = watch_event_prune({"metadata.managedFields"});
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    std::string type;
    CompactPtr c;
    try {
      c = decode_compact_watch_event(line, {&object_prune, nullptr}, type);
    } catch (const core::ParseError&) {
      EXPECT_THROW(decode_watch_event(line, &event_prune, req), std::exception) << line;
      continue;
    }
    if (type == "ERROR") {
      EXPECT_THROW(decode_watch_event(line, &event_prune, req), ApiError);
      continue;
    }
    WatchEvent ev = decode_watch_event(line, &event_prune, req);
    EXPECT_EQ(type, watch_event_type_name(ev.type));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->to_value(), ev.object);
    ++n;
  }
  EXPECT_GE(n, 3);
}

TEST(CompactJson, ProjectionEdgeCases) {
  // A scalar where a map is expected is dropped from a map and null in a list; null members
  // and empty maps stay, as Projection::apply does.
  std::string text =
      R"({"a":{"b":1,"c":{"d":"x"}},"l":[{"b":2},3,null,{"z":1}],"n":null,"s":"str",
          "e":{"q":1},"w":{"k":[1,{"m":2}]}})";
  std::vector<std::string> keep{"a.b", "a.c.d", "l.b", "n.x", "s.x", "e.missing", "w"};
  expect_same(text, {}, &keep);
  expect_same(text, {}, nullptr);
  expect_same(text, {"a.c", "l.b"}, &keep);
  std::vector<std::string> none;
  expect_same(text, {}, &none);
  expect_same("[1,2,{\"a\":1}]", {}, &keep);
  expect_same("\"scalar\"", {}, &keep);
}

TEST(CompactJson, KeysAreSortedAndDuplicatesRefused) {
  StringInterner interner;
  CompactPtr c =
      decode_compact_json(R"({"z":1,"a":2,"\u00e9":3,"m":{"y":1,"b":2}})", {}, "t", interner);
  std::vector<std::string> keys;
  c->root().for_each_entry([&](std::string_view k, CompactView) { keys.emplace_back(k); });
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "m", "z", "\xc3\xa9"}));
  EXPECT_EQ(c->root().get({"m", "b"})->int_value(), 2);
  EXPECT_THROW(decode_compact_json(R"({"a":1,"b":2,"a":3})", {}, "t", interner), core::ParseError);
  try {
    decode_compact_json(R"({"x":{"k":1,"k":2}})", {}, "dup.json", interner);
    FAIL() << "duplicate key accepted";
  } catch (const core::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key \"k\""), std::string::npos) << e.what();
  }
}

TEST(CompactJson, MalformedInputIsAParseErrorWithAPosition) {
  StringInterner interner;
  for (std::string_view bad :
       {R"({"a":1,})", R"({"a":)", R"({"a":"unterminated)", R"({"a":tru})", "", "{\"a\":1}}",
        R"({"a":"\u12"})", R"({"a":"bad \x escape"})", "{\"a\":\"\xff\xfe\"}", R"([1,2)"}) {
    EXPECT_THROW(decode_compact_json(bad, {}, "bad.json", interner), core::ParseError) << bad;
  }
  try {
    decode_compact_json("{\n  \"a\": 1,\n  \"b\": ]\n}", {}, "bad.json", interner);
    FAIL();
  } catch (const core::ParseError& e) {
    EXPECT_EQ(e.source(), "bad.json");
    EXPECT_EQ(e.line(), 3u) << e.what();
  }
  std::string type;
  EXPECT_THROW(decode_compact_watch_event("[1]", {}, type, interner), core::ParseError);
  EXPECT_FALSE(decode_compact_watch_event(R"({"type":"ADDED"})", {}, type, interner));
  EXPECT_EQ(type, "ADDED");
}

TEST(CompactJson, HugeStringsAndDeepNestingAreBounded) {
  StringInterner interner;
  // A 3 MiB value and a 300-byte key: stored inline, never interned.
  std::string big(3 << 20, 'v');
  std::string long_key(300, 'k');
  std::string text = "{\"" + long_key + "\":\"" + big + "\",\"short\":\"s\"}";
  std::size_t before = interner.size();
  CompactPtr c = decode_compact_json(text, {}, "t", interner);
  EXPECT_EQ(c->root().get_string({long_key}), big);
  EXPECT_EQ(interner.size(), before + 2);  // "short" and "s"
  expect_same(text, {}, nullptr);
  core::InputLimits small;
  small.max_string_bytes = 1024;
  EXPECT_THROW(decode_compact_json(text, {}, "t", interner, small), core::ParseError);
  small.max_bytes = 100;
  EXPECT_THROW(decode_compact_json(text, {}, "t", interner, small), core::ParseError);
  core::InputLimits shallow;
  shallow.max_depth = 8;
  std::string deep(20, '[');
  deep += std::string(20, ']');
  EXPECT_THROW(decode_compact_json(deep, {}, "t", interner, shallow), core::ParseError);
  EXPECT_NO_THROW(decode_compact_json(deep, {}, "t", interner));
}

TEST(CompactJson, EmptyStringFirstIntoAFreshInterner) {
  StringInterner interner;
  CompactPtr c = decode_compact_json(R"("")", {}, "t", interner);
  EXPECT_EQ(c->root().string(), "");
  CompactPtr m = decode_compact_json(R"({"":""})", {}, "t", interner);
  EXPECT_EQ(m->root().get_string({""}, "absent"), "");
  EXPECT_EQ(interner.size(), 1u);
}

// Random documents: the two paths agree on every one.
core::Value random_value(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 4 ? 5 : 7);
  static const std::vector<std::string> keys{
      "a", "b", "name", "uid", "labels", "status", "type", "\xc3\xa9t\xc3\xa9", "x.y", "message"};
  switch (kind(rng)) {
    case 0: return core::Value();
    case 1: return core::Value(rng() % 2 == 0);
    case 2: return core::Value(static_cast<std::int64_t>(rng()) - (1LL << 31));
    case 3: return core::Value(static_cast<double>(rng() % 1000) / 8.0 + 0.5);
    case 4: return core::Value(keys[rng() % keys.size()] + std::to_string(rng() % 3));
    case 5: return core::Value(std::string(rng() % 400, 'q'));
    case 6: {
      core::List l;
      for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) {
        l.push_back(random_value(rng, depth + 1));
      }
      return core::Value(std::move(l));
    }
    default: {
      core::Value m = core::Value(core::Map{});
      for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i) {
        m[keys[rng() % keys.size()]] = random_value(rng, depth + 1);
      }
      return m;
    }
  }
}

TEST(CompactJson, RandomDocumentsMatchTheValuePath) {
  std::mt19937 rng(15);
  std::vector<std::string> keep{"a.b", "labels", "status.type", "name", "x.y.a"};
  for (int i = 0; i < 300; ++i) {
    std::string text = core::to_json(random_value(rng, 0));
    expect_same(text, {}, nullptr);
    expect_same(text, {"a.a", "status"}, nullptr);
    expect_same(text, {"labels.b"}, &keep);
  }
}

}  // namespace
}  // namespace gpufleet::kube
