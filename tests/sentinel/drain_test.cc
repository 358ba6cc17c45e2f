#include "sentinel/drain.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "sentinel/breaker.h"
#include "sentinel/policy.h"

namespace gpufleet::sentinel {
namespace {

core::Value pod(std::string_view ns, std::string_view name, std::string_view extra = "") {
  return core::parse_json(std::string(R"({"metadata":{"namespace":")") + std::string(ns) +
                          R"(","name":")" + std::string(name) + R"(","uid":"u-)" +
                          std::string(name) + "\"" + std::string(extra) +
                          R"(},"spec":{"nodeName":"n1"},"status":{"phase":"Running"}})");
}

DrainPolicy policy() {
  return Policy::from_spec(core::parse_yaml(R"(
rules: [{name: r, when: "true", cordon: true}]
drain:
  deadlineSeconds: 100
  terminatingTimeoutSeconds: 10
  modes:
  - {mode: AllowCompletion, timeoutSeconds: 50, selector: {matchLabels: {workload: training}}}
  - {mode: Delete, timeoutSeconds: 20, selector: {matchLabels: {workload: batch}}}
)"))
      .drain;
}

PodAction action_at(const core::Value& p, std::int64_t elapsed_s) {
  DrainPlan plan = plan_drain({&p}, policy(), 0, elapsed_s * 1000);
  EXPECT_EQ(plan.steps.size(), 1u);
  return plan.steps.empty() ? PodAction::Wait : plan.steps[0].action;
}

TEST(Drain, EvictNowThenDeleteAtTheDeadline) {
  core::Value p = pod("team", "web");
  EXPECT_EQ(action_at(p, 0), PodAction::Evict);
  EXPECT_EQ(action_at(p, 99), PodAction::Evict);
  EXPECT_EQ(action_at(p, 100), PodAction::Delete);
}

TEST(Drain, AllowCompletionWaitsThenEvictsThenDeletes) {
  core::Value p = pod("team", "train", R"(,"labels":{"workload":"training"})");
  EXPECT_EQ(action_at(p, 0), PodAction::Wait);
  EXPECT_EQ(action_at(p, 49), PodAction::Wait);
  EXPECT_EQ(action_at(p, 50), PodAction::Evict);
  EXPECT_EQ(action_at(p, 200), PodAction::Delete);
}

TEST(Drain, DeleteModeEvictsThenDeletesAfterItsTimeout) {
  core::Value p = pod("team", "batch", R"(,"labels":{"workload":"batch"})");
  EXPECT_EQ(action_at(p, 0), PodAction::Evict);
  EXPECT_EQ(action_at(p, 20), PodAction::Delete);
}

TEST(Drain, NeverDaemonSetMirrorSystemOrFinishedPods) {
  core::Value ds = pod("team", "ds",
                       R"(,"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet",)"
                       R"("name":"x","uid":"1","controller":true}])");
  core::Value mirror =
      pod("team", "static", R"(,"annotations":{"kubernetes.io/config.mirror":"abc"})");
  core::Value sys = pod("kube-system", "dns");
  core::Value done = pod("team", "done");
  done["status"]["phase"] = "Succeeded";
  DrainPlan plan = plan_drain({&ds, &mirror, &sys, &done}, policy(), 0, 1000 * 1000);
  EXPECT_TRUE(plan.done());
  EXPECT_EQ(plan.skipped, 4u);
}

TEST(Drain, StuckTerminatingIsForceDeletedAfterTheTimeout) {
  core::Value p = pod("team", "stuck", R"(,"deletionTimestamp":"2026-12-01T10:00:00Z")");
  const std::int64_t at = 1796119200000;  // 2026-12-01T10:00:00Z in ms
  DrainPlan wait = plan_drain({&p}, policy(), at - 5000, at + 5000);
  ASSERT_EQ(wait.steps.size(), 1u);
  EXPECT_EQ(wait.steps[0].action, PodAction::Wait);
  DrainPlan force = plan_drain({&p}, policy(), at - 5000, at + 11000);
  EXPECT_EQ(force.steps[0].action, PodAction::ForceDelete);
}

// ---- training jobs folded into the drain (kube/api/job_disruption.h) ----

core::Value job_pod(std::string_view name, std::string_view node, std::string_view extra = "") {
  core::Value p = pod("train", name,
                      std::string(R"(,"labels":{"goodput.gpufleet.io/job":"llama"},)"
                                  R"("annotations":{"goodput.gpufleet.io/checkpoint":)"
                                  R"("on-request"})") +
                          std::string(extra));
  p["spec"]["nodeName"] = node;
  return p;
}

// What the controller does in one look: decide, record, fold into the drain of n1.
struct JobLook {
  std::vector<kube::JobRecord> records;
  std::int64_t timeout_s = 60;
  JobDrain jobs;
  DrainPlan look(const std::vector<const core::Value*>& on_node,
                 const std::vector<const core::Value*>& all, std::int64_t started_ms,
                 std::int64_t now_ms, const DrainPolicy& dp = policy()) {
    kube::JobDisruptionInput in;
    in.node = "n1";
    in.pods = all;
    in.records = records;
    in.request_id = "n1-incident";
    in.checkpoint_timeout_s = timeout_s;
    in.skip_namespaces = dp.system_namespaces;
    in.now_ms = now_ms;
    jobs.decisions = kube::decide_jobs(in);
    for (const auto& d : jobs.decisions) kube::record_decision(records, d, in);
    jobs.records = records;
    jobs.pods = all;
    return plan_drain(on_node, dp, started_ms, now_ms, jobs);
  }
};

const PodStep* step_for(const DrainPlan& plan, std::string_view name) {
  for (const auto& s : plan.steps)
    if (s.name == name) return &s;
  return nullptr;
}

TEST(JobDrain, WithoutJobsThePlanIsTheSame) {
  core::Value web = pod("team", "web");
  core::Value train = pod("team", "train", R"(,"labels":{"workload":"training"})");
  for (std::int64_t at : {0, 60, 120, 300}) {
    DrainPlan a = plan_drain({&web, &train}, policy(), 0, at * 1000);
    DrainPlan b = plan_drain({&web, &train}, policy(), 0, at * 1000, JobDrain{});
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (std::size_t i = 0; i < a.steps.size(); ++i) {
      EXPECT_EQ(a.steps[i].action, b.steps[i].action) << at;
      EXPECT_EQ(a.steps[i].mode, b.steps[i].mode) << at;
    }
  }
}

TEST(JobDrain, AJobCheckpointingHoldsItsPodsAndNothingElse) {
  core::Value a = job_pod("a", "n1");
  core::Value b = job_pod("b", "n2");
  core::Value web = pod("team", "web");
  JobLook j;
  j.timeout_s = 300;
  DrainPlan plan = j.look({&a, &web}, {&a, &b, &web}, 0, 1000);
  ASSERT_EQ(j.jobs.decisions.size(), 1u);
  EXPECT_EQ(j.jobs.decisions[0].action, kube::JobAction::RequestCheckpoint);
  ASSERT_NE(step_for(plan, "a"), nullptr);
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Wait);
  EXPECT_TRUE(step_for(plan, "a")->held);
  EXPECT_EQ(step_for(plan, "web")->action, PodAction::Evict);
  EXPECT_EQ(step_for(plan, "b"), nullptr);  // the gang elsewhere is not touched while it waits
  EXPECT_EQ(plan.held(), 1u);
  EXPECT_FALSE(plan.only_held());
  // web gone: only the wait is left; past the drain deadline the held pod is still not deleted.
  plan = j.look({&a}, {&a, &b}, 0, 150'000);
  EXPECT_EQ(j.jobs.decisions[0].action, kube::JobAction::Wait);
  EXPECT_TRUE(plan.only_held());
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Wait);
}

TEST(JobDrain, TheGangGoesTogetherOnEveryNodeWithDeadlinesFromItsDisruption) {
  core::Value a = job_pod("a", "n1");
  core::Value b = job_pod("b", "n2");
  JobLook j;
  (void)j.look({&a}, {&a, &b}, 0, 1000);  // request at 1 s, deadline 61 s
  // The drain's own deadline (100 s) passes while the job may still checkpoint...
  DrainPlan plan = j.look({&a}, {&a, &b}, 0, 61'000);
  ASSERT_EQ(j.jobs.decisions[0].action, kube::JobAction::DrainGang);
  EXPECT_EQ(j.jobs.decisions[0].reason, "DeadlineExceeded");
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Evict);
  EXPECT_EQ(step_for(plan, "a")->node, "");
  EXPECT_EQ(step_for(plan, "b")->action, PodAction::Evict);
  EXPECT_EQ(step_for(plan, "b")->node, "n2");
  EXPECT_EQ(step_for(plan, "b")->uid, "u-b");
  EXPECT_EQ(plan.held(), 0u);
  // ...so 100 s after the disruption (161 s), not at the drain's 100 s, PDB refusals are deleted.
  plan = j.look({&a}, {&a, &b}, 0, 120'000);
  EXPECT_EQ(j.jobs.decisions[0].action, kube::JobAction::Disrupted);
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Evict);
  EXPECT_EQ(step_for(plan, "b")->action, PodAction::Evict);
  plan = j.look({&a}, {&a, &b}, 0, 161'000);
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Delete);
  EXPECT_EQ(step_for(plan, "b")->action, PodAction::Delete);
}

TEST(JobDrain, TheGangsPodsElsewhereFollowTheirModes) {
  core::Value a = job_pod("a", "n1");
  core::Value b = job_pod("b", "n2");
  for (core::Value* p : {&a, &b}) {
    (*p)["metadata"]["labels"]["workload"] = "training";
    (*p)["metadata"]["annotations"] = core::Value::map();  // no contract: drained at once
  }
  JobLook j;
  DrainPlan plan = j.look({&a}, {&a, &b}, 0, 1000);
  EXPECT_EQ(j.jobs.decisions[0].reason, "NoContract");
  // AllowCompletion (50 s) for both, on either node.
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Wait);
  EXPECT_EQ(step_for(plan, "b")->action, PodAction::Wait);
  EXPECT_FALSE(step_for(plan, "b")->held);
  plan = j.look({&a}, {&a, &b}, 0, 52'000);
  EXPECT_EQ(step_for(plan, "a")->action, PodAction::Evict);
  EXPECT_EQ(step_for(plan, "b")->action, PodAction::Evict);
}

TEST(JobDrain, EvictedPodsLeaveThePlanAndReplacementsNeverJoinIt) {
  core::Value a = job_pod("a", "n1");
  core::Value b = job_pod("b", "n2");
  JobLook j;
  j.timeout_s = 0;  // no wait: drained at once
  DrainPlan plan = j.look({&a}, {&a, &b}, 0, 1000);
  EXPECT_EQ(j.jobs.decisions[0].reason, "NoWait");
  EXPECT_EQ(plan.steps.size(), 2u);
  // b is going; a is gone; b's replacement (another uid) runs on n3.
  b["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:00Z";
  core::Value b2 = job_pod("b2", "n3");
  plan = j.look({}, {&b, &b2}, 0, 2000);
  EXPECT_TRUE(j.jobs.decisions.empty());  // no pod of the job on the node: nothing to decide
  EXPECT_TRUE(plan.done());
  // A recorded pod the cache lost is still evicted by name and uid.
  j.jobs.decisions = {kube::JobDecision{}};
  j.jobs.decisions[0].action = kube::JobAction::Disrupted;
  j.jobs.decisions[0].evict = {{"train", "gone", "u-gone", "n4"}};
  j.jobs.pods = {};
  plan = plan_drain({}, policy(), 0, 3000, j.jobs);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].action, PodAction::Evict);
  EXPECT_EQ(plan.steps[0].node, "n4");
}

TEST(Policy, DefaultsAndErrorsNameTheField) {
  Policy p = Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]"));
  EXPECT_EQ(p.remediation.default_action, "reboot");
  EXPECT_TRUE(p.validation.new_nodes);
  EXPECT_GT(p.breaker.max_fraction, 0.0);  // a breaker is always on
  try {
    (void)Policy::from_spec(core::parse_yaml(
        "rules: [{name: r, when: 'true', cordon: true}]\ndrain: {defaultMode: Yank}"));
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("spec.drain.defaultMode"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("AllowCompletion"), std::string::npos);
  }
  try {
    (void)Policy::from_spec(core::parse_yaml(
        "rules: [{name: r, when: 'true', cordon: true}]\nremediation: {maxAttempts: 0}"));
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("spec.remediation.maxAttempts"), std::string::npos);
  }
}

std::string policy_error(std::string_view yaml, const std::vector<std::string>& providers = {}) {
  try {
    Policy p = Policy::from_spec(core::parse_yaml(yaml));
    p.check_providers(providers);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

// Scoped policies: spec.nodeSelector is a metav1.LabelSelector checked when read, priority a
// bounded integer; both name the field and the fix when wrong.
TEST(Policy, NodeSelectorAndPriority) {
  Policy p = Policy::from_spec(core::parse_yaml(
      "rules: [{name: r, when: 'true', cordon: true}]\npriority: 10\n"
      "nodeSelector: {matchLabels: {pool: train}, matchExpressions: [{key: gpu, operator: In, "
      "values: [h100]}]}"));
  EXPECT_EQ(p.priority, 10);
  EXPECT_EQ(p.node_selector.get_string({"matchLabels", "pool"}), "train");
  EXPECT_TRUE(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]"))
                  .node_selector.is_null());  // every node
  const std::string op = policy_error(
      "rules: [{name: r, when: 'true', cordon: true}]\n"
      "nodeSelector: {matchExpressions: [{key: gpu, operator: Is, values: [h100]}]}");
  EXPECT_NE(op.find("spec.nodeSelector.matchExpressions[0].operator"), std::string::npos) << op;
  EXPECT_NE(op.find("Is"), std::string::npos) << op;
  const std::string key = policy_error(
      "rules: [{name: r, when: 'true', cordon: true}]\nnodeSelector: {matchLabels: {'a b': x}}");
  EXPECT_NE(key.find("spec.nodeSelector.matchLabels"), std::string::npos) << key;
  const std::string prio =
      policy_error("rules: [{name: r, when: 'true', cordon: true}]\npriority: 5000");
  EXPECT_NE(prio.find("spec.priority"), std::string::npos) << prio;
  EXPECT_NE(prio.find("[-1000, 1000]"), std::string::npos) << prio;
}

// Node replacement: the provider is named by the policy, needed by every path to `replace`, and
// must be one the controller has (admission and the reconciler both call check_providers).
TEST(Policy, ReplacementNeedsAKnownProvider) {
  Policy p = Policy::from_spec(
      core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]\n"
                       "remediation: {replacement: {provider: simulator, whenRebootFails: true}}"));
  EXPECT_EQ(p.remediation.provider, "simulator");
  EXPECT_TRUE(p.remediation.replace_when_reboot_fails);
  EXPECT_TRUE(p.may_replace());
  EXPECT_NO_THROW(p.check_providers({"simulator"}));
  EXPECT_FALSE(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]"))
                   .may_replace());

  EXPECT_EQ(policy_error("rules: [{name: r, when: 'true', cordon: true}]\n"
                         "remediation: {replacement: {provider: acme}}",
                         {"simulator"}),
            "spec.remediation.replacement.provider: \"acme\" is not a replacement provider of "
            "this sentinel controller; use one of: simulator");
  EXPECT_NE(policy_error("rules: [{name: r, when: 'true', cordon: true}]\n"
                         "remediation: {replacement: {provider: acme}}")
                .find("it has none"),
            std::string::npos);
  EXPECT_NE(policy_error("rules: [{name: r, when: 'true', cordon: true}]\n"
                         "remediation: {defaultAction: replace}")
                .find("spec.remediation.defaultAction is \"replace\" but "
                      "spec.remediation.replacement.provider is not set"),
            std::string::npos);
  EXPECT_NE(policy_error("rules: [{name: big, when: 'true', remediate: replace}]")
                .find("rule 'big'.remediate is \"replace\""),
            std::string::npos);
  EXPECT_NE(policy_error("rules: [{name: r, when: 'true', cordon: true}]\n"
                         "remediation: {replacement: {whenRebootFails: true}}")
                .find("whenRebootFails is true"),
            std::string::npos);
  EXPECT_NE(policy_error("rules: [{name: r, when: 'true', cordon: true}]\n"
                         "remediation: {defaultAction: powercycle}")
                .find("use none, wait, gpu-reset, reboot or replace"),
            std::string::npos);
}

// Escalation settings: settleSeconds (the time a reset's GPU has to report healthy) and a
// rule's escalate, which names an action or is refused with the field, the value and the fix.
// An escalation to replace without a provider is admitted (recorded as not applied per
// incident), unlike remediate: replace.
TEST(Policy, EscalationSettingsAndErrors) {
  Policy p = Policy::from_spec(
      core::parse_yaml("rules: [{name: r, when: 'true', cordon: true, escalate: replace}]\n"
                       "remediation: {settleSeconds: 45}"));
  EXPECT_EQ(p.remediation.settle_s, 45);
  EXPECT_EQ(p.rules[0].escalate, "replace");
  EXPECT_FALSE(p.may_replace());
  EXPECT_EQ(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]"))
                .remediation.settle_s,
            30);
  EXPECT_EQ(policy_error("rules: [{name: r, when: 'true', cordon: true}]\n"
                         "remediation: {settleSeconds: 0}"),
            "spec.remediation.settleSeconds: 0 is not an integer in [1, 3600]");
  EXPECT_EQ(policy_error("rules: [{name: r, when: 'true', escalate: reset}]"),
            "spec.rules[0].escalate: \"reset\" is not an action to escalate to; use gpu-reset, "
            "reboot or replace");
}

// The first escalating rule in combination order is named with its escalation.
TEST(Rules, EscalationNamesItsRule) {
  RuleSpec low;
  low.name = "a-low";
  low.when = "true";
  low.escalate = "reboot";
  RuleSpec high = low;
  high.name = "b-high";
  high.priority = 5;
  high.escalate = "replace";
  RuleSpec none = low;
  none.name = "0-cordon";
  none.priority = 10;
  none.escalate = "";
  none.cordon = true;
  Decision d = RuleSet::compile({low, high, none})
                   .evaluate(core::Value::map(), core::Value::map(), core::Value::map(),
                             core::Value::list());
  EXPECT_EQ(d.escalate, "replace");
  EXPECT_EQ(d.escalate_rule, "b-high");
  EXPECT_TRUE(d.cordon);
}

// The documented pattern over history with ageSeconds compiles under the default cost limit
// and counts only bursts within the window.
TEST(Rules, HistoryAgeSecondsWindow) {
  RuleSpec r = RuleSpec::from_value(core::parse_yaml(R"(
name: repeat-xid
when: >-
  event.check == 'xid' && history.filter(h, h.check == 'xid' && h.entity == event.entity &&
  h.reason == event.reason && h.state == 'Fatal' && h.ageSeconds < 86400).size() >= 2
escalate: replace
)"),
                                    "docs");
  RuleSet set = RuleSet::compile({r});
  const core::Value event = core::parse_json(
      R"({"check":"xid","entity":"GPU-3","kind":"GPU","state":"Fatal","reason":"Xid79"})");
  auto burst = [](std::int64_t age) {
    return core::parse_json(R"({"recordId":1,"time":"2026-12-01T00:00:00Z","check":"xid",)"
                            R"("entity":"GPU-3","state":"Fatal","reason":"Xid79","ageSeconds":)" +
                            std::to_string(age) + "}");
  };
  core::Value history = core::Value::list();
  history.push_back(burst(90'000));  // 25 h ago
  history.push_back(burst(60));
  EXPECT_EQ(set.evaluate(event, core::Value::map(), core::Value::map(), history).escalate, "");
  history.push_back(burst(30));
  EXPECT_EQ(set.evaluate(event, core::Value::map(), core::Value::map(), history).escalate,
            "replace");
}

TEST(Rules, ReplaceCoversRebootCoversReset) {
  EXPECT_GT(action_strength("replace"), action_strength("reboot"));
  EXPECT_GT(action_strength("reboot"), action_strength("gpu-reset"));
  EXPECT_GT(action_strength("gpu-reset"), action_strength("wait"));
  EXPECT_EQ(action_strength("powercycle"), 0);
}

TEST(Rules, RemediationCombinesToTheStrongest) {
  std::vector<RuleSpec> specs = {
      RuleSpec::from_value(core::parse_yaml("{name: a, when: 'true', remediate: gpu-reset}"), "a"),
      RuleSpec::from_value(core::parse_yaml("{name: b, when: 'true', remediate: reboot}"), "b"),
  };
  RuleSet rules = RuleSet::compile(specs);
  Decision d = rules.evaluate(core::Value::map(), core::Value::map(), core::Value::map(),
                              core::Value::list());
  EXPECT_EQ(d.remediate, "reboot");  // a reboot covers a pending GPU reset
  EXPECT_TRUE(d.acts());

  // Waiting (e.g. for a cloud maintenance window) is covered by any action, and covers none.
  auto strongest = [](const char* a, const char* b) {
    RuleSet r = RuleSet::compile(
        {RuleSpec::from_value(
             core::parse_yaml(std::string("{name: a, when: 'true', remediate: ") + a + "}"), "a"),
         RuleSpec::from_value(
             core::parse_yaml(std::string("{name: b, when: 'true', remediate: ") + b + "}"), "b")});
    return r
        .evaluate(core::Value::map(), core::Value::map(), core::Value::map(), core::Value::list())
        .remediate;
  };
  EXPECT_EQ(strongest("wait", "gpu-reset"), "gpu-reset");
  EXPECT_EQ(strongest("none", "wait"), "wait");
  EXPECT_EQ(strongest("replace", "reboot"), "replace");  // a new machine covers a reboot
  EXPECT_EQ(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]\n"
                                               "remediation: {defaultAction: wait}"))
                .remediation.default_action,
            "wait");
  try {
    (void)RuleSpec::from_value(core::parse_yaml("{name: n, when: 'true', remediate: nap}"), "r");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("use none, wait, gpu-reset, reboot or replace"),
              std::string::npos)
        << e.what();
  }
}

// The controller retries a quarantine whose write failed after the breaker admitted it: the
// node already counts, so the retry is not refused by the trip its own admission caused.
TEST(BreakerCounts, AnAdmittedNodeIsKnownUntilItLeavesTheWindow) {
  BreakerPolicy p;
  p.max_nodes = 1;
  p.window_ms = 1000;
  CircuitBreaker b(p);
  EXPECT_TRUE(b.admit("n1", 0, 10).admitted);
  EXPECT_TRUE(b.tripped());
  EXPECT_TRUE(b.counts("n1"));
  EXPECT_FALSE(b.counts("n2"));
  b.tick(5000);
  EXPECT_FALSE(b.counts("n1"));
}

TEST(Policy, CheckpointTimeout) {
  EXPECT_EQ(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]"))
                .drain.checkpoint_timeout_s,
            300);
  EXPECT_EQ(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]\n"
                                               "drain: {checkpointTimeoutSeconds: 0}"))
                .drain.checkpoint_timeout_s,
            0);
  EXPECT_EQ(Policy::from_spec(core::parse_yaml("rules: [{name: r, when: 'true', cordon: true}]\n"
                                               "drain: {checkpointTimeoutSeconds: 900}"))
                .drain.checkpoint_timeout_s,
            900);
  for (const char* bad : {"-1", "3601", "300000", "'5m'", "1.5"}) {
    const std::string e =
        policy_error(std::string("rules: [{name: r, when: 'true', cordon: true}]\n"
                                 "drain: {checkpointTimeoutSeconds: ") +
                     bad + "}");
    EXPECT_NE(e.find("spec.drain.checkpointTimeoutSeconds: "), std::string::npos) << bad << e;
    EXPECT_NE(e.find("is not a number of seconds in [0, 3600]"), std::string::npos) << e;
    EXPECT_NE(e.find("e.g. 300 (0: do not wait for checkpoints)"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace gpufleet::sentinel
