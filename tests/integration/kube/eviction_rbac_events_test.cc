// Eviction against a PodDisruptionBudget, RBAC denials, and the event recorder.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "core/errors.h"
#include "kube/api/objects.h"
#include "kube/events.h"
#include "test_env.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using testing::admin_config;
using testing::env_or_empty;
using ::testing::HasSubstr;
using testing::run_command;
using testing::TestNamespace;
using testing::unique_name;

// There are no kubelets in kube-local: a Node object stands in for one, and pod status is
// set through the status subresource the way a kubelet would.
class FakeNode {
 public:
  explicit FakeNode(Client& client) : client_(client), name_(unique_name("kube-it-node")) {
    core::Value n;
    n["apiVersion"] = "v1";
    n["kind"] = "Node";
    n["metadata"]["name"] = name_;
    client_.create(resources::nodes(), n);
  }
  ~FakeNode() {
    try {
      client_.remove(resources::nodes(), "", name_);
    } catch (const std::exception&) {
    }
  }
  const std::string& name() const { return name_; }

 private:
  Client& client_;
  std::string name_;
};

void create_running_pod(Client& client, const std::string& ns, const std::string& name,
                        const std::string& node) {
  core::Value pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"]["name"] = name;
  pod["metadata"]["namespace"] = ns;
  pod["metadata"]["labels"]["app"] = "guarded";
  pod["spec"]["nodeName"] = node;
  core::Value c;
  c["name"] = "main";
  c["image"] = "registry.k8s.io/pause:3.10";
  pod["spec"]["containers"].push_back(c);
  core::Value created = client.create(resources::pods(), pod);
  std::string now = "2026-01-01T00:00:00Z";
  core::Value& st = created["status"];
  st["phase"] = "Running";
  st.as_map().erase("conditions");
  for (const char* type : {"PodScheduled", "Initialized", "ContainersReady", "Ready"}) {
    core::Value cond;
    cond["type"] = type;
    cond["status"] = "True";
    cond["lastTransitionTime"] = now;
    st["conditions"].push_back(cond);
  }
  client.update_status(resources::pods(), created);
}

core::Value wait_for_pdb(Client& client, const std::string& ns, const std::string& name,
                         std::int64_t allowed) {
  core::Value b;
  for (int i = 0; i < 300; ++i) {
    b = client.get(resources::pod_disruption_budgets(), ns, name);
    const core::Value* observed = b.get({"status", "observedGeneration"});
    const core::Value* gen = b.get({"metadata", "generation"});
    if (observed && gen && *observed == *gen && pdb::expected_pods(b) == 2 &&
        pdb::disruptions_allowed(b) == allowed) {
      return b;
    }
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "PDB " << name << " never allowed " << allowed << " disruptions";
  return b;
}

TEST(Eviction, BlockedByDisruptionBudgetThenAllowed) {
  Client client(admin_config());
  TestNamespace ns(client);
  // Pods are admitted only once the serviceaccount controller made the namespace's default SA.
  for (int i = 0; i < 300 && !client.try_get(resources::service_accounts(), ns.name(), "default");
       ++i) {
    std::this_thread::sleep_for(100ms);
  }
  FakeNode node(client);
  create_running_pod(client, ns.name(), "p1", node.name());
  create_running_pod(client, ns.name(), "p2", node.name());
  core::Value budget;
  budget["apiVersion"] = "policy/v1";
  budget["kind"] = "PodDisruptionBudget";
  budget["metadata"]["name"] = "guard";
  budget["metadata"]["namespace"] = ns.name();
  budget["spec"]["minAvailable"] = 2;
  budget["spec"]["selector"]["matchLabels"]["app"] = "guarded";
  client.create(resources::pod_disruption_budgets(), budget);
  wait_for_pdb(client, ns.name(), "guard", 0);

  DeleteOptions now;
  now.grace_period_seconds = 0;
  try {
    client.evict(ns.name(), "p1", now);
    FAIL() << "eviction should be blocked";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::EvictionBlocked)) << e.what();
    EXPECT_EQ(e.code(), 429);
    EXPECT_THAT(e.what(), HasSubstr("disruption budget"));
  }
  EXPECT_TRUE(client.try_get(resources::pods(), ns.name(), "p1").has_value());

  core::Value relax;
  relax["spec"]["minAvailable"] = 1;
  client.patch(resources::pod_disruption_budgets(), ns.name(), "guard", PatchType::Merge, relax);
  wait_for_pdb(client, ns.name(), "guard", 1);
  client.evict(ns.name(), "p1", now);
  auto gone = client.try_get(resources::pods(), ns.name(), "p1");
  EXPECT_TRUE(!gone || gone->get({"metadata", "deletionTimestamp"}) != nullptr);
  // Clean up: no kubelet will confirm graceful deletion, so delete at once.
  client.remove(resources::pods(), ns.name(), "p2", now);
}

TEST(Rbac, ServiceAccountGetsForbiddenNamingVerbAndResource) {
  std::string bin = env_or_empty("KUBE_LOCAL_BIN");
  std::string dir = env_or_empty("GPUFLEET_KUBE_LOCAL_DIR");
  if (bin.empty() || dir.empty()) GTEST_SKIP() << "KUBE_LOCAL_BIN/GPUFLEET_KUBE_LOCAL_DIR unset";
  Client admin(admin_config());
  TestNamespace ns(admin);
  std::string kc = dir + "/" + unique_name("sa") + ".kubeconfig";
  ASSERT_EQ(run_command(bin + " kubeconfig --data-dir " + dir + " --service-account " + ns.name() +
                        "/reader -o " + kc + " >/dev/null"),
            0);
  Client sa(load_kubeconfig({{kc}, ""}));
  EXPECT_EQ(sa.default_namespace(), ns.name());
  try {
    sa.list(resources::nodes(), "");
    FAIL() << "a bare ServiceAccount may not list nodes";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Forbidden));
    EXPECT_EQ(e.code(), 403);
    EXPECT_THAT(e.what(), HasSubstr("cannot list nodes: Forbidden (HTTP 403)"));
    EXPECT_THAT(e.server_message(), HasSubstr("system:serviceaccount:" + ns.name() + ":reader"));
    EXPECT_THAT(e.server_message(), HasSubstr("cannot list resource \"nodes\""));
  }
  try {
    core::Value cm;
    cm["metadata"]["name"] = "x";
    sa.create(resources::config_maps(), cm);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Forbidden));
    EXPECT_THAT(e.what(), HasSubstr("cannot create configmaps " + ns.name()));
    EXPECT_THAT(e.server_message(), HasSubstr("cannot create resource \"configmaps\""));
  }
  std::remove(kc.c_str());
}

// A Client for another identity (a TokenRequest's token) over the admin client's transport:
// the server sees the ServiceAccount, and every token identity shares one connection.
TEST(Rbac, AnotherIdentitySharesTheConnectionPool) {
  Client admin(admin_config());
  TestNamespace ns(admin);
  core::Value sa;
  sa["metadata"]["name"] = "reader";
  sa["metadata"]["namespace"] = ns.name();
  admin.create(resources::service_accounts(), sa);
  auto token_of = [&] {
    core::Value request;
    request["apiVersion"] = "authentication.k8s.io/v1";
    request["kind"] = "TokenRequest";
    request["spec"]["expirationSeconds"] = 600;
    core::Value answer = admin.create_subresource(resources::service_accounts(), ns.name(),
                                                  "reader", "token", request);
    return std::string(answer.get_string({"status", "token"}));
  };
  ClientConfig first;
  first.token = token_of();
  ASSERT_FALSE(first.token.empty());
  ClientConfig second;
  second.token = token_of();
  Client as_first(admin, first);
  Client as_second(admin, second);
  EXPECT_EQ(as_first.config().server, admin.config().server);
  const auto before = admin.transport_stats();
  for (Client* c : {&as_first, &as_second}) {
    try {
      c->list(resources::nodes(), "");
      FAIL() << "the ServiceAccount's identity may not list nodes";
    } catch (const ApiError& e) {
      EXPECT_TRUE(e.is(Reason::Forbidden));
      EXPECT_THAT(e.server_message(), HasSubstr("system:serviceaccount:" + ns.name() + ":reader"));
    }
  }
  admin.list(resources::nodes(), "");              // the admin identity is untouched
  const auto after = as_second.transport_stats();  // one transport: the same counters
  EXPECT_EQ(after.requests, before.requests + 3);
  // The admin authenticates with a client certificate, the tokens without one: at most one
  // more TLS connection for both token identities together.
  EXPECT_LE(after.connections, before.connections + 1);
  ClientConfig elsewhere;
  elsewhere.server = "https://127.0.0.1:1";
  EXPECT_THROW(Client(admin, elsewhere), core::InvalidInput);
}

TEST(Events, RepeatsAggregateIntoASeries) {
  Client client(admin_config());
  TestNamespace ns(client);
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = "subject";
  cm["metadata"]["namespace"] = ns.name();
  core::Value subject = client.create(resources::config_maps(), cm);
  EventRecorder rec(client, {"gpufleet.io/kube-it", "test-instance"});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(rec.record(subject, EventType::Warning, "Flapping", "Observe", "it flapped"))
        << rec.last_error();
  }
  ASSERT_TRUE(rec.record(subject, EventType::Normal, "Settled", "Observe", "calm again"));
  auto events = client.list(resources::events(), ns.name()).items;
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_EQ(event::regarding_name(e), "subject");
    EXPECT_EQ(event::regarding_kind(e), "ConfigMap");
    EXPECT_EQ(e.get_string({"reportingController"}), "gpufleet.io/kube-it");
    if (event::reason(e) == "Flapping") {
      EXPECT_EQ(event::count(e), 3);
      EXPECT_EQ(event::type(e), "Warning");
    } else {
      EXPECT_EQ(event::reason(e), "Settled");
      EXPECT_EQ(event::count(e), 1);
    }
  }
}

}  // namespace
}  // namespace gpufleet::kube
