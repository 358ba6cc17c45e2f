#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace gpufleet::cel {
namespace {

using testing::compile_error;
using ::testing::HasSubstr;

TEST(CelChecker, UnknownNamesFailAtCompileTime) {
  Env env;
  env.variable("event").variable("node", "map(string, dyn)");
  EXPECT_THAT(compile_error("evnt.isFatal", env),
              HasSubstr("undeclared reference to 'evnt.isFatal'; declared variables: event node"));
  EXPECT_THAT(compile_error("event.message.startWith('x')", env),
              HasSubstr("undeclared reference to function 'startWith'"));
  EXPECT_THAT(compile_error("nosuch(1)", env),
              HasSubstr("undeclared reference to function 'nosuch'"));
}

TEST(CelChecker, StaticOverloadMismatch) {
  Env env;
  env.variable("value", "int").variable("name", "string");
  EXPECT_THAT(compile_error("value + name", env),
              HasSubstr("found no matching overload for '_+_' applied to (int, string)"));
  EXPECT_THAT(compile_error("name.startsWith(1)", env),
              HasSubstr("no matching overload for 'startsWith' applied to string.(int)"));
  EXPECT_THAT(compile_error("value && true", env), HasSubstr("'_&&_' applied to (int, bool)"));
  EXPECT_THAT(compile_error("value.field", env), HasSubstr("type 'int' has no field 'field'"));
  EXPECT_THAT(compile_error("size(value)", env), HasSubstr("no matching overload for 'size'"));
  EXPECT_THAT(compile_error("'a'.matches('(')", env), HasSubstr("invalid regular expression"));
  // dyn defers the decision to evaluation.
  EXPECT_EQ(compile_error("dyn(value) + name", env), "");
}

TEST(CelChecker, ResultTypes) {
  Env env;
  env.variable("value", "int")
      .variable("labels", "map(string, string)")
      .variable("xs", "list(int)");
  EXPECT_EQ(compile("value >= 300", env).result_type(), "bool");
  EXPECT_EQ(compile("labels['a']", env).result_type(), "string");
  EXPECT_EQ(compile("xs.map(x, x * 2)", env).result_type(), "list(int)");
  EXPECT_EQ(compile("xs[0] + 1", env).result_type(), "int");
  EXPECT_EQ(compile("[1, 'a']", env).result_type(), "list(dyn)");
  EXPECT_EQ(compile("timestamp('2024-01-01T00:00:00Z') - duration('1h')", env).result_type(),
            "google.protobuf.Timestamp");
}

TEST(CelChecker, ContainerResolution) {
  Env env;
  env.container("com.example").variable("com.example.y", "int").variable("y", "string");
  Activation act;
  act.bind("com.example.y", Val::integer(7)).bind("y", Val::string_view("root"));
  EXPECT_EQ(compile("y", env).evaluate(act).as_int(), 7);
  EXPECT_EQ(compile(".y", env).evaluate(act).text(), "root");
  EXPECT_TRUE(compile("[1].exists(y, y == 1)", env).evaluate_bool(act));
}

TEST(CelChecker, ConstantFolding) {
  Env env;
  env.variable("code", "string");
  // A constant list literal is built once at compile time; evaluation reads it.
  Program p = compile("code in ['79', '48', '94']", env);
  Activation act;
  act.bind("code", Val::string_view("48"));
  EXPECT_TRUE(p.evaluate_bool(act));
  EXPECT_EQ(compile("1 / 0 == 1 || true", env).evaluate(act).as_bool(), true);
}

TEST(CelChecker, TypeParsing) {
  EXPECT_EQ(type_to_string(parse_type("map(string, list(int))")), "map(string, list(int))");
  EXPECT_THROW(parse_type("lst(int)"), core::InvalidInput);
  EXPECT_THROW(parse_type("map(string"), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::cel

namespace gpufleet::cel {
namespace {

TEST(CelChecker, ErrorPointsAtTheName) {
  Env env;
  env.variable("event");
  try {
    (void)compile("event.isFatal &&\n  evnt.code == 1", env);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.line(), 2u);
    EXPECT_EQ(e.column(), 3u);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("  evnt.code == 1\n  ^"));
  }
}

TEST(CelChecker, ManyBindings) {
  Env env;
  std::string expr = "v0";
  for (int i = 0; i < 12; ++i) {
    env.variable("v" + std::to_string(i), "int");
    if (i > 0) expr += " + v" + std::to_string(i);
  }
  Program p = compile(expr, env);
  Activation act;
  for (int i = 0; i < 12; ++i) act.bind("v" + std::to_string(i), Val::integer(i));
  act.bind("v3", Val::integer(100));  // rebinding replaces
  EXPECT_EQ(p.evaluate(act).as_int(), 66 - 3 + 100);
}

}  // namespace
}  // namespace gpufleet::cel
