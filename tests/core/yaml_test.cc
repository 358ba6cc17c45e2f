#include "core/yaml.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::core {
namespace {

TEST(Yaml, CoreSchemaResolution) {
  Value v = parse_yaml(R"(
a: 1
b: -0x10
c: 0o17
d: 1.5e3
e: true
f: ~
g: "1"
h: '007'
i: hello world
j: .inf
k: 9223372036854775808
l: v1.2.3
m: 1.32
)");
  EXPECT_EQ(v.find("a")->as_int(), 1);
  EXPECT_EQ(v.find("b")->as_string(), "-0x10");  // sign is not allowed on hex in YAML 1.2
  EXPECT_EQ(v.find("c")->as_int(), 15);
  EXPECT_DOUBLE_EQ(v.find("d")->as_double(), 1500.0);
  EXPECT_TRUE(v.find("e")->as_bool());
  EXPECT_TRUE(v.find("f")->is_null());
  EXPECT_EQ(v.find("g")->as_string(), "1");
  EXPECT_EQ(v.find("h")->as_string(), "007");
  EXPECT_EQ(v.find("i")->as_string(), "hello world");
  EXPECT_TRUE(std::isinf(v.find("j")->as_double()));
  EXPECT_EQ(v.find("k")->as_uint(), 9223372036854775808ull);
  EXPECT_EQ(v.find("l")->as_string(), "v1.2.3");
  EXPECT_TRUE(v.find("m")->is_double());
}

TEST(Yaml, NestedStructuresAndAnchors) {
  Value v = parse_yaml(R"(
base: &b {x: 1, y: [a, b]}
copy: *b
list:
  - name: one
  - name: two
)");
  EXPECT_EQ(v.find("copy")->find("x")->as_int(), 1);
  EXPECT_EQ(*v.find("copy"), *v.find("base"));
  EXPECT_EQ(v.find("list")->as_list()[1].get_string({"name"}), "two");
}

TEST(Yaml, MultipleDocuments) {
  auto docs = parse_yaml_documents("a: 1\n---\nb: 2\n---\n");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_TRUE(docs[2].is_null());
  EXPECT_THROW(parse_yaml("a: 1\n---\nb: 2\n"), ParseError);
  EXPECT_TRUE(parse_yaml("").is_null());
}

TEST(Yaml, ErrorsCarryLineAndColumn) {
  try {
    parse_yaml("a: 1\nb: [1, 2\nc: 3\n", "recipe.yaml");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.source(), "recipe.yaml");
    EXPECT_GT(e.line(), 1u);
  }
  try {
    parse_yaml("a: 1\nb: 2\na: 3\n", "dup.yaml");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.column(), 1u);
    EXPECT_NE(std::string(e.what()).find("duplicate key \"a\""), std::string::npos);
  }
  EXPECT_THROW(parse_yaml("x: !!int abc\n"), ParseError);
}

TEST(Yaml, EmitsAndReadsBack) {
  Value v;
  v["apiVersion"] = "v1";
  v["kind"] = "ConfigMap";
  v["data"]["count"] = "3";    // must stay a string
  v["data"]["flag"] = "true";  // must stay a string
  v["data"]["script"] = "line1\nline2\n";
  v["data"]["empty"] = "";
  v["spec"]["n"] = 3;
  v["spec"]["d"] = 2.0;
  v["spec"]["none"] = Value();
  v["spec"]["list"] = Value::list();
  v["spec"]["items"].push_back(Value::map());
  v["spec"]["items"].push_back("x: y");
  v["spec"]["bin"] = Bytes{std::string("\x00\x01", 2)};
  std::string text = to_yaml(v);
  EXPECT_EQ(parse_yaml(text), v) << text;
  EXPECT_EQ(to_yaml(parse_yaml(text)), text);
  EXPECT_EQ(text.rfind("apiVersion: v1\n", 0), 0u) << text;
}

TEST(Yaml, DocumentsRoundTrip) {
  std::vector<Value> docs{parse_json(R"({"a":1})"), parse_json(R"({"b":[1,2]})")};
  EXPECT_EQ(parse_yaml_documents(to_yaml_documents(docs)), docs);
}

}  // namespace
}  // namespace gpufleet::core
