#include "core/value.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::core {
namespace {

TEST(Value, KindsAndAccessors) {
  EXPECT_TRUE(Value().is_null());
  EXPECT_EQ(Value(3).as_int(), 3);
  EXPECT_EQ(Value(3u).as_uint(), 3u);
  EXPECT_DOUBLE_EQ(Value(3).as_double(), 3.0);
  EXPECT_EQ(Value("x").as_string(), "x");
  EXPECT_EQ(Value(Bytes{"\x01"}).as_bytes().data, "\x01");
  EXPECT_THROW((void)Value("x").as_int(), TypeError);
  try {
    (void)Value(1).as_map();
    FAIL();
  } catch (const TypeError& e) {
    EXPECT_STREQ(e.what(), "expected a map but found a int");
  }
}

TEST(Value, EqualityIsStructuralAndKindExact) {
  EXPECT_EQ(Value(1), Value(1));
  EXPECT_NE(Value(1), Value(1u));
  EXPECT_NE(Value(1), Value(1.0));
  Value a;
  a["x"]["y"] = 1;
  Value b;
  b["x"]["y"] = 1;
  EXPECT_EQ(a, b);
  b["x"]["z"] = 2;
  EXPECT_NE(a, b);
}

TEST(Map, StaysSortedAndFindsBothWays) {
  Map m;
  for (int i = 20; i > 0; --i) m.set("k" + std::to_string(i), i);
  std::string prev;
  for (const auto& e : m) {
    EXPECT_LT(prev, e.key);
    prev = e.key;
  }
  ASSERT_NE(m.find("k7"), nullptr);
  EXPECT_EQ(m.find("k7")->as_int(), 7);
  EXPECT_EQ(m.find("nope"), nullptr);
  EXPECT_TRUE(m.erase("k7"));
  EXPECT_FALSE(m.erase("k7"));
  EXPECT_EQ(m.size(), 19u);
}

TEST(Map, SealReportsDuplicatesAndKeepsTheLast) {
  Map m;
  m.append_unsorted("b", 1);
  m.append_unsorted("a", 2);
  m.append_unsorted("b", 3);
  auto dup = m.seal();
  ASSERT_TRUE(dup.has_value());
  EXPECT_EQ(*dup, "b");
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.find("b")->as_int(), 3);
  EXPECT_EQ(m.begin()->key, "a");
}

TEST(Value, PathHelpers) {
  Value v;
  v["metadata"]["name"] = "node-1";
  v["metadata"]["labels"]["zone"] = "a";
  EXPECT_EQ(v.get_string({"metadata", "name"}), "node-1");
  EXPECT_EQ(v.get_string({"metadata", "missing"}, "fallback"), "fallback");
  EXPECT_EQ(v.get({"metadata", "labels", "zone"})->as_string(), "a");
  EXPECT_EQ(v.get({"metadata", "name", "deeper"}), nullptr);
  Value l;
  l.push_back(1);
  l.push_back("two");
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].as_string(), "two");
  EXPECT_THROW((void)l[2], TypeError);
}

}  // namespace
}  // namespace gpufleet::core
