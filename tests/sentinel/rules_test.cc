#include "sentinel/rules.h"

#include <gtest/gtest.h>

#include "cel/cost.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"

namespace gpufleet::sentinel {
namespace {

core::Value json(std::string_view s) { return core::parse_json(s); }

RuleSpec rule(std::string name, std::string when, int priority = 0) {
  RuleSpec r;
  r.name = std::move(name);
  r.when = std::move(when);
  r.priority = priority;
  r.cordon = true;
  return r;
}

const core::Value kNode = json(R"({"metadata":{"name":"n1","labels":{"pool":"h100"}}})");
const core::Value kHealth = json(R"({"status":{"checks":{}}})");

TEST(Rules, MatchAndAct) {
  auto fatal = rule("xid-fatal", "event.severity == 'critical'");
  fatal.taint = Taint::parse("nvidia.com/gpu-error=fatal:NoSchedule", "t");
  auto set = RuleSet::compile({fatal});
  auto d = set.evaluate(json(R"({"type":"Xid","code":79,"severity":"critical"})"), kHealth, kNode,
                        core::Value::list());
  EXPECT_TRUE(d.cordon);
  ASSERT_EQ(d.taints.size(), 1u);
  EXPECT_EQ(d.taints[0].to_string(), "nvidia.com/gpu-error=fatal:NoSchedule");
  EXPECT_EQ(d.matched, std::vector<std::string>{"xid-fatal"});
  d = set.evaluate(json(R"({"type":"Xid","code":13,"severity":"warning"})"), kHealth, kNode,
                   core::Value::list());
  EXPECT_FALSE(d.acts());
}

TEST(Rules, AbsentFieldDoesNotMatchAndIsReportedOnce) {
  auto set = RuleSet::compile({rule("uses-missing", "event.nvswitch == 2"),
                               rule("ok", "node.metadata.labels.pool == 'h100'")});
  std::vector<std::string> problems;
  for (int i = 0; i < 5; ++i) {
    auto d = set.evaluate(json(R"({"type":"Xid","code":79})"), kHealth, kNode, core::Value::list(),
                          &problems);
    EXPECT_EQ(d.matched, std::vector<std::string>{"ok"});
  }
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("uses-missing: "), std::string::npos);
  EXPECT_NE(problems[0].find("no such key"), std::string::npos) << problems[0];
  // A non-bool result is a problem too, not a match.
  auto nb = RuleSet::compile({rule("not-bool", "event.code")});
  problems.clear();
  EXPECT_FALSE(
      nb.evaluate(json(R"({"code":1})"), kHealth, kNode, core::Value::list(), &problems).acts());
  EXPECT_EQ(problems.size(), 1u);
}

TEST(Rules, CombinationOrderIsPriorityThenName) {
  auto a = rule("a-low", "true", 0);
  a.taint = Taint::parse("gpu-error=warn:NoSchedule", "t");
  a.escalate = "reset";
  auto b = rule("b-high", "true", 10);
  b.taint = Taint::parse("gpu-error=fatal:NoSchedule", "t");
  b.cordon = false;
  auto c = rule("c-high", "true", 10);
  c.taint = Taint::parse("gpu-error=other:NoExecute", "t");
  c.escalate = "replace";
  auto dry = rule("0-dry", "true", 100);
  dry.dry_run = true;
  dry.taint = Taint::parse("dry=run:NoExecute", "t");
  // Any input order gives the same decision.
  for (auto rules : {std::vector<RuleSpec>{a, b, c, dry}, std::vector<RuleSpec>{dry, c, b, a}}) {
    auto d = RuleSet::compile(rules).evaluate(json("{}"), kHealth, kNode, core::Value::list());
    EXPECT_EQ(d.matched, (std::vector<std::string>{"b-high", "c-high", "a-low"}));
    EXPECT_EQ(d.dry_run, std::vector<std::string>{"0-dry"});
    EXPECT_TRUE(d.cordon);
    ASSERT_EQ(d.taints.size(), 2u);
    EXPECT_EQ(d.taints[0].to_string(), "gpu-error=fatal:NoSchedule");  // b wins NoSchedule
    EXPECT_EQ(d.taints[1].to_string(), "gpu-error=other:NoExecute");
    EXPECT_EQ(d.escalate, "replace");  // c before a
  }
}

TEST(Rules, DryRunOnlyNeverActs) {
  auto r = rule("dry", "true");
  r.dry_run = true;
  auto d = RuleSet::compile({r}).evaluate(json("{}"), kHealth, kNode, core::Value::list());
  EXPECT_FALSE(d.acts());
  EXPECT_EQ(d.dry_run, std::vector<std::string>{"dry"});
}

TEST(Rules, CostBounded) {
  // The static estimate admits one pass over the declared 32 entries (2 + 32 × 5 = 162)...
  auto set = RuleSet::compile({rule("scan", "history.all(a, a.code >= 0)")}, 200);
  // ...and the runtime limit still stops inputs larger than declared.
  core::Value history = core::Value::list();
  for (int i = 0; i < 100; ++i) history.push_back(json(R"({"code":1})"));
  std::vector<std::string> problems;
  auto d = set.evaluate(json("{}"), kHealth, kNode, history, &problems);
  EXPECT_FALSE(d.acts());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("cost limit of 200 units exceeded"), std::string::npos) << problems[0];
  history = core::Value::list();
  for (int i = 0; i < 32; ++i) history.push_back(json(R"({"code":1})"));
  EXPECT_TRUE(set.evaluate(json("{}"), kHealth, kNode, history).acts());
}

std::string compile_error(const RuleSpec& r, std::uint64_t limit = 100'000) {
  try {
    (void)RuleSet::compile({r}, limit);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(Rules, CostlyRulesAreRefusedAtCompile) {
  // Three nested passes over the history: 32^3 iterations.
  const std::string msg = compile_error(
      rule("expensive",
           "history.all(a, history.all(b, history.all(c, a.code + b.code + c.code >= 0)))"));
  EXPECT_NE(msg.find("rule 'expensive'.when: estimated worst-case cost 363,618 units exceeds "
                     "spec.costLimit 100,000"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the costliest part is `history.all(a, history.all(b, "), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("up to 32 iterations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("or split the rule, or raise spec.costLimit"), std::string::npos) << msg;
  // The same rule fits a raised limit.
  EXPECT_EQ(compile_error(rule("expensive",
                               "history.all(a, history.all(b, history.all(c, "
                               "a.code + b.code + c.code >= 0)))"),
                          400'000),
            "");
  // Node labels have no declared count: iterating them is refused, indexing them is not.
  const std::string labels =
      compile_error(rule("labels", "node.metadata.labels.exists(k, k.startsWith('nvidia.com/'))"));
  EXPECT_NE(labels.find("`node.metadata.labels.exists(k, k.startsWith('nvidia.com/'))` at 1:1: "
                        "up to 3,145,728 iterations (no declared bound)"),
            std::string::npos)
      << labels;
  EXPECT_EQ(compile_error(rule("label",
                               "node.metadata.labels['nvidia.com/gpu.product']."
                               "matches('^NVIDIA-H1[0-9]{2}')")),
            "");
  // An unbounded string in a regex: Node annotations are up to 256 KiB.
  EXPECT_EQ(compile_error(rule("annotation", "node.metadata.annotations['a'].matches('x')")), "");
  EXPECT_NE(compile_error(rule("annotation", "node.metadata.annotations['a'].matches('x')"), 10'000)
                .find("32,768 units"),
            std::string::npos);
}

TEST(Rules, NodeHealthRulesFitTheDefaultLimit) {
  // Every check and every entity of it: 64 × 64 iterations of a short predicate.
  const std::string fatal =
      "health.status.checks.exists(c, c.entities.exists(e, "
      "e.state == 'Fatal'))";
  auto p0 = cel::compile(fatal, cel::Env().variable("health"));
  EXPECT_EQ(cel::estimate_cost(p0, rule_input_sizes()).max, 2 + 64 * (1 + 3 + 64 * 5u));
  EXPECT_EQ(compile_error(rule("any-fatal-entity", fatal)), "");
  // Searching each entity's message (up to 4,400 bytes) as well is too much for the default.
  const std::string msg = compile_error(rule("xid-message",
                                             "health.status.checks.exists(c, c.entities.exists(e, "
                                             "e.state == 'Fatal' && e.message.contains('Xid')))"));
  EXPECT_NE(msg.find("estimated worst-case cost 2,294,018 units exceeds spec.costLimit 100,000 "
                     "(the costliest part is `health.status.checks.exists(c, c.entities.exists(e, "
                     "e.state == 'Fatal' && e.m...` at 1:1: up to 64 iterations, 2,294,016 units)"),
            std::string::npos)
      << msg;
  // The pattern rule of docs/sentinel.md is a few thousand units at most.
  auto p = cel::compile(
      "event.type == 'Xid' && history.filter(h, h.type == 'Xid' && h.code == event.code && "
      "h.entity == event.entity && h.ageSeconds < 86400).size() >= 5",
      cel::Env().variable("event").variable("history"));
  const cel::CostEstimate c = cel::estimate_cost(p, rule_input_sizes());
  EXPECT_LT(c.max, 2'000u);
  EXPECT_GT(c.max, 32u * 10);
}

TEST(Rules, PatternEscalationOverHistory) {
  // The same Xid on the same GPU in >= 5 bursts within 24 h -> replace.
  auto r = rule("repeat-xid",
                "event.type == 'Xid' && history.filter(h, h.type == 'Xid' && h.code == event.code "
                "&& h.entity == event.entity && h.ageSeconds < 86400).size() >= 5");
  r.cordon = false;
  r.escalate = "replace";
  auto set = RuleSet::compile({r});
  EventHistory history(512);
  const core::Value ev = json(R"({"type":"Xid","code":48,"entity":"GPU-a"})");
  const std::int64_t hour = 3600 * 1000;
  for (int i = 0; i < 4; ++i) history.add(ev, i * hour);
  history.add(json(R"({"type":"Xid","code":48,"entity":"GPU-b"})"), 4 * hour);  // other GPU
  EXPECT_FALSE(set.evaluate(ev, kHealth, kNode, history.to_value(5 * hour)).acts());
  history.add(ev, 5 * hour);
  EXPECT_EQ(set.evaluate(ev, kHealth, kNode, history.to_value(5 * hour)).escalate, "replace");
  // A day later the first bursts aged out of the window.
  EXPECT_FALSE(set.evaluate(ev, kHealth, kNode, history.to_value(25 * hour + 1)).acts());
  EventHistory small(3);
  for (int i = 0; i < 10; ++i) small.add(ev, i);
  EXPECT_EQ(small.size(), 3u);
}

TEST(Rules, BadRulesAreNamed) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      msg([] { RuleSet::compile({rule("broken", "event.code ==")}); }).find("rule 'broken'.when"),
      std::string::npos);
  EXPECT_NE(msg([] {
              RuleSet::compile({rule("x", "true"), rule("x", "false")});
            }).find("used twice"),
            std::string::npos);
  EXPECT_NE(msg([] {
              Taint::parse("k=v:Sometimes", "rules[0].taint");
            }).find("rules[0].taint: effect 'Sometimes'"),
            std::string::npos);
  EXPECT_NE(msg([] {
              RuleSpec::from_value(json(R"({"name":"a","when":"true"})"), "rules[0]");
            }).find("has no action"),
            std::string::npos);
  EXPECT_NE(msg([] {
              RuleSpec::from_value(json(R"({"name":"a","when":"true","cordn":true})"), "rules[0]");
            }).find("rules[0].cordn: unknown key"),
            std::string::npos);
  auto r = RuleSpec::from_value(
      json(R"({"name":"a","when":"true","taint":"k:NoExecute","priority":3,"dryRun":true})"), "r");
  EXPECT_EQ(r.taint->to_string(), "k:NoExecute");
  EXPECT_EQ(r.priority, 3);
  EXPECT_TRUE(r.dry_run);
}

}  // namespace
}  // namespace gpufleet::sentinel

namespace gpufleet::sentinel {
namespace {

// The two rules docs/sentinel.md shows, over events and history shaped as the controller and
// NodeHealth make them ({check, entity, state, reason} and status.history entries).
TEST(Rules, TheDocumentedExamplesWorkOnRealShapes) {
  std::vector<RuleSpec> specs = {
      RuleSpec::from_value(core::parse_yaml(R"(
name: xid-fatal
when: "event.check == 'xid' && event.state == 'Fatal'"
cordon: true
taint: nvidia.com/gpu-error=fatal:NoSchedule
)"),
                           "docs"),
      RuleSpec::from_value(core::parse_yaml(R"(
name: repeat-xid
when: >-
  event.check == 'xid' && history.filter(h, h.check == 'xid' && h.entity == event.entity &&
  h.reason == event.reason).size() >= 5
escalate: replace
)"),
                           "docs"),
  };
  RuleSet rules = RuleSet::compile(specs);
  const core::Value event = core::parse_json(
      R"({"check":"xid","entity":"GPU-3","kind":"GPU","state":"Fatal","reason":"Xid79"})");
  core::Value history = core::Value::list();
  auto burst = [&](const char* entity) {
    history.push_back(core::parse_json(
        std::string(R"({"recordId":1,"time":"2026-12-01T00:00:00Z",)") +
        R"("check":"xid","entity":")" + entity + R"(","state":"Fatal","reason":"Xid79"})"));
  };
  for (int i = 0; i < 4; ++i) burst("GPU-3");
  burst("GPU-5");
  Decision d = rules.evaluate(event, core::Value::map(), core::Value::map(), history);
  EXPECT_TRUE(d.cordon);
  EXPECT_EQ(d.escalate, "");  // four on this GPU: not yet
  burst("GPU-3");
  d = rules.evaluate(event, core::Value::map(), core::Value::map(), history);
  EXPECT_EQ(d.escalate, "replace");
}

}  // namespace
}  // namespace gpufleet::sentinel
