// Validation by certify before the uncordon (spec.validation) end to end on kube-local + the
// simulator, the test playing certify (it writes the ValidationRequest's status, as
// tests/integration/sentinel/sentinel_env.sh's pass_validation does): a node whose change
// rebooted it stays cordoned until its request passes (a request deleted under it is asked
// again; a later change without an interrupt is not validated); a failed validation fails the
// node with certify's reason and trips the set's failure threshold.
#include <gtest/gtest.h>

#include <thread>

#include "api/resources.h"
#include "core/json.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg_env.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;

std::string set_yaml(const std::string& name, const std::string& nodes, const std::string& extra,
                     const std::string& packages) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
         "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
         "operator: In, values: " +
         nodes + "}\n" + extra + "  packages:\n" + packages;
}

std::string phase_of(HostPkgEnv& env, const std::string& set) {
  return std::string(env.get_set(set).get_string({"status", "phase"}));
}

std::optional<NodeRecord> record_of(HostPkgEnv& env, const std::string& node,
                                    const std::string& set) {
  return read_record(env.get_node(node), set).record;
}

// The one request of `node` once it shows (and its name is in the node's record).
std::string wait_for_request(HostPkgEnv& env, const std::string& node, const std::string& set) {
  std::string name;
  HostPkgEnv::eventually(
      [&] {
        auto vrs = env.validation_requests(node);
        if (vrs.size() != 1) return false;
        name = std::string(kube::name_of(vrs.front()));
        auto rec = record_of(env, node, set);
        return rec && rec->validation == name;
      },
      60s);
  return name;
}

TEST(HostPkgValidation, NodeStaysCordonedUntilCertifyPasses) {
  HostPkgEnv env(1);
  env.pass_validations = false;
  const std::string node = env.node(0);
  const std::string set = "validate-hold";
  const std::string boot = env.sim().boot_id_of(node);
  const std::string pkg =
      "    drv:\n      version: 1.0.0\n      image: example.com/drv\n"
      "      interrupt: {type: reboot}\n      configMap: {a.conf: \"1\"}\n";
  env.apply(set_yaml(set, env.node_list(0, 1), "", pkg));

  const std::string vr = wait_for_request(env, node, set);
  ASSERT_FALSE(vr.empty()) << "no ValidationRequest for " << node;
  core::Value req = env.validation_requests(node).front();
  EXPECT_EQ(req.get_string({"spec", "requester"}), "hostpkg");
  ASSERT_NE(req.get({"spec", "categories"}), nullptr);
  EXPECT_EQ(core::to_json(*req.get({"spec", "categories"})), R"(["diagnostics/dcgm-r1"])");
  EXPECT_EQ(core::to_json(*req.get({"spec", "nodeNames"})), "[\"" + node + "\"]");
  EXPECT_EQ(req.get_string({"metadata", "labels", "hostpkg.gpufleet.io/set"}), set);
  const core::Value* owners = req.get({"metadata", "ownerReferences"});
  ASSERT_TRUE(owners != nullptr && owners->is_list() && owners->size() == 1);
  EXPECT_EQ((*owners)[0].get_string({"kind"}), "HostPackageSet");
  EXPECT_EQ((*owners)[0].get_string({"name"}), set);
  EXPECT_FALSE(req.get_string({"spec", "deadline"}).empty());
  // The reboot happened; the node waits on certify, cordoned, and the status says so.
  EXPECT_NE(env.sim().boot_id_of(node), boot);
  ASSERT_TRUE(
      HostPkgEnv::eventually([&] { return status_int(env.get_set(set), "validating") == 1; }, 20s))
      << core::to_json(*env.get_set(set).get({"status"}));
  std::string messages = core::to_json(*env.get_set(set).get({"status", "nodeMessages"}));
  EXPECT_NE(messages.find(node + ": Validating: waiting for certify (ValidationRequest " + vr),
            std::string::npos)
      << messages;
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(node))) << "uncordoned before certify";
  EXPECT_EQ(record_of(env, node, set)->state, NodeState::InProgress);
  EXPECT_EQ(phase_of(env, set), "Progressing");

  // A request deleted under the node is asked again, under the same name.
  env.client().remove(api::validation_requests(), "", vr);
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        auto vrs = env.validation_requests(node);
        return vrs.size() == 1 && kube::name_of(vrs.front()) == vr &&
               vrs.front().get({"metadata", "deletionTimestamp"}) == nullptr &&
               vrs.front().get_string({"status", "phase"}).empty();
      },
      30s));
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(node)));

  env.answer_validation(vr, node, "Passed");
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_of(env, set) == "Complete"; }, 30s))
      << core::to_json(*env.get_set(set).get({"status"}));
  EXPECT_FALSE(kube::node::unschedulable(env.get_node(node)));
  auto rec = record_of(env, node, set);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->state, NodeState::Done);
  EXPECT_EQ(rec->validation, "");
  EXPECT_EQ(status_int(env.get_set(set), "validating"), 0);

  // A config-only change without an interrupt is not validated (when: Interrupting).
  env.apply(set_yaml(set, env.node_list(0, 1), "",
                     "    drv:\n      version: 1.0.0\n      image: example.com/drv\n"
                     "      interrupt: {type: reboot}\n      configMap: {a.conf: \"2\"}\n"));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        auto r = record_of(env, node, set);
        return r && r->state == NodeState::Done &&
               r->installed["drv"].config_hashes != rec->installed["drv"].config_hashes &&
               phase_of(env, set) == "Complete";
      },
      30s))
      << core::to_json(*env.get_set(set).get({"status"}));
  EXPECT_EQ(env.validation_requests(node).size(), 1U);
  EXPECT_FALSE(kube::node::unschedulable(env.get_node(node)));
  env.remove_set(set);
}

TEST(HostPkgValidation, FailedValidationFailsTheNodeAndTripsTheThreshold) {
  HostPkgEnv env(3);
  env.pass_validations = false;
  const std::string set = "validate-fail";
  env.apply(
      "apiVersion: gpufleet.io/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: validate-strict}"
      "\nspec:\n  default:\n    budget: {count: 1}\n"
      "    strategy: {fixed: {initialBatch: 1, failureThreshold: 1, safetyLimit: 0}}\n");
  env.apply(set_yaml(set, env.node_list(0, 3),
                     "  deploymentPolicy: validate-strict\n"
                     "  validation: {categories: [diagnostics/dcgm-r2], deadlineSeconds: 600}\n",
                     "    drv:\n      version: 1.0.0\n      image: example.com/drv\n"
                     "      interrupt: {type: reboot}\n"));
  // The first node of the batch (one at a time) asks certify.
  std::string node, vr;
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        for (int i = 0; i < 3; ++i) {
          auto vrs = env.validation_requests(env.node(i));
          if (vrs.empty()) continue;
          node = env.node(i);
          vr = std::string(kube::name_of(vrs.front()));
          auto rec = record_of(env, node, set);
          return rec && rec->validation == vr;
        }
        return false;
      },
      60s));
  EXPECT_EQ(core::to_json(*env.validation_requests(node).front().get({"spec", "categories"})),
            R"(["diagnostics/dcgm-r2"])");
  env.answer_validation(vr, node, "Failed", "diagnostics/dcgm-r2", "HardwareFailure",
                        "XID 79 on GPU 3");
  ASSERT_TRUE(HostPkgEnv::eventually([&] { return phase_of(env, set) == "Stopped"; }, 30s))
      << core::to_json(*env.get_set(set).get({"status"}));
  core::Value s = env.get_set(set);
  EXPECT_EQ(status_int(s, "failed"), 1);
  Cond stopped = condition(s, "Stopped");
  EXPECT_EQ(stopped.status, "True");
  EXPECT_NE(stopped.message.find(node), std::string::npos) << stopped.message;
  auto rec = record_of(env, node, set);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->state, NodeState::Failed);
  EXPECT_EQ(rec->failure, "validation: ValidationRequest " + vr +
                              " Failed: diagnostics/dcgm-r2: HardwareFailure: XID 79 on GPU 3");
  EXPECT_TRUE(kube::node::unschedulable(env.get_node(node))) << "a failed node stays out";
  // Stopped: no other node starts.
  std::this_thread::sleep_for(2s);
  for (int i = 0; i < 3; ++i) {
    if (env.node(i) == node) continue;
    EXPECT_FALSE(record_of(env, env.node(i), set).has_value()) << env.node(i);
    EXPECT_FALSE(kube::node::unschedulable(env.get_node(env.node(i)))) << env.node(i);
  }
  env.remove_set(set);
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
