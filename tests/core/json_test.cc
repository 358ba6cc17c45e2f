#include "core/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/errors.h"

namespace gpufleet::core {
namespace {

TEST(Json, ParsesEveryKind) {
  Value v = parse_json(R"({"n":null,"t":true,"i":-5,"u":18446744073709551615,"d":1.5,
                          "s":"a\"b\u00e9\n","l":[1,[2]],"m":{"k":"v"}})");
  EXPECT_TRUE(v.find("n")->is_null());
  EXPECT_TRUE(v.find("t")->as_bool());
  EXPECT_EQ(v.find("i")->as_int(), -5);
  EXPECT_EQ(v.find("u")->as_uint(), 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(v.find("d")->as_double(), 1.5);
  EXPECT_EQ(v.find("s")->as_string(), "a\"b\xc3\xa9\n");
  EXPECT_EQ(v.find("l")->as_list()[1].as_list()[0].as_int(), 2);
  EXPECT_EQ(v.get_string({"m", "k"}), "v");
}

TEST(Json, RoundTripsDeterministically) {
  std::string text = R"({"b":[1,2.5,"x",null,false],"a":{"z":1,"y":{}},"c":[]})";
  Value v = parse_json(text);
  std::string once = to_json(v);
  EXPECT_EQ(once, R"({"a":{"y":{},"z":1},"b":[1,2.5,"x",null,false],"c":[]})");
  EXPECT_EQ(to_json(parse_json(once)), once);
  EXPECT_EQ(parse_json(to_json(v, JsonStyle::Pretty)), v);
}

TEST(Json, DoublesStayDoubles) {
  EXPECT_EQ(to_json(Value(2.0)), "2.0");
  EXPECT_TRUE(parse_json(to_json(Value(2.0))).is_double());
  EXPECT_EQ(to_json(Value(1e300)), "1e+300");
  EXPECT_THROW(to_json(Value(std::numeric_limits<double>::quiet_NaN())), InvalidInput);
}

TEST(Json, EscapesControlCharacters) {
  EXPECT_EQ(to_json(Value(std::string("a\x01\t\\", 4))), R"("a\u0001\t\\")");
}

TEST(Json, BytesAreBase64) { EXPECT_EQ(to_json(Value(Bytes{"hi!"})), R"("aGkh")"); }

TEST(Json, ErrorsCarryLineAndColumn) {
  try {
    parse_json("{\n  \"a\": 1,\n  \"b\": tru\n}", "node.json");
    FAIL() << "expected a parse error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.source(), "node.json");
    EXPECT_EQ(e.line(), 3u);
    EXPECT_GT(e.column(), 0u);
    EXPECT_NE(std::string(e.what()).find("node.json:3:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_json(""), ParseError);
  EXPECT_THROW(parse_json("[1,2"), ParseError);
  EXPECT_THROW(parse_json("{\"a\":1,}"), ParseError);
  EXPECT_THROW(parse_json("\"unterminated"), ParseError);
}

TEST(Json, DuplicateKeysAreErrors) {
  try {
    parse_json(R"({"a":1,"a":2})");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key \"a\""), std::string::npos);
  }
}

TEST(Json, PruneDropsFieldsWhileDecoding) {
  JsonPrune prune;
  prune.add("status.images").add("metadata.managedFields");
  Value v = parse_json(
      R"({"metadata":{"name":"n","managedFields":[{"x":1}]},"status":{"images":[{"names":["a"]}],"capacity":{"cpu":"4"}}})",
      "", &prune);
  EXPECT_EQ(v.find("metadata")->find("managedFields"), nullptr);
  EXPECT_EQ(v.find("status")->find("images"), nullptr);
  EXPECT_EQ(v.get_string({"status", "capacity", "cpu"}), "4");
  EXPECT_EQ(v.get_string({"metadata", "name"}), "n");
}

}  // namespace
}  // namespace gpufleet::core
