#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace gpufleet::cel {
namespace {

using testing::compile_error;
using testing::eval;
using ::testing::HasSubstr;

TEST(CelParser, LiteralForms) {
  EXPECT_EQ(eval("0x1F").as_int(), 31);
  EXPECT_EQ(eval("42u").as_uint(), 42u);
  EXPECT_EQ(eval("0xFFu").as_uint(), 255u);
  EXPECT_DOUBLE_EQ(eval("1.5e3").as_double(), 1500.0);
  EXPECT_DOUBLE_EQ(eval(".5").as_double(), 0.5);
  EXPECT_EQ(eval("-9223372036854775808").as_int(), INT64_MIN);
  EXPECT_EQ(eval("r'a\\nb'").text(), "a\\nb");
  EXPECT_EQ(eval("'''x\ny'''").text(), "x\ny");
  EXPECT_EQ(eval("b'\\xff\\000'").text(), std::string("\xff\0", 2));
  EXPECT_EQ(eval("'\\u00e9\\U0001F600'").text(), "\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(eval("'\\303'").text(), "\xC3\x83");  // octal escapes are code points in strings
}

TEST(CelParser, PrecedenceAndAssociativity) {
  EXPECT_EQ(eval("1 + 2 * 3").as_int(), 7);
  EXPECT_EQ(eval("10 - 4 - 3").as_int(), 3);
  EXPECT_EQ(eval("100 / 10 / 5").as_int(), 2);
  EXPECT_TRUE(eval("true || false && false").as_bool());
  EXPECT_EQ(eval("false ? 1 : true ? 2 : 3").as_int(), 2);
  EXPECT_TRUE(eval("!false == true").as_bool());
  EXPECT_TRUE(eval("2 in [1, 2] == true").as_bool());
  EXPECT_EQ(eval("-[1, 2][1]").as_int(), -2);
  EXPECT_EQ(eval("-2 * 3").as_int(), -6);
  EXPECT_DOUBLE_EQ(eval("-1.5").as_double(), -1.5);
  EXPECT_TRUE(eval("--9223372036854775808").is_error());  // negating int min overflows
}

TEST(CelParser, ErrorsHavePositionAndCaret) {
  std::string msg = compile_error("1 +\n  (2 * )");
  EXPECT_THAT(msg, HasSubstr(":2:8:"));
  EXPECT_THAT(msg, HasSubstr("unexpected ')'"));
  EXPECT_THAT(msg, HasSubstr("  (2 * )\n       ^"));
}

TEST(CelParser, ErrorMessagesNameTheProblem) {
  EXPECT_THAT(compile_error("a = 1", Env().variable("a")), HasSubstr("use '=='"));
  EXPECT_THAT(compile_error("'abc"), HasSubstr("unterminated string"));
  EXPECT_THAT(compile_error("9223372036854775808"), HasSubstr("out of range"));
  EXPECT_THAT(compile_error("18446744073709551616u"), HasSubstr("out of range"));
  EXPECT_THAT(compile_error("'\\q'"), HasSubstr("invalid escape"));
  EXPECT_THAT(compile_error("b'\\u00ff'"), HasSubstr("not allowed in bytes"));
  EXPECT_THAT(compile_error("var"), HasSubstr("reserved word"));
  EXPECT_THAT(compile_error("[1, 2].all(x.y, true)"), HasSubstr("simple variable name"));
  EXPECT_THAT(compile_error("has(a)", Env().variable("a")),
              HasSubstr("has() needs a field selection"));
  EXPECT_THAT(compile_error("1 2"), HasSubstr("after the end of the expression"));
}

TEST(CelParser, DepthAndSizeLimits) {
  std::string deep(300, '(');
  deep += "1";
  deep += std::string(300, ')');
  EXPECT_THAT(compile_error(deep), HasSubstr("nested too deeply"));
  std::string chain = "1";
  for (int i = 0; i < 1000; ++i) chain += " + 1";
  EXPECT_THAT(compile_error(chain), HasSubstr("nested too deeply"));
  std::string big(200 * 1024, ' ');
  big += "1";
  EXPECT_THAT(compile_error(big), HasSubstr("over the limit"));
}

TEST(CelParser, ReservedWordsAreFieldNames) {
  EXPECT_EQ(eval("{'if': 1}.if").as_int(), 1);
  EXPECT_EQ(eval("{'a.b': 2}.`a.b`").as_int(), 2);
}

TEST(CelParser, Comments) { EXPECT_EQ(eval("1 + // one\n 2").as_int(), 3); }

}  // namespace
}  // namespace gpufleet::cel
