// The API server, not the agent, enforces that a node's agent writes only its own node's
// objects (deploy/admission/agent-node-identity.yaml). Proven with a real pod-bound token:
// a ServiceAccount named gpufleet-agent, a Pod bound to simulated node A, a TokenRequest
// bound to that Pod (the token then carries node A's name), and the agent's real delivery
// path (Agent -> journal -> NodeHealthSink) writing node A's and node B's NodeHealth.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/agent.h"
#include "agent/nodehealth.h"
#include "integration/kube/test_env.h"
#include "kube/errors.h"
#include "support/source_paths.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;
using kube::testing::admin_config;
using kube::testing::unique_name;

const kube::ResourceId kNodes{"", "v1", "nodes", false};
const kube::ResourceId kPods{"", "v1", "pods", true};
const kube::ResourceId kServiceAccounts{"", "v1", "serviceaccounts", true};
const kube::ResourceId kClusterRoles{"rbac.authorization.k8s.io", "v1", "clusterroles", false};
const kube::ResourceId kClusterRoleBindings{"rbac.authorization.k8s.io", "v1",
                                            "clusterrolebindings", false};

std::string kubectl() {
  std::string bin = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  return ::system("kubectl version --client >/dev/null 2>&1") == 0 ? "kubectl" : bin + " kubectl";
}

// Runs a command, returns stdout (trimmed); fails the test on a non-zero exit.
std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + cmd);
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int rc = ::pclose(p);
  EXPECT_EQ(rc, 0) << cmd;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

core::Value object(std::string_view api_version, std::string_view kind, std::string_view name,
                   std::string_view ns = {}) {
  core::Value v = core::Value::map();
  v["apiVersion"] = std::string(api_version);
  v["kind"] = std::string(kind);
  v["metadata"]["name"] = std::string(name);
  if (!ns.empty()) v["metadata"]["namespace"] = std::string(ns);
  return v;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "agent-it-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

AgentOptions agent_for(const fs::path& root, const std::string& node) {
  AgentOptions o;
  o.node.identity.node_name = node;
  o.node.identity.boot_id = "boot-" + node;
  o.node.host_root = root / node;
  o.node.state_dir = root / node / "state";
  o.monitors = {"ib-port"};
  o.fsync = false;
  return o;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << text << "\n";
}

TEST(AgentIdentity, AgentOfNodeAIsDeniedNodeBAndAllowedItsOwn) {
  const std::string kc = kube::testing::env_or_empty("KUBECONFIG");
  const std::string k = kubectl() + " --kubeconfig " + kc;
  const std::string src = GPUFLEET_SOURCE_DIR;
  capture(k + " apply --server-side --force-conflicts --field-manager=agent-it -f " + src +
          "/deploy/crds/nodehealth.yaml");
  capture(k + " wait --for=condition=Established --timeout=30s crd/nodehealths.gpufleet.io");
  capture(k + " apply --server-side --force-conflicts --field-manager=agent-it -f " + src +
          "/deploy/admission/agent-node-identity.yaml");
  // The policy is cluster-wide: leaving it would make the next `helm install` of the chart
  // (recipe_bundle_verify) refuse to adopt an object Helm does not own.
  struct RemovePolicy {
    std::string cmd;
    ~RemovePolicy() { (void)::system(cmd.c_str()); }
  } remove_policy{k + " delete --ignore-not-found -f " + src +
                  "/deploy/admission/agent-node-identity.yaml >/dev/null 2>&1"};

  kube::Client admin(admin_config());
  kube::testing::TestNamespace ns(admin, "agent-id");
  const std::string node_a = unique_name("sim-node-a");
  const std::string node_b = unique_name("sim-node-b");
  for (const auto& n : {node_a, node_b}) admin.create(kNodes, object("v1", "Node", n));

  // The agent's ServiceAccount and the RBAC it gets in the chart for NodeHealth.
  admin.create(kServiceAccounts, object("v1", "ServiceAccount", "gpufleet-agent", ns.name()));
  const std::string role = unique_name("agent-it");
  auto cr = object("rbac.authorization.k8s.io/v1", "ClusterRole", role);
  cr["rules"].push_back(core::Value::map());
  auto& rule = cr["rules"].as_list()[0];
  rule["apiGroups"].push_back("gpufleet.io");
  rule["resources"].push_back("nodehealths");
  rule["resources"].push_back("nodehealths/status");
  for (const char* verb : {"get", "create", "update", "patch"}) rule["verbs"].push_back(verb);
  admin.create(kClusterRoles, cr);
  auto crb = object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", role);
  crb["roleRef"]["apiGroup"] = "rbac.authorization.k8s.io";
  crb["roleRef"]["kind"] = "ClusterRole";
  crb["roleRef"]["name"] = role;
  core::Value subject = core::Value::map();
  subject["kind"] = "ServiceAccount";
  subject["name"] = "gpufleet-agent";
  subject["namespace"] = ns.name();
  crb["subjects"].push_back(subject);
  admin.create(kClusterRoleBindings, crb);

  // The agent pod of node A (never runs: binding the token to it is what matters).
  auto pod = object("v1", "Pod", "gpufleet-agent-a", ns.name());
  pod["spec"]["nodeName"] = node_a;
  pod["spec"]["serviceAccountName"] = "gpufleet-agent";
  core::Value c = core::Value::map();
  c["name"] = "agent";
  c["image"] = "registry.invalid/gpufleet:test";
  pod["spec"]["containers"].push_back(c);
  admin.create(kPods, pod);
  const std::string token = capture(k + " -n " + ns.name() +
                                    " create token gpufleet-agent --bound-object-kind Pod"
                                    " --bound-object-name gpufleet-agent-a --duration 10m");
  ASSERT_FALSE(token.empty());
  kube::ClientConfig agent_config = admin_config();
  agent_config.client_cert_pem.clear();
  agent_config.client_key_pem.clear();
  agent_config.token = token;
  kube::Client as_agent_a(agent_config);

  TempDir tmp;
  for (const auto& n : {node_a, node_b})
    write(tmp.path() / n / "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
  NodeHealthSink sink(as_agent_a);

  // The policy takes effect a moment after it is created: wait until B is denied.
  Agent impostor(agent_for(tmp.path(), node_b), sink);
  std::string denial, what;
  for (int i = 0; i < 100 && denial.empty(); ++i) {
    try {
      sink.deliver(impostor.identity(), std::vector<Record>{{1, "agent.boot", "{}"}});
      admin.remove(kNodeHealthResource, "", node_b);  // admitted before the policy was active
    } catch (const kube::ApiError& e) {
      if (e.is(kube::Reason::Forbidden)) {
        denial = e.server_message();
        what = e.what();
        // The client names the policy and its words, not RBAC.
        ASSERT_TRUE(e.admission_denial().has_value()) << what;
        EXPECT_EQ(e.admission_denial()->name, "gpufleet-agent-node-identity");
        // While the policy propagates, the create can pass and the status write after it be
        // denied: that object was admitted before the policy was active too.
        if (admin.try_get(kNodeHealthResource, "", node_b))
          admin.remove(kNodeHealthResource, "", node_b);
      }
    }
    if (denial.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(denial.empty()) << "node A's agent was never denied node B's NodeHealth";
  EXPECT_NE(denial.find("the agent on node '" + node_a +
                        "' may write only its own node's nodehealths ('" + node_a + "'), not '" +
                        node_b + "'"),
            std::string::npos)
      << denial;
  EXPECT_NE(what.find("denied by ValidatingAdmissionPolicy 'gpufleet-agent-node-identity' "
                      "(binding 'gpufleet-agent-node-identity'): the agent on node '" +
                      node_a + "'"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find("lack RBAC permission"), std::string::npos) << what;

  // The impostor's records stay in its journal: denied is not delivered, nothing is lost.
  impostor.tick(Clock::now());
  EXPECT_GT(impostor.stats().delivery_failures, 0u);
  EXPECT_EQ(impostor.stats().journal.acked_id, 0u);
  EXPECT_FALSE(admin.try_get(kNodeHealthResource, "", node_b).has_value());

  // An UPDATE of node B's existing object (made by an admin) is denied too.
  auto nh_b = object("gpufleet.io/v1alpha1", "NodeHealth", node_b);
  nh_b["spec"]["nodeName"] = node_b;
  admin.create(kNodeHealthResource, nh_b);
  try {
    sink.deliver(impostor.identity(), std::vector<Record>{{1, "agent.boot", R"({"bootId":"x"})"}});
    ADD_FAILURE() << "node A's agent updated node B's NodeHealth status";
  } catch (const kube::ApiError& e) {
    EXPECT_TRUE(e.is(kube::Reason::Forbidden)) << e.what();
  }

  // Node A's own agent: allowed, through the whole agent path.
  Agent own(agent_for(tmp.path(), node_a), sink);
  own.tick(Clock::now());
  auto nh_a = admin.get(kNodeHealthResource, "", node_a);
  EXPECT_EQ(nh_a.get_string({"status", "state"}), "Fatal");
  EXPECT_EQ(nh_a.get_string({"status", "bootID"}), "boot-" + node_a);
  EXPECT_EQ(own.stats().journal.acked_id, own.stats().journal.last_id);
  const auto applied = nh_a.get({"status", "lastAppliedRecordId"})->as_int();
  EXPECT_EQ(applied, static_cast<std::int64_t>(own.stats().journal.last_id));

  // Redelivery of applied records is a no-op on the server (resourceVersion unchanged).
  const std::string rv = std::string(nh_a.get_string({"metadata", "resourceVersion"}));
  sink.deliver(own.identity(), std::vector<Record>{{1, "agent.boot", R"({"bootId":"old"})"}});
  EXPECT_EQ(admin.get(kNodeHealthResource, "", node_a).get_string({"metadata", "resourceVersion"}),
            rv);

  // The CRD refuses a mark that moves back (a stale writer cannot undo applied records).
  auto stale = admin.get(kNodeHealthResource, "", node_a);
  stale["status"]["lastAppliedRecordId"] = 0;
  try {
    admin.update_status(kNodeHealthResource, stale);
    ADD_FAILURE() << "lastAppliedRecordId moved back";
  } catch (const kube::ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("must not decrease"), std::string::npos) << e.what();
  }

  for (const auto& n : {node_a, node_b}) {
    admin.remove(kNodeHealthResource, "", n);
    admin.remove(kNodes, "", n);
  }
  admin.remove(kClusterRoleBindings, "", role);
  admin.remove(kClusterRoles, "", role);
}

}  // namespace
}  // namespace gpufleet::agent
