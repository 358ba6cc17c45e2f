// The sentinel controller against the real kube-apiserver of kube-local: quarantine, the
// breaker, drains, remediation and its escalation (fixture: sentinel_fixture.h).
#include "sentinel_fixture.h"

namespace gpufleet::sentinel {
namespace {

TEST_F(SentinelTest, QuarantineByRuleThenEntityLevelRecoveryDuringDrain) {
  create_policy(
      "  drain: {deadlineSeconds: 600, modes: [{mode: AllowCompletion, timeoutSeconds: 600, "
      "selector: {matchLabels: {workload: training}}}]}\n"
      "  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 100}\n");
  const std::string n = node("a");
  kube::testing::TestNamespace ns(*client_, "sn-a");
  pod(n, ns.name(), "train", {{"workload", "training"}});  // keeps the drain going
  start_manager();
  health(n, {{"xid/GPU-0", "Fatal"}, {"ib-port/mlx5_0/1", "Fatal"}, {"thermal/GPU-1", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Draining"));
  core::Value node_obj = get_node(n);
  EXPECT_TRUE(kube::node::unschedulable(node_obj));
  EXPECT_EQ(kube::annotation_of(node_obj, "gpufleet.io/cordon-owners"), "sentinel");
  EXPECT_TRUE(kube::node::has_taint(node_obj, "nvidia.com/gpu-error", "NoSchedule"));
  auto rem = incidents(n).back();
  auto entities = *rem.get({"spec", "entities"});
  EXPECT_EQ(entities.size(), 2u) << core::to_json(rem);  // thermal: dry-run only
  EXPECT_TRUE(rem.get({"status", "cordonLatencyMs"}) != nullptr);
  // The rule touching an absent label did not match and was reported once, in the status.
  ASSERT_TRUE(wait_until(
      [&] {
        auto p = client_->get(api::sentinel_policies(), "", policy_);
        const core::Value* probs = p.get({"status", "ruleProblems"});
        const core::Value* dry = p.get({"status", "dryRunMatches", "thermal-dry"});
        return probs && probs->size() == 1 && dry && dry->as_int() >= 1;
      },
      15s));

  // One entity recovers: the node stays out.
  health(n, {{"xid/GPU-0", "Healthy"}, {"ib-port/mlx5_0/1", "Fatal"}});
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(phase(n), "Draining");
  EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
  // The last one recovers: the drain is cancelled and the node released as it was.
  health(n, {{"xid/GPU-0", "Healthy"}, {"ib-port/mlx5_0/1", "Healthy"}});
  ASSERT_TRUE(wait_phase(n, "Released"));
  node_obj = get_node(n);
  EXPECT_FALSE(kube::node::unschedulable(node_obj));
  EXPECT_EQ(kube::annotation_of(node_obj, "gpufleet.io/cordon-owners"), "");
  EXPECT_EQ(kube::annotation_of(node_obj, kQuarantineAnnotation), "");
  EXPECT_FALSE(kube::node::has_taint(node_obj, "nvidia.com/gpu-error"));
  EXPECT_FALSE(pod_gone(ns.name(), "train"));  // allowed to complete, never evicted
  EXPECT_EQ(incidents(n).size(), 1u);
}

TEST_F(SentinelTest, PreCordonedNodesAreLeftAsTheyWereAndReturnNeedsCertify) {
  create_policy(
      "  drain: {enabled: false}\n"
      "  validation: {newNodes: false, categories: [diagnostics/dcgm-r2]}\n"
      "  breaker: {maxNodes: 100}\n");
  const std::string manual = node("manual", true, "", "nvidia.com/gpu-error");
  const std::string hostpkg = node("hostpkg", true, "hostpkg");
  start_manager();
  health(manual, {{"xid/GPU-0", "Fatal"}});
  health(hostpkg, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(manual, "Validating"));
  ASSERT_TRUE(wait_phase(hostpkg, "Validating"));
  // Joint ownership with hostpkg; a person's cordon is not claimed.
  EXPECT_EQ(kube::annotation_of(get_node(hostpkg), "gpufleet.io/cordon-owners"),
            "hostpkg,sentinel");
  EXPECT_EQ(kube::annotation_of(get_node(manual), "gpufleet.io/cordon-owners"), "");
  health(manual, {{"xid/GPU-0", "Healthy"}});
  health(hostpkg, {{"xid/GPU-0", "Healthy"}});
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(phase(manual), "Validating");  // recovered is not enough: certify decides
  answer_validation(manual, "Passed");
  answer_validation(hostpkg, "Passed");
  ASSERT_TRUE(wait_phase(manual, "Released"));
  ASSERT_TRUE(wait_phase(hostpkg, "Released"));
  core::Value m = get_node(manual);
  EXPECT_TRUE(kube::node::unschedulable(m));  // still the person's cordon
  int ours = 0;
  for (const auto& t : kube::node::taints(m)) {
    if (t.key != "nvidia.com/gpu-error") continue;  // (the node controller adds its own)
    ++ours;
    EXPECT_EQ(t.value, "manual");  // their taint, value unchanged
  }
  EXPECT_EQ(ours, 1);
  EXPECT_EQ(kube::annotation_of(m, kQuarantineAnnotation), "");
  core::Value h = get_node(hostpkg);
  EXPECT_TRUE(kube::node::unschedulable(h));  // hostpkg still holds it
  EXPECT_EQ(kube::annotation_of(h, "gpufleet.io/cordon-owners"), "hostpkg");
}

TEST_F(SentinelTest, FailedValidationKeepsTheNodeOutWithTheReason) {
  create_policy(kNoDrain);
  const std::string n = node("f");
  start_manager();
  health(n, {{"xid/GPU-3", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Validating"));
  answer_validation(n, "Failed");
  ASSERT_TRUE(wait_phase(n, "Failed"));
  auto rem = incidents(n).back();
  EXPECT_NE(rem.get_string({"status", "message"}).find("HardwareFailure"), std::string::npos)
      << core::to_json(rem);
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
  EXPECT_EQ(incidents(n).size(), 1u);  // no new incident while it is out
}

TEST_F(SentinelTest, NewNodesAreGatedUntilCertified) {
  create_policy("  drain: {enabled: false}\n  breaker: {maxNodes: 100}\n");
  start_manager();
  std::this_thread::sleep_for(1500ms);  // the node joins after the policy
  const std::string n = node("new");
  ASSERT_TRUE(wait_phase(n, "Validating"));
  EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
  EXPECT_EQ(incidents(n).back().get_string({"spec", "reason"}), "NewNode");
  answer_validation(n, "Passed");
  ASSERT_TRUE(wait_phase(n, "Released"));
  core::Value obj = get_node(n);
  EXPECT_FALSE(kube::node::unschedulable(obj));
  EXPECT_NE(kube::annotation_of(obj, kValidatedAnnotation), "");
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(incidents(n).size(), 1u);  // validated once
}

TEST_F(SentinelTest, BreakerCountsUniqueNodesSurvivesRestartAndResets) {
  create_policy(
      "  drain: {enabled: false}\n  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 2, windowSeconds: 600}\n");
  const std::string a = node("a"), b = node("b"), c = node("c");
  start_manager();
  health(a, {{"xid/GPU-0", "Fatal"}});
  health(b, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(a, "Validating"));
  ASSERT_TRUE(wait_phase(b, "Validating"));
  // a again (another entity): the same node counts once, and its incident absorbs nothing new.
  health(a, {{"xid/GPU-0", "Fatal"}, {"xid/GPU-1", "Fatal"}});
  health(c, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_until(
      [&] {
        auto p = client_->get(api::sentinel_policies(), "", policy_);
        return p.get_string({"status", "breaker", "state"}) == "Tripped";
      },
      20s));
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(phase(c), "");  // refused: no incident
  EXPECT_FALSE(kube::node::unschedulable(get_node(c)));
  auto pol = client_->get(api::sentinel_policies(), "", policy_);
  EXPECT_EQ(pol.get({"status", "breaker", "uniqueNodes"})->as_int(), 2);
  const core::Value* cond = kube::find_condition(pol, "BreakerTripped");
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ(cond->get_string({"status"}), "True");
  // Releases go on while it is tripped. (GPU-1 is still Fatal, so a may get a new incident right
  // after the release: a node already counted in the window is not refused. Look for the
  // released one among all of a's incidents, not only the newest.)
  answer_validation(a, "Passed");
  ASSERT_TRUE(wait_until(
      [&] {
        for (const core::Value& i : incidents(a))
          if (i.get_string({"status", "phase"}) == "Released") return true;
        return false;
      },
      20s))
      << a << ": no incident reached Released; newest phase " << phase(a);

  // Restart: the state comes back from the policy's status.
  stop_manager();
  start_manager();
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(phase(c), "");
  EXPECT_EQ(client_->get(api::sentinel_policies(), "", policy_)
                .get_string({"status", "breaker", "state"}),
            "Tripped");

  // The verb: what `gpufleet sentinel reset-breaker` writes.
  core::Value patch;
  patch["metadata"]["annotations"][kResetBreakerAnnotation] = "test-reset-1";
  client_->patch(api::sentinel_policies(), "", policy_, kube::PatchType::Merge, patch);
  ASSERT_TRUE(wait_phase(c, "Validating", 30s));
  EXPECT_TRUE(kube::node::unschedulable(get_node(c)));
}

TEST_F(SentinelTest, BreakerWindowExpires) {
  create_policy(
      "  drain: {enabled: false}\n  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 2, windowSeconds: 8}\n");
  const std::string a = node("a"), b = node("b"), c = node("c");
  start_manager();
  health(a, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(a, "Validating"));
  // a leaves the window. The window is long enough that b is still in it when c is admitted
  // on a loaded machine (with 3 s, a slow admission of c saw b expire too).
  std::this_thread::sleep_for(8500ms);
  health(b, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(b, "Validating"));
  health(c, {{"xid/GPU-0", "Fatal"}});
  // Without the expiry c would be the third unique node and refused; a left the window.
  ASSERT_TRUE(wait_phase(c, "Validating"));
  ASSERT_TRUE(wait_until(
      [&] {
        auto p = client_->get(api::sentinel_policies(), "", policy_);
        const core::Value* u = p.get({"status", "breaker", "uniqueNodes"});
        return u != nullptr && u->as_int() == 2;
      },
      15s));
}

TEST_F(SentinelTest, DrainModesPdbDeadlinesAndStuckTerminating) {
  create_policy(
      "  drain:\n"
      "    deadlineSeconds: 4\n"
      "    terminatingTimeoutSeconds: 1\n"
      "    modes:\n"
      "    - {mode: AllowCompletion, timeoutSeconds: 3, selector: {matchLabels: {workload: "
      "training}}}\n"
      "    - {mode: Delete, timeoutSeconds: 2, selector: {matchLabels: {workload: batch}}}\n"
      "  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 100}\n");
  const std::string n = node("d");
  kube::testing::TestNamespace ns(*client_, "sn-d");
  pod(n, ns.name(), "web", {{"app", "web"}});              // Evict
  pod(n, ns.name(), "train", {{"workload", "training"}});  // AllowCompletion 3 s
  pod(n, ns.name(), "batch", {{"workload", "batch"}});     // Delete after 2 s
  pod(n, "kube-system", prefix_ + "-sys");                 // system: never
  // A PDB that forbids evicting the batch pod: only the Delete deadline gets it out.
  core::Value pdb;
  pdb["apiVersion"] = "policy/v1";
  pdb["kind"] = "PodDisruptionBudget";
  pdb["metadata"]["name"] = "batch";
  pdb["metadata"]["namespace"] = ns.name();
  pdb["spec"]["maxUnavailable"] = 0;
  pdb["spec"]["selector"]["matchLabels"]["workload"] = "batch";
  client_->create(kube::resources::pod_disruption_budgets(), pdb);
  start_manager();
  const auto t0 = std::chrono::steady_clock::now();
  health(n, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Draining"));
  // The evicted pod goes Terminating (no kubelet finishes it), then is force-deleted.
  ASSERT_TRUE(wait_until([&] { return pod_gone(ns.name(), "web"); }, 20s));
  EXPECT_FALSE(pod_gone(ns.name(), "train") && std::chrono::steady_clock::now() - t0 < 3s);
  ASSERT_TRUE(wait_phase(n, "Validating", 30s));
  EXPECT_TRUE(pod_gone(ns.name(), "train"));
  EXPECT_TRUE(pod_gone(ns.name(), "batch"));
  EXPECT_FALSE(pod_gone("kube-system", prefix_ + "-sys"));
  auto rem = incidents(n).back();
  EXPECT_GE(
      rem.get({"status", "drain", "forced"}) ? rem.get({"status", "drain", "forced"})->as_int() : 0,
      1)
      << core::to_json(rem);
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  client_->remove(kube::resources::pods(), "kube-system", prefix_ + "-sys", now);
}

TEST_F(SentinelTest, ManualUncordonCancelsTheIncident) {
  create_policy(
      "  drain: {modes: [{mode: AllowCompletion, timeoutSeconds: 600, selector: {matchLabels: "
      "{workload: training}}}]}\n"
      "  validation: {newNodes: false}\n  breaker: {maxNodes: 100}\n");
  const std::string n = node("u");
  kube::testing::TestNamespace ns(*client_, "sn-u");
  pod(n, ns.name(), "train", {{"workload", "training"}});
  start_manager();
  health(n, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Draining"));
  core::Value patch;
  patch["spec"]["unschedulable"] = core::Value(nullptr);  // `kubectl uncordon`
  client_->patch(kube::resources::nodes(), "", n, kube::PatchType::Merge, patch);
  ASSERT_TRUE(wait_phase(n, "Cancelled"));
  core::Value obj = get_node(n);
  EXPECT_FALSE(kube::node::unschedulable(obj));
  EXPECT_EQ(kube::annotation_of(obj, "gpufleet.io/cordon-owners"), "");
  EXPECT_FALSE(kube::node::has_taint(obj, "nvidia.com/gpu-error"));
  // The person's decision holds: the same fault does not quarantine the node again...
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(incidents(n).size(), 1u);
  EXPECT_FALSE(kube::node::unschedulable(get_node(n)));
  // ...a new one does.
  health(n, {{"xid/GPU-0", "Fatal"}, {"xid/GPU-5", "Fatal"}});
  ASSERT_TRUE(wait_until([&] { return incidents(n).size() == 2; }, 15s));
  EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
}

TEST_F(SentinelTest, NodeDeletedMidDrainFailsTheIncident) {
  create_policy(
      "  drain: {modes: [{mode: AllowCompletion, timeoutSeconds: 600, selector: {matchLabels: "
      "{workload: training}}}]}\n"
      "  validation: {newNodes: false}\n  breaker: {maxNodes: 100}\n");
  const std::string n = node("del");
  kube::testing::TestNamespace ns(*client_, "sn-del");
  pod(n, ns.name(), "train", {{"workload", "training"}});
  start_manager();
  health(n, {{"xid/GPU-0", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Draining"));
  client_->remove(kube::resources::nodes(), "", n);
  ASSERT_TRUE(wait_phase(n, "Failed"));
  EXPECT_NE(incidents(n).back().get_string({"status", "message"}).find("deleted"),
            std::string::npos);
}

// `gpufleet controller --controllers=sentinel` killed with SIGKILL in the middle of an
// incident: the restarted controller resumes it; one incident, released once.
TEST_F(SentinelTest, ControllerKilledMidIncidentResumes) {
  create_policy(
      "  drain: {deadlineSeconds: 600, terminatingTimeoutSeconds: 1, modes: [{mode: "
      "AllowCompletion, timeoutSeconds: 4, selector: {matchLabels: {workload: training}}}]}\n"
      "  validation: {newNodes: false}\n  breaker: {maxNodes: 100}\n");
  const std::string n = node("k");
  kube::testing::TestNamespace ns(*client_, "sn-k");
  pod(n, ns.name(), "train", {{"workload", "training"}});
  const std::string log = ::testing::TempDir() + prefix_ + "-controller.log";
  auto args = [&] {
    return std::vector<std::string>{controller::testing::gpufleet_bin(),
                                    "controller",
                                    "--controllers=sentinel",
                                    "--metrics-addr",
                                    "",
                                    "--set",
                                    "sentinel.policy=" + policy_,
                                    "--kubeconfig",
                                    kube::testing::env_or_empty("KUBECONFIG")};
  };
  {
    controller::testing::Child first(args(), log + ".1");
    health(n, {{"xid/GPU-0", "Fatal"}});
    ASSERT_TRUE(wait_phase(n, "Draining", 30s));
    first.signal(SIGKILL);
    ASSERT_TRUE(first.wait(10s).has_value());
  }
  controller::testing::Child second(args(), log + ".2");
  ASSERT_TRUE(wait_phase(n, "Validating", 40s)) << read_file(log + ".2");
  EXPECT_TRUE(pod_gone(ns.name(), "train"));
  answer_validation(n, "Passed");
  ASSERT_TRUE(wait_phase(n, "Released", 30s));
  EXPECT_EQ(incidents(n).size(), 1u);
  EXPECT_FALSE(kube::node::unschedulable(get_node(n)));
}

// A policy whose one rule cordons Fatal xid entities and asks for a reboot (drain off: the
// incident goes straight to Remediating, or to Validating when its action was lost).
void create_reboot_policy(kube::Client& client, const std::string& name) {
  client.create(api::sentinel_policies(),
                core::parse_yaml("apiVersion: gpufleet.io/v1alpha1\nkind: SentinelPolicy\n"
                                 "metadata: {name: " +
                                 name +
                                 "}\nspec:\n  rules:\n"
                                 "  - {name: xid-reboot, when: \"event.check == 'xid' && "
                                 "event.state == 'Fatal'\", cordon: true, remediate: reboot}\n" +
                                 kNoDrain));
}

// A crash between the cordon and the incident's create leaves only the quarantine annotation
// naming the incident: the restarted controller creates that incident with the rules that
// match its entities and their action (an empty one would skip the remediation).
TEST_F(SentinelTest, CordonWithoutIncidentIsRecoveredWithItsRulesAndAction) {
  create_reboot_policy(*client_, policy_);
  const std::string n = node("rec", true, "sentinel");
  health(n, {{"xid/GPU-0", "Fatal"}});
  QuarantineRecord rec;
  rec.cordoned = true;
  rec.entities = {"xid/GPU-0"};
  rec.incident = n + "-crash";
  core::Value patch;
  patch["metadata"]["annotations"][std::string(kQuarantineAnnotation)] = rec.to_annotation();
  client_->patch(kube::resources::nodes(), "", n, kube::PatchType::Merge, patch);
  start_manager();
  ASSERT_TRUE(wait_phase(n, "Remediating"));
  auto items = incidents(n);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(kube::name_of(items[0]), rec.incident);
  EXPECT_EQ(items[0].get_string({"spec", "action"}), "reboot") << core::to_json(items[0]);
  EXPECT_EQ(core::to_json(*items[0].get({"spec", "rules"})), "[\"xid-reboot\"]");
  EXPECT_EQ(core::to_json(*items[0].get({"spec", "entities"})), "[\"xid/GPU-0\"]");
}

// A replacement provider that records what it was asked and leaves it pending: the cloud's
// side is not what these tests look at (sentinel_remed_replace carries one out).
struct RecordingProvider final : ReplacementProvider {
  std::mutex mu;
  std::vector<ReplacementRequest> asked;
  void request(const ReplacementRequest& r) override {
    std::lock_guard lock(mu);
    for (const auto& a : asked)
      if (a.incident == r.incident && a.attempt == r.attempt) return;
    asked.push_back(r);
  }
  ReplacementStatus poll(const ReplacementRequest&) override { return {}; }
  std::size_t count() {
    std::lock_guard lock(mu);
    return asked.size();
  }
};

// Issue 12: a GPU reset the agent reports failed escalates to a reboot — after the controller
// was killed between the failure and the reboot request (level-triggered from the incident's
// status), and only once the DisruptionBudget has room in the node's domain.
TEST_F(SentinelTest, FailedGpuResetEscalatesToARebootWithinTheBudgetAfterAKill) {
  create_policy(
      "  - {name: ecc, when: \"event.check == 'gpu-nvml' && event.state == 'Fatal'\", cordon: "
      "true, remediate: gpu-reset}\n"
      "  drain: {enabled: false}\n"
      "  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 100}\n"
      "  remediation: {maxAttempts: 1, timeoutSeconds: 600, settleSeconds: 600}\n");
  const std::string rack = prefix_ + "-rack";
  const std::string n = node("reset");
  const std::string other = node("other");
  for (const auto& x : {n, other}) {
    core::Value patch;
    patch["metadata"]["labels"]["sentinel-test/rack"] = rack;
    client_->patch(kube::resources::nodes(), "", x, kube::PatchType::Merge, patch);
  }
  node_status(n, "boot-1");
  node_status(other, "boot-1");
  const std::string log = ::testing::TempDir() + prefix_ + "-escalate.log";
  const std::vector<std::string> args{controller::testing::gpufleet_bin(),
                                      "controller",
                                      "--controllers=sentinel",
                                      "--metrics-addr",
                                      "",
                                      "--set",
                                      "sentinel.policy=" + policy_,
                                      "--kubeconfig",
                                      kube::testing::env_or_empty("KUBECONFIG")};
  std::string incident;
  {
    controller::testing::Child first(args, log + ".1");
    health(n, {{"gpu-nvml/GPU-5a1e", "Fatal"}});
    ASSERT_TRUE(wait_phase(n, "Remediating", 30s)) << read_file(log + ".1");
    ASSERT_TRUE(
        wait_until([&] { return request_of(n).get_string({"action"}) == "gpu-reset"; }, 20s))
        << read_file(log + ".1");
    first.signal(SIGKILL);
    ASSERT_TRUE(first.wait(10s).has_value());
  }
  core::Value req = request_of(n);
  incident = std::string(req.get_string({"incident"}));
  EXPECT_EQ(req.get({"attempt"})->as_int(), 1);
  EXPECT_EQ(core::to_json(*req.get({"gpus"})), "[\"GPU-5a1e\"]");
  core::Value rem = incidents(n).back();
  EXPECT_EQ(rem.get({"status", "action", "request"})->as_int(), 1);

  // While the controller is down: the rack gets full (another node out in it) and the agent
  // reports the reset failed.
  core::Value cordon;
  cordon["spec"]["unschedulable"] = true;
  client_->patch(kube::resources::nodes(), "", other, kube::PatchType::Merge, cordon);
  client_->create(
      controller::disruption_budgets(),
      core::parse_yaml("apiVersion: gpufleet.io/v1alpha1\nkind: DisruptionBudget\n"
                       "metadata: {name: default}\nspec: {maxUnavailable: 1000, "
                       "topologyKey: sentinel-test/rack, maxUnavailablePerDomain: 1}\n"));
  struct DropBudget {
    kube::Client& c;
    ~DropBudget() {
      try {
        c.remove(controller::disruption_budgets(), "", "default");
      } catch (const std::exception&) {
      }
    }
  } drop{*client_};
  agent_reports(n, incident, 1, "gpu-reset", "Failed",
                "nvidia-smi exited 255: GPU 00000000:B3:00.0 is in use by another client");

  controller::testing::Child second(args, log + ".2");
  // The reboot waits for room in the rack; the reset's failure is not forgotten meanwhile.
  ASSERT_TRUE(wait_until(
      [&] {
        return incidents(n).back().get_string({"status", "waitingFor"}) == "budget";
      },
      30s))
      << core::to_json(incidents(n).back()) << read_file(log + ".2");
  rem = incidents(n).back();
  EXPECT_EQ(rem.get_string({"status", "action", "type"}), "gpu-reset");
  EXPECT_NE(rem.get_string({"status", "message"}).find(other), std::string::npos)
      << core::to_json(rem);
  EXPECT_EQ(request_of(n).get_string({"action"}), "gpu-reset");

  // Room again (the other node left the rack): the reboot goes, as request 2 (the agent takes
  // each number once), attempt 1.
  client_->remove(kube::resources::nodes(), "", other);
  ASSERT_TRUE(wait_until([&] { return request_of(n).get_string({"action"}) == "reboot"; }, 30s))
      << core::to_json(incidents(n).back()) << read_file(log + ".2");
  req = request_of(n);
  EXPECT_EQ(req.get_string({"incident"}), incident);
  EXPECT_EQ(req.get({"attempt"})->as_int(), 2);
  EXPECT_EQ(req.find("gpus"), nullptr);
  rem = incidents(n).back();
  EXPECT_EQ(rem.get_string({"status", "action", "type"}), "reboot");
  EXPECT_EQ(rem.get({"status", "action", "attempt"})->as_int(), 1);
  EXPECT_EQ(rem.get({"status", "action", "request"})->as_int(), 2);
  EXPECT_EQ(rem.get_string({"status", "escalatedFrom"}), "gpu-reset");
  EXPECT_EQ(rem.get({"status", "waitingFor"}), nullptr);
  const core::Value* esc = rem.get({"status", "escalations"});
  ASSERT_TRUE(esc != nullptr && esc->size() == 1) << core::to_json(rem);
  EXPECT_EQ((*esc)[0].get_string({"from"}), "gpu-reset");
  EXPECT_EQ((*esc)[0].get_string({"to"}), "reboot");
  EXPECT_EQ((*esc)[0].get_string({"reason"}), "ActionFailed");
  EXPECT_NE((*esc)[0].get_string({"message"}).find("is in use by another client"),
            std::string::npos);
  const core::Value* cond = kube::find_condition(rem, "Escalated");
  ASSERT_NE(cond, nullptr) << core::to_json(rem);
  EXPECT_EQ(cond->get_string({"status"}), "True");
  EXPECT_EQ(cond->get_string({"reason"}), "ActionFailed");
  EXPECT_NE(rem.get_string({"status", "message"}).find("gpu-reset attempts used up"),
            std::string::npos);
  ASSERT_TRUE(wait_until([&] { return !node_events(n, "RemediationEscalated").empty(); }, 15s));

  // The reboot happens (a new boot id) and fixes the GPU: validated, released, one incident.
  node_status(n, "boot-2");
  health(n, {{"gpu-nvml/GPU-5a1e", "Healthy"}});
  ASSERT_TRUE(wait_phase(n, "Validating", 30s)) << read_file(log + ".2");
  answer_validation(n, "Passed");
  ASSERT_TRUE(wait_phase(n, "Released", 30s));
  EXPECT_EQ(incidents(n).size(), 1u);
  EXPECT_EQ(request_of(n).get({"attempt"})->as_int(), 2);  // nothing asked after the reboot
}

// The whole chain on one incident: a reset the agent finished whose GPU stays faulty past the
// settle time → reboot; the agent reports the reboot failed → replacement (whenRebootFails).
TEST_F(SentinelTest, PersistingFaultAfterResetEscalatesToRebootThenReplace) {
  create_policy(
      "  - {name: ecc, when: \"event.check == 'gpu-nvml' && event.state == 'Fatal'\", cordon: "
      "true, remediate: gpu-reset}\n"
      "  drain: {enabled: false}\n"
      "  validation: {newNodes: false}\n"
      "  breaker: {maxNodes: 100}\n"
      "  remediation: {maxAttempts: 1, timeoutSeconds: 600, settleSeconds: 2, replacement: "
      "{provider: test-cloud, whenRebootFails: true}}\n");
  const std::string n = node("chain");
  node_status(n, "boot-1");
  auto cloud = std::make_shared<RecordingProvider>();
  start_manager({{"test-cloud", cloud}});
  health(n, {{"gpu-nvml/GPU-77aa", "Fatal"}});
  ASSERT_TRUE(wait_until([&] { return request_of(n).get_string({"action"}) == "gpu-reset"; }, 30s));
  const std::string incident(request_of(n).get_string({"incident"}));
  agent_reports(n, incident, 1, "gpu-reset", "Succeeded");
  // Done by the agent: sentinel waits settleSeconds for the GPU to report healthy...
  ASSERT_TRUE(wait_until(
      [&] {
        return !incidents(n).back().get_string({"status", "action", "finishedAt"}).empty();
      },
      15s))
      << core::to_json(incidents(n).back());
  EXPECT_EQ(request_of(n).get_string({"action"}), "gpu-reset");
  // ...it does not: a reboot, request 2.
  ASSERT_TRUE(wait_until([&] { return request_of(n).get_string({"action"}) == "reboot"; }, 20s))
      << core::to_json(incidents(n).back());
  EXPECT_EQ(request_of(n).get({"attempt"})->as_int(), 2);
  core::Value rem = incidents(n).back();
  ASSERT_EQ(rem.get({"status", "escalations"})->size(), 1u);
  EXPECT_EQ((*rem.get({"status", "escalations"}))[0].get_string({"reason"}), "FaultPersisted");
  EXPECT_NE((*rem.get({"status", "escalations"}))[0]
                .get_string({"message"})
                .find("gpu-nvml/GPU-77aa still faulty 2 s after the agent reported the reset done"),
            std::string::npos)
      << core::to_json(rem);

  // The reboot command fails on the node: at once (not at the timeout) a replacement.
  agent_reports(n, incident, 2, "reboot", "Failed", "systemctl: Failed to reboot: Access denied");
  ASSERT_TRUE(wait_until([&] { return cloud->count() == 1; }, 20s))
      << core::to_json(incidents(n).back());
  rem = incidents(n).back();
  EXPECT_EQ(rem.get_string({"status", "action", "type"}), "replace");
  EXPECT_EQ(rem.get_string({"status", "action", "provider"}), "test-cloud");
  EXPECT_EQ(rem.get_string({"status", "escalatedFrom"}), "reboot");
  const core::Value& esc = *rem.get({"status", "escalations"});
  ASSERT_EQ(esc.size(), 2u) << core::to_json(rem);
  EXPECT_EQ(esc[1].get_string({"from"}), "reboot");
  EXPECT_EQ(esc[1].get_string({"to"}), "replace");
  EXPECT_EQ(esc[1].get_string({"reason"}), "ActionFailed");
  EXPECT_NE(esc[1].get_string({"message"}).find("Access denied"), std::string::npos);
  {
    std::lock_guard lock(cloud->mu);
    EXPECT_EQ(cloud->asked[0].incident, incident);
    EXPECT_EQ(cloud->asked[0].attempt, 1);
    EXPECT_EQ(cloud->asked[0].node_uid, std::string(kube::uid_of(get_node(n))));
  }
  EXPECT_EQ(request_of(n).get_string({"action"}), "reboot");  // the agent is not asked again
  EXPECT_EQ(phase(n), "Remediating");
}

// Issue 12: a pattern rule's `escalate: replace` (the same GPU Fatal 3 times within 24 h in
// NodeHealth's history) makes the incident's action replace when a provider is configured,
// and records why not when none is.
TEST_F(SentinelTest, RuleEscalationToReplaceIsActedOnOrSaysWhyNot) {
  const std::string repeat =
      "  - {name: xid-reboot, when: \"event.check == 'xid' && event.state == 'Fatal'\", "
      "remediate: reboot}\n"
      "  - {name: repeat-xid, escalate: replace, when: \"event.check == 'xid' && "
      "history.filter(h, h.check == 'xid' && h.entity == event.entity && h.state == 'Fatal' && "
      "h.ageSeconds < 86400).size() >= 3\"}\n";
  create_policy(repeat +
                "  drain: {enabled: false}\n"
                "  validation: {newNodes: false}\n"
                "  breaker: {maxNodes: 100}\n"
                "  remediation: {defaultAction: reboot, replacement: {provider: test-cloud}}\n");
  auto cloud = std::make_shared<RecordingProvider>();
  // Bursts of Fatal on GPU-aa: `recent` within the last day, and `old` ones 2 days ago.
  auto history = [&](const std::string& node, int recent, int old) {
    core::Value nh = client_->get(api::node_healths(), "", node);
    core::Value list = core::Value::list();
    std::int64_t id = 1;
    const auto now = std::chrono::system_clock::now();
    auto entry = [&](std::chrono::system_clock::duration ago) {
      core::Value h;
      h["recordId"] = id++;
      h["time"] =
          core::Timestamp::from_time_point(now - ago).to_rfc3339(core::TimestampPrecision::Seconds);
      h["check"] = "xid";
      h["entity"] = "GPU-aa";
      h["state"] = "Fatal";
      h["reason"] = "Xid79";
      list.push_back(h);
    };
    for (int i = 0; i < old; ++i) entry(std::chrono::hours(48 + i));
    for (int i = 0; i < recent; ++i) entry(std::chrono::hours(recent - i));
    nh["status"]["history"] = std::move(list);
    client_->update_status(api::node_healths(), nh);
  };
  const std::string hit = node("hit"), once = node("once");
  for (const auto& n : {hit, once}) health(n, {});
  history(hit, 3, 0);
  history(once, 2, 3);  // three more, but older than a day
  start_manager({{"test-cloud", cloud}});
  health(hit, {{"xid/GPU-aa", "Fatal"}});
  health(once, {{"xid/GPU-aa", "Fatal"}});
  ASSERT_TRUE(wait_until([&] { return cloud->count() == 1; }, 30s))
      << core::to_json(incidents(hit).back());
  core::Value rem = incidents(hit).back();
  EXPECT_EQ(rem.get_string({"spec", "action"}), "replace");
  EXPECT_EQ(rem.get_string({"spec", "escalation", "rule"}), "repeat-xid");
  EXPECT_EQ(rem.get_string({"spec", "escalation", "from"}), "reboot");
  EXPECT_EQ(rem.get_string({"spec", "escalation", "to"}), "replace");
  EXPECT_TRUE(rem.get({"spec", "escalation", "applied"})->as_bool());
  EXPECT_EQ(rem.get_string({"status", "action", "type"}), "replace");
  EXPECT_EQ(request_of(hit).find("action"), nullptr);  // no reboot asked of the agent
  ASSERT_TRUE(wait_phase(once, "Remediating"));
  rem = incidents(once).back();
  EXPECT_EQ(rem.get_string({"spec", "action"}), "reboot");
  EXPECT_EQ(rem.get({"spec", "escalation"}), nullptr);
  EXPECT_EQ(cloud->count(), 1u);
  ASSERT_TRUE(wait_until([&] { return !node_events(hit, "RemediationEscalated").empty(); }, 15s));

  // The same policy without a provider: the escalation is recorded as not applied, and why.
  stop_manager();
  core::Value pol = client_->get(api::sentinel_policies(), "", policy_);
  pol["spec"]["remediation"] = core::parse_yaml("{defaultAction: reboot}");
  client_->update(api::sentinel_policies(), pol);
  const std::string third = node("third");
  health(third, {});
  history(third, 4, 0);
  start_manager();
  health(third, {{"xid/GPU-aa", "Fatal"}});
  ASSERT_TRUE(wait_phase(third, "Remediating"));
  rem = incidents(third).back();
  EXPECT_EQ(rem.get_string({"spec", "action"}), "reboot");
  EXPECT_FALSE(rem.get({"spec", "escalation", "applied"})->as_bool());
  EXPECT_EQ(rem.get_string({"spec", "escalation", "message"}),
            "rule 'repeat-xid' escalates reboot to replace; not applied: "
            "spec.remediation.replacement.provider is not set; name the provider that replaces "
            "nodes, e.g. replacement: {provider: simulator}");
  // The reboot is asked right after its status write.
  EXPECT_TRUE(
      wait_until([&] { return request_of(third).get_string({"action"}) == "reboot"; }, 15s));
  ASSERT_TRUE(wait_until([&] { return !node_events(third, "EscalationNotApplied").empty(); }, 15s));
}

}  // namespace
}  // namespace gpufleet::sentinel
