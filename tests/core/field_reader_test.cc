// The strict document reader and the text helpers it builds on.
#include "core/field_reader.h"

#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "core/text.h"
#include "core/yaml.h"
#include "core/yaml_path.h"

namespace gpufleet::core {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(Text, QuoteJoinTrim) {
  EXPECT_EQ(core::quoted("a\nb"), "\"a?b\"");
  EXPECT_EQ(core::quoted(std::string(100, 'x')), "\"" + std::string(80, 'x') + "...\"");
  EXPECT_EQ(join(std::vector<std::string>{"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(join(std::vector<std::string_view>{"a", "b"}, "|"), "a|b");
  EXPECT_EQ(join(std::vector<std::string>{}), "");
  EXPECT_EQ(trim(" \t x y \r\n"), "x y");
  EXPECT_EQ(trim(" \t"), "");
}

TEST(Text, SplitTrimmedKeepsEmptyFields) {
  EXPECT_THAT(core::split_trimmed(" 0, 00000000:5D:00.0 ,,GPU-1 \r"),
              ::testing::ElementsAre("0", "00000000:5D:00.0", "", "GPU-1"));
  EXPECT_THAT(core::split_trimmed(""), ::testing::ElementsAre(""));
  EXPECT_THAT(core::split_trimmed("a;b", ';'), ::testing::ElementsAre("a", "b"));
}

TEST(Text, GlobMatchIsFnmatch) {
  EXPECT_TRUE(glob_match("*nccl-test*", "ghcr.io/coreweave/nccl-tests:12.8"));
  EXPECT_TRUE(glob_match("NVIDIA-H100*", "NVIDIA-H100-80GB-HBM3"));
  EXPECT_TRUE(glob_match("h?00", "h100"));
  EXPECT_TRUE(glob_match("h[12]00", "h200"));
  EXPECT_FALSE(glob_match("busybox", "busybox:1.36"));
  EXPECT_TRUE(glob_match("*", ""));
}

TEST(Text, EditDistanceAndNearMisses) {
  EXPECT_EQ(edit_distance("gpuu", "gpu"), 1u);
  EXPECT_EQ(edit_distance("nmae", "name"), 1u);  // a swap counts once
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  const std::vector<std::string> keys = {"components", "constraints", "nodePools", "health"};
  EXPECT_EQ(did_you_mean("componets", keys), "components");
  EXPECT_EQ(did_you_mean("nodepools", keys), "nodePools");
  EXPECT_EQ(did_you_mean("helth", keys), "health");
  EXPECT_FALSE(did_you_mean("replicas", keys));
  EXPECT_FALSE(did_you_mean("health", keys));  // not a miss at all
}

TEST(LocateField, FindsKeysAndItemsInYamlAndJson) {
  const std::string yaml =
      "apiVersion: v1\n"
      "spec:\n"
      "  pools:\n"
      "  - name: a\n"
      "    gpu: {product: h100}\n"
      "  - name: b\n"
      "    gpuu: 1\n";
  EXPECT_EQ(locate_field(yaml, "spec").line, 2u);
  EXPECT_EQ(locate_field(yaml, "spec.pools[1].gpuu").line, 7u);
  EXPECT_EQ(locate_field(yaml, "spec.pools[1].gpuu").column, 5u);
  EXPECT_EQ(locate_field(yaml, "spec.pools[0].gpu.product").column, 11u);
  EXPECT_EQ(locate_field(yaml, "spec.pools[1]").line, 6u);
  EXPECT_EQ(locate_field(yaml, "spec.pools[2]").line, 0u);
  EXPECT_EQ(locate_field(yaml, "spec.nothing").line, 0u);
  EXPECT_EQ(locate_field(yaml, "spec.pools[b]").line, 0u);
  EXPECT_EQ(locate_field("a: [unclosed\nb: 1\n", "b").line, 0u);  // bad text: no position, no throw
  const std::string json = "{\n  \"spec\": {\n    \"x\": [1, {\"y\": 2}]\n  }\n}\n";
  EXPECT_EQ(locate_field(json, "spec.x[1].y").line, 3u);
  EXPECT_EQ(locate_field(json, "spec.x[1].y").column, 15u);
  // The second document of a stream.
  const std::string docs = "a: 1\n---\nb: 2\nc: 3\n";
  EXPECT_EQ(locate_field(docs, "c", 1).line, 4u);
  EXPECT_EQ(locate_field(docs, "c", 0).line, 0u);
}

TEST(FieldReader, UnknownKeyNamesPositionAndNearMiss) {
  const std::string text = "spec:\n  replicas: 2\n  imag: busybox\n";
  const Value doc = parse_yaml(text, "pod.yaml");
  auto read = [&] {
    FieldReader top(doc, "pod.yaml", "");
    FieldReader spec(*top.get("spec"), "pod.yaml", "spec");
    spec.integer("replicas", 1, 0, 10, "a count");
    spec.string("image", "");
    spec.done();
    top.done();
  };
  // Without a scope: the field, the suggestion and the accepted keys, no position.
  std::string e = error_of(read);
  EXPECT_THAT(e, HasSubstr("pod.yaml: spec.imag: is not a known field"));
  EXPECT_THAT(e, HasSubstr("did you mean \"image\"?"));
  EXPECT_THAT(e, HasSubstr("fields here: image, replicas"));
  {
    DocumentScope scope("pod.yaml", text);
    e = error_of(read);
  }
  EXPECT_THAT(e, HasSubstr("pod.yaml:3:3: spec.imag: is not a known field (did you mean"));
  // Other field errors carry the position too; another source's errors do not.
  {
    DocumentScope scope("pod.yaml", text);
    e = error_of([&] {
      FieldReader spec(*doc.find("spec"), "pod.yaml", "spec");
      spec.integer("replicas", 1, 5, 10, "at least 5");
    });
    EXPECT_THAT(e, HasSubstr("pod.yaml:2:3: spec.replicas: value 2 is out of range"));
    e = error_of([&] { fail_field("other.yaml", "spec.replicas", "is wrong", ""); });
    EXPECT_EQ(e, "other.yaml: spec.replicas: is wrong");
  }
}

TEST(FieldReader, MissingRequiredKeyNamesItsMisspellingOrItsMap) {
  const std::string typo = "kind: X\nspec:\n  nmae: a\n";
  const Value typo_doc = parse_yaml(typo);
  const std::string missing = "kind: X\nspec:\n  other: 1\n";
  const Value missing_doc = parse_yaml(missing);
  auto read = [](const Value& doc) {
    return error_of([&] {
      FieldReader spec(*doc.find("spec"), "d.yaml", "spec");
      spec.required_string("name", "a name");
    });
  };
  {
    DocumentScope scope("d.yaml", typo);
    EXPECT_EQ(read(typo_doc),
              "d.yaml:3:3: spec.nmae: is not a known field (did you mean \"name\"?)");
  }
  {
    DocumentScope scope("d.yaml", missing);  // no position of its own: the map's
    EXPECT_EQ(read(missing_doc), "d.yaml:2:1: spec.name: is required (a name)");
  }
}

TEST(CheckKeys, RejectsUnknownKeysWithSuggestion) {
  const std::string text = "kind: Thing\nmetdata: {}\n";
  const Value doc = parse_yaml(text);
  DocumentScope scope("thing.yaml", text);
  const std::string e = error_of([&] {
    check_keys(doc.as_map(), {"kind", "metadata", "spec"}, "thing.yaml", "");
  });
  EXPECT_EQ(e,
            "thing.yaml:2:1: metdata: is not a known field (did you mean \"metadata\"? fields "
            "here: kind, metadata, spec)");
  EXPECT_EQ(error_of([&] {
              check_keys(doc.as_map(), {"kind", "metdata"}, "thing.yaml", "");
            }),
            "no error");
}

}  // namespace
}  // namespace gpufleet::core
