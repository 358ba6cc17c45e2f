// The static cost estimate: exact where the runtime's path is fixed, and never below what an
// evaluation within the declared sizes spends.
#include "cel/cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "cel/cel.h"
#include "core/json.h"
#include "core/value.h"
#include "support/source_paths.h"

namespace gpufleet::cel {
namespace {

using ::testing::HasSubstr;

core::Value int_list(int n, int v = 1) {
  core::Value l = core::Value::list();
  for (int i = 0; i < n; ++i) l.push_back(v);
  return l;
}

struct Fixture {
  Env env;
  Sizes sizes;
  Fixture() {
    env.variable("xs").variable("ys").variable("s").variable("obj").variable("h");
    sizes.variable("xs", Shape::list(10, Shape::scalar()))
        .variable("ys", Shape::list(20, Shape::scalar()))
        .variable("s", Shape::string(800));
  }
  CostEstimate estimate(const std::string& expr) const {
    return estimate_cost(compile(expr, env), sizes);
  }
};

// The runtime cost of `expr` over these bindings.
std::uint64_t spent(const Program& p, const Activation& act) {
  std::uint64_t cost = 0;
  Val v = p.evaluate(act, &cost);
  EXPECT_FALSE(v.is_error()) << p.source() << ": " << v.error_message();
  return cost;
}

TEST(CelCost, Constants) {
  Fixture f;
  for (const char* e : {"1", "'abc'", "true", "[1, 2, 3]", "1 + 2 * 3", "'a' + 'b'"}) {
    CostEstimate c = f.estimate(e);
    EXPECT_EQ(c.min, 1u) << e;  // folded at compile time
    EXPECT_EQ(c.max, 1u) << e;
    EXPECT_TRUE(c.costliest.text.empty()) << e;
  }
}

TEST(CelCost, ComprehensionOverBoundedList) {
  Fixture f;
  // all: 1 + range 1 + 10 × (iteration 1 + `x > 0` 3)
  Program p = compile("xs.all(x, x > 0)", f.env);
  CostEstimate c = estimate_cost(p, f.sizes);
  EXPECT_EQ(c.max, 42u);
  EXPECT_EQ(c.min, 2u);  // an empty list
  core::Value xs = int_list(10);
  EXPECT_EQ(spent(p, Activation().bind("xs", xs)), 42u);  // the worst case is reached
  EXPECT_EQ(c.costliest.text, "xs.all(x, x > 0)");
  EXPECT_EQ(c.costliest.range, 10u);
  EXPECT_FALSE(c.costliest.undeclared);
  EXPECT_THAT(c.describe_costliest(),
              HasSubstr("`xs.all(x, x > 0)` at 1:1: up to 10 iterations, 40 units"));
}

TEST(CelCost, NestedComprehensionsMultiply) {
  Fixture f;
  Program p = compile("xs.all(x, ys.all(y, x + y > 0))", f.env);
  CostEstimate c = estimate_cost(p, f.sizes);
  // inner: 2 + 20 × (1 + 5) = 122; outer: 2 + 10 × (1 + 122) = 1232
  EXPECT_EQ(c.max, 1232u);
  core::Value xs = int_list(10), ys = int_list(20);
  EXPECT_EQ(spent(p, Activation().bind("xs", xs).bind("ys", ys)), 1232u);
  // Twice the outer list: twice the cost (minus the fixed part).
  f.sizes.variable("xs", Shape::list(20, Shape::scalar()));
  EXPECT_EQ(estimate_cost(p, f.sizes).max, 2 + 20 * 123u);
  // The map result of a comprehension keeps its bound for the next one.
  EXPECT_EQ(f.estimate("xs.map(x, x * 2).exists(y, y == 3)").max,
            (2 + 20 * (1 + 3)) + 1 + 20 * (1 + 3));  // xs: 20
}

TEST(CelCost, StringFunctionsScaleWithLength) {
  Fixture f;
  // call 1 + receiver 1 + pattern 1 + 800 / 8
  EXPECT_EQ(f.estimate("s.matches('^a+$')").max, 103u);
  EXPECT_EQ(f.estimate("s.contains('x')").max, 103u);
  EXPECT_EQ(f.estimate("s.startsWith('abc')").max, 3u);  // proportional to the prefix
  EXPECT_EQ(f.estimate("s.split(',').size()").max, 1 + 103u);
  f.sizes.variable("s", Shape::string(8000));
  EXPECT_EQ(f.estimate("s.matches('^a+$')").max, 1003u);
  // A comprehension over split parts: at most one part per byte, plus one.
  CostEstimate c = f.estimate("s.split(',').exists(p, p == 'x')");
  EXPECT_EQ(c.max, 1 + 1003 + 8001u * (1 + 3));
  // Runtime agrees on a worst-case input.
  Program p = compile("s.contains('a') && s.matches('^a+$')", f.env);
  core::Value s = std::string(8000, 'a');
  EXPECT_EQ(spent(p, Activation().bind("s", s)), estimate_cost(p, f.sizes).max);
}

TEST(CelCost, ListMembershipScalesWithList) {
  Fixture f;
  Program p = compile("3 in xs", f.env);
  EXPECT_EQ(estimate_cost(p, f.sizes).max, 3 + 10u);
  core::Value xs = int_list(10);
  EXPECT_EQ(spent(p, Activation().bind("xs", xs)), 13u);
}

TEST(CelCost, UndeclaredSizesAreUnbounded) {
  Fixture f;
  CostEstimate c = f.estimate("obj.items.all(i, i.x == 1)");
  EXPECT_GT(c.max, Shape::kUnbounded);
  EXPECT_TRUE(c.costliest.undeclared);
  EXPECT_EQ(c.costliest.text, "obj.items.all(i, i.x == 1)");
  EXPECT_THAT(c.describe_costliest(), HasSubstr("no declared bound"));
  // Declared: the nested object's list bound applies, and its elements' fields too.
  f.sizes.variable(
      "obj",
      Shape::object({{"items", Shape::list(5, Shape::object({{"name", Shape::string(64)}}))}}));
  EXPECT_EQ(f.estimate("obj.items.all(i, i.name.contains('a'))").max, 2 + 5 * (1 + 12u));
  // A map over its keys, a closed object over its field names.
  f.sizes.variable("h", Shape::map(4, Shape::string(16), Shape::list(3, Shape::scalar())));
  EXPECT_EQ(f.estimate("h.all(k, h[k].all(v, v > 0))").max, 2 + 4 * (1 + (1 + 3 + 3 * (1 + 3))));
}

TEST(CelCost, ShortCircuitsAndBranches) {
  Fixture f;
  CostEstimate c = f.estimate("false && xs.all(x, x > 0)");
  EXPECT_EQ(c.max, 1 + 1 + 42u);  // both sides count: absorption evaluates both when an error
  EXPECT_EQ(c.min, 2u);
  CostEstimate d = f.estimate("s == '' ? 1 : xs.filter(x, x > 0).size()");
  EXPECT_EQ(d.max, 1 + 3 + (1 + 42u));
}

// For every expression, an evaluation over inputs at the declared maximum sizes spends at
// most the estimate (and the estimate is the runtime's limit: it is not exceeded).
TEST(CelCost, BoundHoldsAtTheDeclaredMaximum) {
  Fixture f;
  f.sizes.variable(
      "obj", Shape::object({{"names", Shape::list(16, Shape::string(40))},
                            {"labels", Shape::map(8, Shape::string(20), Shape::string(30))}}));
  core::Value xs = int_list(10, 7), ys = int_list(20, 3), s = std::string(800, 'b');
  core::Value obj = core::Value::map();
  for (int i = 0; i < 16; ++i) obj["names"].push_back(std::string(40, 'a' + i % 26));
  for (int i = 0; i < 8; ++i) obj["labels"][std::string(20, 'k' + i)] = std::string(30, 'v');
  for (const char* e : {
           "xs.map(x, x * 2).filter(y, y > 3).size() > 2",
           "xs.all(x, ys.exists(y, x == y)) || s.endsWith('b')",
           "obj.names.exists_one(n, n.startsWith('aa'))",
           "obj.labels.all(k, obj.labels[k].matches('^v+$'))",
           "obj.names.map(n, n + '-' + n).join(',').size() > 0",
           "s.split('b').size() > 3 && s.indexOf('c') == -1",
           "(xs + ys).sort().distinct().size() == 2",
           "s.replace('b', 'cc').size() == 1600",
           "obj.names.filter(n, n in ['x', 'y']).size() == 0 && 7 in xs",
           "xs.sum() + ys.max() > 0 && xs.isSorted()",
       }) {
    Program p = compile(e, f.env);
    CostEstimate c = estimate_cost(p, f.sizes);
    Activation act;
    act.bind("xs", xs).bind("ys", ys).bind("s", s).bind("obj", obj);
    const std::uint64_t cost = spent(p, act);
    EXPECT_LE(cost, c.max) << e;
    EXPECT_GE(cost, c.min) << e;
    Env limited = f.env;
    limited.cost_limit(c.max);
    Val v = compile(e, limited).evaluate(act);
    EXPECT_FALSE(v.is_error()) << e << ": " << v.error_message();
  }
}

// The same over random inputs within the declared sizes (shorter lists, other contents, early
// exits): never above the estimate, never below the minimum.
TEST(CelCost, BoundHoldsForRandomInputsWithinTheSizes) {
  Fixture f;
  f.sizes.variable("obj", Shape::object({{"names", Shape::list(16, Shape::string(40))}}));
  std::mt19937 rng(12345);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n + 1)); };
  const std::vector<Program> programs = [&] {
    std::vector<Program> ps;
    for (const char* e : {"xs.all(x, ys.exists(y, x == y))", "xs.exists_one(x, x in ys)",
                          "xs.filter(x, x > 4).map(x, x * 2).size() >= 0",
                          "s.split(',').exists(p, p.contains('ab'))",
                          "obj.names.all(n, n.matches('^a') || n.endsWith('b'))",
                          "s.replace('a', 'bb').size() >= 0 && s.indexOf(',') >= -1",
                          "obj.names.map(n, n + s).join('-').size() >= 0",
                          "(xs + ys).distinct().sort().size() >= 0"})
      ps.push_back(compile(e, f.env));
    return ps;
  }();
  for (int round = 0; round < 200; ++round) {
    core::Value xs = core::Value::list(), ys = core::Value::list(), obj = core::Value::map();
    for (int i = pick(10); i > 0; --i) xs.push_back(pick(9));
    for (int i = pick(20); i > 0; --i) ys.push_back(pick(9));
    std::string s(static_cast<std::size_t>(pick(800)), 'a');
    for (char& ch : s) ch = "ab,"[pick(2)];
    obj["names"] = core::Value::list();
    for (int i = pick(16); i > 0; --i) {
      std::string n(static_cast<std::size_t>(pick(40)), 'a');
      for (char& ch : n) ch = "ab"[pick(1)];
      obj["names"].push_back(n);
    }
    core::Value sv = s;
    Activation act;
    act.bind("xs", xs).bind("ys", ys).bind("s", sv).bind("obj", obj);
    for (const Program& p : programs) {
      const CostEstimate c = estimate_cost(p, f.sizes);
      const std::uint64_t cost = spent(p, act);
      ASSERT_LE(cost, c.max) << p.source() << " round " << round;
      ASSERT_GE(cost, c.min) << p.source() << " round " << round;
    }
  }
}

// The fuzzer's oracle on its seed corpus (fuzz/cel/corpus/eval) and a few more: with each
// variable's exact bounds (Shape::of), no evaluation spends more than the estimate.
TEST(CelCost, ExactShapesBoundTheFuzzCorpus) {
  const core::Value node = core::parse_json(R"({
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100", "n": "3"}},
    "status": {"capacity": {"nvidia.com/gpu": "8", "memory": "1Ti"},
               "conditions": [{"type": "Ready", "status": "True", "t": "2024-01-01T00:00:00Z"}],
               "numbers": [1, -2, 3.5, 18446744073709551615, null, true, "x"]}})");
  const core::Value event = core::parse_json(R"({"isFatal": true, "errorCode": "79", "count": 9})");
  const core::Value value(300);
  Env env;
  env.variable("node").variable("event").variable("value", "int");
  Sizes sizes;
  sizes.variable("node", Shape::of(node))
      .variable("event", Shape::of(event))
      .variable("value", Shape::of(value));
  std::vector<std::string> exprs = {
      "node.metadata.labels.all(k, node.metadata.labels[k].size() < 100)",
      "node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
      "node.status.numbers.filter(n, type(n) == int).map(n, n * 2).size() == 1",
      "node.metadata.labels.map(k, k + '=' + node.metadata.labels[k]).join(',').size() > 0",
      "[node.metadata.name, event.errorCode].exists(s, s.matches('^[a-z0-9-]+$'))",
      "event.errorCode in ['79', '48'] ? node.metadata.name.indexOf('1') : 0",
  };
  const std::filesystem::path corpus =
      std::filesystem::path(GPUFLEET_SOURCE_DIR) / "fuzz/cel/corpus/eval";
  for (const auto& f : std::filesystem::directory_iterator(corpus)) {
    std::ifstream in(f.path());
    exprs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(exprs.size(), 30u);
  Activation act;
  act.bind("node", node).bind("event", event).bind("value", value);
  int evaluated = 0;
  for (const auto& e : exprs) {
    Program p;
    try {
      p = compile(e, env);
    } catch (const CompileError&) {
      continue;
    }
    const CostEstimate c = estimate_cost(p, sizes);
    std::uint64_t cost = 0;
    (void)p.evaluate(act, &cost);
    EXPECT_LE(cost, c.max) << e;
    ++evaluated;
  }
  EXPECT_GT(evaluated, 30);
}

TEST(CelCost, SaturatesInsteadOfOverflowing) {
  Fixture f;
  CostEstimate c =
      f.estimate("obj.a.all(a, obj.b.all(b, obj.c.all(c, obj.d.all(d, obj.e.all(e, a == e)))))");
  EXPECT_EQ(c.max, UINT64_MAX);
}

}  // namespace
}  // namespace gpufleet::cel
