// decode_compact_protobuf: the Kubernetes protobuf wire format straight into the compact tape
// must give the very tape the JSON path gives for the same object. The fixtures in
// testdata/served/ were fetched from a real kube-apiserver twice, as JSON and as protobuf
// (testdata/capture-protobuf.sh), so the two forms are the server's own encodings of one
// object. Hostile input (wrong magic, truncation, huge lengths, wrong wire types, random
// mutations) must end in a ParseError, never a crash.
#include "kube/api/compact_protobuf.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "core/errors.h"
#include "core/json.h"
#include "kube/api/trim.h"
#include "kube/errors.h"
#include "kube/watch_decoder.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

std::string served(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/served/" + name,
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

ProtobufKind kind(std::string_view name) {
  std::optional<ProtobufKind> k = ProtobufKind::find(name);
  EXPECT_TRUE(k.has_value()) << name;
  return *k;
}

// A decode shape owning its trees.
struct Shape {
  core::JsonPrune prune;
  core::JsonPrune keep;
  bool project = false;
  Shape(const std::vector<std::string>& prune_paths, const std::vector<std::string>* keep_paths) {
    for (const auto& p : prune_paths) prune.add(p);
    if (keep_paths != nullptr) {
      keep = projection_tree(*keep_paths);
      project = true;
    }
  }
  [[nodiscard]] CompactDecodeShape get() const { return {&prune, project ? &keep : nullptr}; }
};

// The whole object (GET) both ways, under one shape: the same bytes.
void expect_same_object(const std::string& name, std::string_view kind_name,
                        const std::vector<std::string>& prune,
                        const std::vector<std::string>* keep) {
  StringInterner interner;
  Shape shape(prune, keep);
  std::string json = served(name + ".json");
  std::string pb = served(name + ".pb");
  CompactPtr from_json = decode_compact_json(json, shape.get(), "json", interner);
  ProtobufEnvelope env = unwrap_protobuf(pb, "pb");
  EXPECT_EQ(env.kind, kind_name);
  EXPECT_EQ(env.api_version, "v1");
  CompactPtr from_pb =
      decode_compact_protobuf(env.raw, kind(kind_name), shape.get(), &env, "pb", interner);
  EXPECT_EQ(from_pb->to_value(), from_json->to_value())
      << core::to_json(from_pb->to_value()) << "\n"
      << core::to_json(from_json->to_value());
  EXPECT_EQ(from_pb->tape(), from_json->tape());
}

TEST(CompactProtobuf, ServedNodeGivesTheJsonTape) {
  expect_same_object("node", "Node", {}, nullptr);
  expect_same_object("node", "Node", node_prune_paths(), nullptr);
  std::vector<std::string> health = node_health_fields();
  expect_same_object("node", "Node", node_prune_paths(), &health);
  std::vector<std::string> mixed{
      "metadata.labels",   "metadata.creationTimestamp",     "status.capacity",
      "status.conditions", "status.nodeInfo.kubeletVersion", "spec"};
  expect_same_object("node", "Node", {"status.conditions.message"}, &mixed);
  // Scalars where the projection wants maps are dropped both ways.
  std::vector<std::string> odd{"metadata.name.x", "status.capacity.cpu.y", "spec.taints.key"};
  expect_same_object("node", "Node", {}, &odd);
}

TEST(CompactProtobuf, ServedPodGivesTheJsonTape) {
  expect_same_object("pod", "Pod", {}, nullptr);
  expect_same_object("pod", "Pod", {"metadata.managedFields"}, nullptr);
  // managedFields carry JSON inside protobuf (FieldsV1): pruned inside, too.
  expect_same_object("pod", "Pod", {"metadata.managedFields.fieldsV1.f:spec"}, nullptr);
  std::vector<std::string> keep{
      "spec.containers.resources",      "spec.containers.ports", "status.phase",
      "status.containerStatuses.state", "metadata.labels",       "metadata.ownerReferences"};
  expect_same_object("pod", "Pod", {}, &keep);
}

TEST(CompactProtobuf, ServedStatusBecomesItsJson) {
  std::string pb = served("status-404.pb");
  std::string json = protobuf_status_json(pb);
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(core::parse_json(json), core::parse_json(served("status-404.json")));
  ApiError e = decode_status_error(404, pb, RequestInfo{"get", "nodes", "", "no-such-node"});
  EXPECT_TRUE(e.is(Reason::NotFound));
  EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  EXPECT_EQ(protobuf_status_json(served("status-404.json")), "");
}

// The list both ways, fed in chunks of several sizes: the same items, version and token.
TEST(CompactProtobuf, ServedListSplitsIntoTheJsonItems) {
  StringInterner interner;
  Shape shape(node_prune_paths(), nullptr);
  std::vector<std::string> json_tapes;
  ListItemSplitter json_split([&](std::string_view item) {
    json_tapes.emplace_back(decode_compact_json(item, shape.get(), "json", interner)->tape());
  });
  json_split.feed(served("node-list.json"));
  json_split.finish();
  core::Value env = core::parse_json(json_split.envelope());
  ASSERT_FALSE(json_tapes.empty());
  std::string pb = served("node-list.pb");
  for (std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, pb.size()}) {
    std::vector<std::string> pb_tapes;
    ProtobufListSplitter split([&](std::string_view item) {
      pb_tapes.emplace_back(
          decode_compact_protobuf(item, kind("Node"), shape.get(), nullptr, "pb", interner)
              ->tape());
    });
    for (std::size_t i = 0; i < pb.size(); i += chunk) {
      split.feed(std::string_view(pb).substr(i, chunk));
    }
    split.finish();
    EXPECT_EQ(pb_tapes, json_tapes) << "chunk " << chunk;
    EXPECT_EQ(split.items(), json_tapes.size());
    EXPECT_EQ(split.resource_version(), env.get_string({"metadata", "resourceVersion"}));
    EXPECT_FALSE(split.resource_version().empty());
    EXPECT_EQ(split.continue_token(), "");
  }
}

TEST(CompactProtobuf, ServedWatchFramesGiveTheJsonEvents) {
  StringInterner interner;
  Shape shape({"metadata.managedFields"}, nullptr);
  std::istringstream lines(served("pod-watch.json"));
  std::vector<std::pair<std::string, std::string>> json_events;
  for (std::string line; std::getline(lines, line);) {
    std::string type;
    CompactPtr obj = decode_compact_watch_event(line, shape.get(), type, interner);
    json_events.emplace_back(type, std::string(obj->tape()));
  }
  ASSERT_FALSE(json_events.empty());
  ProtobufFrameSplitter frames;
  std::string pb = served("pod-watch.pb");
  std::vector<std::pair<std::string, std::string>> pb_events;
  for (std::size_t i = 0; i < pb.size(); i += 100) {
    frames.feed(std::string_view(pb).substr(i, 100));
    while (auto frame = frames.next_frame()) {
      std::string type;
      std::string status;
      CompactPtr obj = decode_compact_protobuf_watch_event(*frame, kind("Pod"), shape.get(), type,
                                                           status, interner);
      ASSERT_TRUE(obj);
      EXPECT_EQ(status, "");
      pb_events.emplace_back(type, std::string(obj->tape()));
    }
  }
  EXPECT_EQ(frames.pending(), 0U);
  EXPECT_EQ(pb_events, json_events);
}

TEST(CompactProtobuf, KindsAreBuiltInsOnly) {
  EXPECT_TRUE(ProtobufKind::for_resource("", "v1", "nodes"));
  EXPECT_EQ(ProtobufKind::for_resource("", "v1", "pods")->name(), "Pod");
  EXPECT_FALSE(ProtobufKind::for_resource("", "v1", "configmaps"));
  EXPECT_FALSE(ProtobufKind::for_resource("gpufleet.io", "v1", "nodes"));
  EXPECT_FALSE(ProtobufKind::find("GpuNode"));
}

// ---- hostile input ----

std::string varint(std::uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}

std::string field(int number, std::string_view bytes) {
  return varint((static_cast<std::uint64_t>(number) << 3) | 2) + varint(bytes.size()) +
         std::string(bytes);
}

std::string envelope(std::string_view kind_name, std::string_view raw) {
  return std::string(kProtobufMagic) + field(1, field(1, "v1") + field(2, kind_name)) +
         field(2, raw);
}

template <class F>
std::string parse_error_of(F&& f) {
  try {
    f();
  } catch (const core::ParseError& e) {
    return e.what();
  }
  return "no error";
}

TEST(CompactProtobuf, WrongMagicIsRefused) {
  std::string pb = served("node.pb");
  pb[3] = '\1';
  EXPECT_NE(parse_error_of([&] { unwrap_protobuf(pb, "node"); }).find("k8s\\0"), std::string::npos);
  ProtobufListSplitter split([](std::string_view) {});
  EXPECT_THROW(split.feed("{\"kind\":\"NodeList\"}"), core::ParseError);
  ProtobufListSplitter empty([](std::string_view) {});
  EXPECT_THROW(empty.finish(), core::ParseError);
}

TEST(CompactProtobuf, TruncatedInputIsAParseError) {
  ProtobufEnvelope env;
  std::string pb = served("node.pb");
  env = unwrap_protobuf(pb, "node");
  std::string raw(env.raw);
  // Every prefix: either a valid shorter message (cut between fields) or a ParseError.
  for (std::size_t n = 0; n < raw.size(); n += 3) {
    try {
      decode_compact_protobuf(std::string_view(raw).substr(0, n), kind("Node"));
    } catch (const core::ParseError&) {
    }
  }
  // A list body cut anywhere never finishes cleanly.
  std::string list = served("node-list.pb");
  for (std::size_t n = 0; n < list.size(); n += 97) {
    ProtobufListSplitter split(
        [&](std::string_view item) { decode_compact_protobuf(item, kind("Node")); });
    split.feed(std::string_view(list).substr(0, n));
    EXPECT_THROW(split.finish(), core::ParseError) << n;
  }
  // A watch frame cut short is not handed out.
  ProtobufFrameSplitter frames;
  frames.feed(std::string("\0\0\1\0abc", 7));
  EXPECT_FALSE(frames.next_frame());
  EXPECT_EQ(frames.pending(), 7U);
}

TEST(CompactProtobuf, HugeLengthsAreRefused) {
  ProtobufFrameSplitter frames;
  frames.feed(std::string("\x7f\xff\xff\xff", 4));
  EXPECT_NE(parse_error_of([&] { frames.next_frame(); }).find("over the limit"), std::string::npos);
  // A string claiming 2 GiB inside a 10-byte message.
  std::string node = field(1, varint((1 << 3) | 2) + varint(std::uint64_t{1} << 31) + "x");
  EXPECT_THROW(decode_compact_protobuf(node, kind("Node")), core::ParseError);
  // A list item over the item limit.
  ProtobufListSplitter split([](std::string_view) {});
  std::string list = std::string(kProtobufMagic) + varint((2 << 3) | 2) + varint(1 << 30) +
                     varint((2 << 3) | 2) + varint(std::uint64_t{1} << 29);
  EXPECT_NE(parse_error_of([&] { split.feed(list); }).find("list item"), std::string::npos);
}

TEST(CompactProtobuf, WrongWireTypesNameTheField) {
  // metadata (field 1 of Node) as a varint.
  std::string msg = parse_error_of([&] { decode_compact_protobuf("\x08\x01", kind("Node")); });
  EXPECT_NE(msg.find("\"metadata\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected length-delimited"), std::string::npos) << msg;
  // metadata.name (a string) as a 64-bit value.
  msg = parse_error_of([&] {
    decode_compact_protobuf(field(1, std::string("\x09", 1) + std::string(8, 'a')), kind("Node"));
  });
  EXPECT_NE(msg.find("\"name\""), std::string::npos) << msg;
  // An event frame that is not a WatchEvent.
  std::string type;
  std::string status;
  EXPECT_THROW(decode_compact_protobuf_watch_event("\x18\x01", kind("Node"), {}, type, status),
               core::ParseError);
  // A watch of Nodes that sends a Pod.
  std::string frame = field(1, "ADDED") + field(2, field(1, envelope("Pod", "")));
  msg = parse_error_of(
      [&] { decode_compact_protobuf_watch_event(frame, kind("Node"), {}, type, status); });
  EXPECT_NE(msg.find("sent a Pod"), std::string::npos) << msg;
  // A compressed envelope.
  std::string gz = std::string(kProtobufMagic) + field(2, "") + field(3, "gzip");
  EXPECT_NE(parse_error_of([&] { unwrap_protobuf(gz, "x"); }).find("gzip"), std::string::npos);
}

TEST(CompactProtobuf, UnknownFieldsAreRefusedOnlyWhereKept) {
  // NodeSpec gets a field 99 this build does not know.
  std::string node = field(1, field(1, "n1")) + field(2, field(99, "new"));
  EXPECT_THROW(decode_compact_protobuf(node, kind("Node")), UnsupportedProtobuf);
  std::vector<std::string> health = node_health_fields();
  Shape projected({}, &health);
  CompactPtr c = decode_compact_protobuf(node, kind("Node"), projected.get());
  EXPECT_EQ(c->name(), "n1");
  // A projection naming a key the schema lacks may want the unknown field: refused.
  std::vector<std::string> wants_new{"metadata.name", "spec.newThing"};
  Shape unknown_key({}, &wants_new);
  EXPECT_THROW(decode_compact_protobuf(node, kind("Node"), unknown_key.get()), UnsupportedProtobuf);
}

TEST(CompactProtobuf, RandomMutationsNeverCrash) {
  std::mt19937 rng(15);
  for (const char* name : {"node.pb", "pod.pb"}) {
    std::string pb = served(name);
    std::string raw(unwrap_protobuf(pb, name).raw);
    ProtobufKind k = kind(std::string_view(name).substr(0, 3) == "nod" ? "Node" : "Pod");
    for (int round = 0; round < 1500; ++round) {
      std::string m = raw;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < flips; ++i) m[rng() % m.size()] = static_cast<char>(rng());
      try {
        decode_compact_protobuf(m, k);
      } catch (const core::ParseError&) {
      }
    }
  }
}

}  // namespace
}  // namespace gpufleet::kube
