#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"
#include "test_util.h"

namespace gpufleet::cel {
namespace {

using testing::eval;
using ::testing::HasSubstr;

const char* kNode = R"({
  "metadata": {"name": "gpu-node-1",
               "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "zone": "a"}},
  "status": {"capacity": {"nvidia.com/gpu": "8"},
             "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}
})";

TEST(CelEval, WalksCoreValuesInPlace) {
  core::Value node = core::parse_json(kNode);
  core::Value event = core::parse_json(R"({"isFatal": true, "errorCode": "79"})");
  Env env;
  env.variable("node", "map(string, dyn)").variable("event", "dyn");
  Program p = compile(
      "event.isFatal && event.errorCode in ['79', '48', '94'] && "
      "node.metadata.labels['nvidia.com/gpu.product'].startsWith('NVIDIA-H100')",
      env);
  Activation act;
  act.bind("node", node).bind("event", event);
  EXPECT_TRUE(p.evaluate_bool(act));
  // The result borrows bound strings rather than copying them.
  Program name = compile("node.metadata.name", env);
  Val v = name.evaluate(act);
  EXPECT_EQ(v.text().data(), node.get({"metadata", "name"})->if_string()->data());
  event["errorCode"] = "13";
  EXPECT_FALSE(p.evaluate_bool(act));
}

TEST(CelEval, MacrosOverBoundData) {
  core::Value node = core::parse_json(kNode);
  Env env;
  env.variable("node");
  Activation act;
  act.bind("node", node);
  EXPECT_TRUE(
      compile("node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')", env)
          .evaluate_bool(act));
  EXPECT_EQ(compile("node.status.conditions.map(c, c.type)", env).evaluate(act).to_value(),
            core::parse_json(R"(["Ready", "DiskPressure"])"));
  EXPECT_EQ(compile("node.status.conditions.filter(c, c.status == 'False').size()", env)
                .evaluate(act)
                .as_int(),
            1);
  EXPECT_TRUE(compile("node.metadata.labels.all(k, k.size() > 0)", env).evaluate_bool(act));
  EXPECT_TRUE(compile("has(node.metadata.labels.zone) && !has(node.metadata.annotations)", env)
                  .evaluate_bool(act));
  EXPECT_EQ(compile("[1, 2, 3].map(x, x > 1, x * 10)", env).evaluate(act).to_value(),
            core::parse_json("[20, 30]"));
  EXPECT_TRUE(compile("[1, 2, 3].exists_one(x, x == 2)", env).evaluate_bool(act));
}

TEST(CelEval, ErrorsAreValuesAndAbsorbed) {
  EXPECT_TRUE(eval("1 / 0").is_error());
  EXPECT_THAT(eval("1 / 0").error_message(), HasSubstr("division by zero"));
  EXPECT_THAT(eval("9223372036854775807 + 1").error_message(), HasSubstr("overflow"));
  EXPECT_THAT(eval("0u - 1u").error_message(), HasSubstr("overflow"));
  EXPECT_THAT(eval("{'a': 1}['b']").error_message(), HasSubstr("no such key"));
  EXPECT_THAT(eval("[1][3]").error_message(), HasSubstr("index out of range"));
  EXPECT_TRUE(eval("1 / 0 == 1 || true").as_bool());
  EXPECT_FALSE(eval("false && 1 / 0 == 1").as_bool());
  EXPECT_FALSE(eval("1 / 0 == 1 && false").as_bool());
  EXPECT_TRUE(eval("(1 / 0 == 1) ? true : false").is_error());
}

TEST(CelEval, HeterogeneousNumbers) {
  EXPECT_TRUE(eval("1 == 1u && 1u == 1.0 && 2.5 > 2 && 3u < 3.5").as_bool());
  EXPECT_TRUE(eval("[1, 2.0, 3u] == [1u, 2, 3.0]").as_bool());
  EXPECT_FALSE(eval("1 == 'a'").as_bool());
  EXPECT_TRUE(eval("{1: 'a'}[1u] == 'a'").as_bool());
}

TEST(CelEval, MissingVariableWithChecksOff) {
  Program p = compile("x + 1", Env().disable_check());
  Activation empty;
  EXPECT_THAT(p.evaluate(empty).error_message(), HasSubstr("undeclared reference to 'x'"));
  Activation act;
  act.bind("x", Val::integer(2));
  EXPECT_EQ(p.evaluate(act).as_int(), 3);
}

TEST(CelEval, EvaluateBoolReportsErrors) {
  Env env;
  env.variable("value", "int");
  Program p = compile("value >= 300", env);
  core::Value v(512);
  EXPECT_TRUE(p.evaluate_bool(Activation().bind("value", v)));
  core::Value s("x");
  try {
    (void)p.evaluate_bool(Activation().bind("value", s));
    FAIL() << "expected EvalError";
  } catch (const EvalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no matching overload for '_>=_' applied to (string, int)"));
  }
  EXPECT_THROW((void)compile("1 + 1", Env()).evaluate_bool(Activation()), EvalError);
}

TEST(CelEval, CostLimit) {
  Env env;
  env.cost_limit(1000);
  Program p = compile(
      "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, "
      "[1,2,3,4,5,6,7,8,9,10].all(c, a + b + c > 0)))",
      env);
  Val v = p.evaluate(Activation());
  ASSERT_TRUE(v.is_error());
  EXPECT_THAT(v.error_message(), HasSubstr("cost limit of 1000 units exceeded"));
  // The error is not absorbed by || (a runaway rule must not look like it passed).
  Program q = compile("true || [1,2,3].all(x, true)", env);
  EXPECT_TRUE(q.evaluate_bool(Activation()));
  Program r = compile(
      "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, "
      "[1,2,3,4,5,6,7,8,9,10].all(c, a > 0))) || true",
      env);
  EXPECT_TRUE(r.evaluate(Activation()).is_error());
  EXPECT_TRUE(compile("[1,2,3].all(x, x > 0)", Env().cost_limit(1000)).evaluate_bool(Activation()));
}

TEST(CelEval, ResultToValue) {
  core::Value want;
  want["a"].push_back(1);
  want["a"].push_back(2u);
  want["a"].push_back(2.5);
  want["a"].push_back("x");
  want["a"].push_back(core::Bytes{"y"});
  want["a"].push_back(nullptr);
  want["a"].push_back(true);
  EXPECT_EQ(eval("{'a': [1, 2u, 2.5, 'x', b'y', null, true]}").to_value(), want);
  EXPECT_EQ(eval("{1: 'one'}").to_value(), core::parse_json(R"({"1": "one"})"));
  EXPECT_EQ(eval("timestamp('2024-01-02T03:04:05Z')").to_value(),
            core::Value("2024-01-02T03:04:05Z"));
  EXPECT_EQ(eval("duration('1h30m')").to_value(), core::Value("5400s"));
  EXPECT_THROW((void)eval("1/0").to_value(), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::cel
