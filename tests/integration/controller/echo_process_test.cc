// `gpufleet controller --controllers=echo` as child processes: kill -9 in the middle of
// reconciles leaves no duplicated side effect after a restart, a converged world is not
// rewritten by a restarted controller, and a standby takes over within one lease duration.
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <thread>

#include "controller/echo.h"
#include "kube/api/objects.h"
#include "process.h"
#include "test_env.h"

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::wait_until;

core::Value source(const std::string& ns, const std::string& name, const std::string& v) {
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = name;
  cm["metadata"]["namespace"] = ns;
  cm["metadata"]["labels"][kEchoLabel] = "source";
  cm["data"]["v"] = v;
  return cm;
}

std::vector<core::Value> list(kube::Client& client, const std::string& ns,
                              const std::string& role) {
  kube::ListOptions o;
  o.label_selector = std::string(kEchoLabel) + "=" + role;
  return client.list(kube::resources::config_maps(), ns, o).items;
}

// copy name -> resourceVersion
std::map<std::string, std::string> copy_versions(kube::Client& client, const std::string& ns) {
  std::map<std::string, std::string> out;
  for (const auto& c : list(client, ns, "copy"))
    out[std::string(kube::name_of(c))] = std::string(kube::resource_version_of(c));
  return out;
}

std::vector<std::string> controller_args(const std::string& ns, int port,
                                         std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {testing::gpufleet_bin(),
                                "controller",
                                "--controllers=echo",
                                "--namespace",
                                ns,
                                "--metrics-addr",
                                "127.0.0.1:" + std::to_string(port),
                                "--kubeconfig",
                                kube::testing::env_or_empty("KUBECONFIG")};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string log_path(const std::string& name) { return ::testing::TempDir() + "/" + name + ".log"; }

double metric_of(int port, const std::string& series) {
  auto [status, body] = testing::http_get(port, "/metrics");
  return status == 200 ? testing::metric(body, series).value_or(0) : -1;
}

const std::string kSuccess =
    "gpufleet_controller_reconcile_total{controller=\"echo\",result=\"success\"}";

TEST(EchoProcess, KillNineMidReconcileLeavesNoDuplicateAndRestartRewritesNothing) {
  ASSERT_FALSE(testing::gpufleet_bin().empty()) << "GPUFLEET_BIN unset; run through ctest";
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "echo-kill");
  const int n = 30;
  for (int i = 0; i < n; ++i)
    client.create(kube::resources::config_maps(), source(ns.name(), "s" + std::to_string(i), "v"));

  int port = testing::free_port();
  {
    // 300 ms between deciding and writing, 4 workers: ~2 s for all, so a kill lands mid-way,
    // with reconciles in flight.
    Child slow(controller_args(ns.name(), port, {"--set", "echo.delay=300ms"}),
               log_path("echo-kill-1"));
    ASSERT_TRUE(wait_until([&] { return list(client, ns.name(), "copy").size() >= 3; }, 60s));
    slow.signal(SIGKILL);
    EXPECT_EQ(slow.wait(10s), 128 + SIGKILL);
  }
  std::size_t after_kill = list(client, ns.name(), "copy").size();
  EXPECT_LT(after_kill, std::size_t(n)) << "the kill came too late to be mid-reconcile";

  {
    Child again(controller_args(ns.name(), port), log_path("echo-kill-2"));
    ASSERT_TRUE(
        wait_until([&] { return list(client, ns.name(), "copy").size() == std::size_t(n); }, 60s));
    ASSERT_TRUE(wait_until([&] { return metric_of(port, kSuccess) >= n; }, 30s));
    again.signal(SIGTERM);
    EXPECT_EQ(again.wait(30s), 0) << "graceful shutdown exits 0";
  }
  // Exactly one copy per source, with the source's data and owner.
  std::map<std::string, std::string> uids;
  for (const auto& s : list(client, ns.name(), "source"))
    uids[std::string(kube::name_of(s)) + "-echo"] = std::string(kube::uid_of(s));
  auto copies = list(client, ns.name(), "copy");
  ASSERT_EQ(copies.size(), std::size_t(n));
  for (const auto& c : copies) {
    std::string name(kube::name_of(c));
    ASSERT_TRUE(uids.contains(name)) << name;
    EXPECT_EQ(c.get_string({"data", "v"}), "v");
    const core::Value* refs = c.get({"metadata", "ownerReferences"});
    ASSERT_TRUE(refs != nullptr && refs->size() == 1) << name;
    EXPECT_EQ(refs->as_list()[0].get_string({"uid"}), uids[name]);
  }

  // A third run reconciles every key again (initial list) and writes nothing.
  auto versions = copy_versions(client, ns.name());
  Child third(controller_args(ns.name(), port), log_path("echo-kill-3"));
  ASSERT_TRUE(wait_until([&] { return metric_of(port, kSuccess) >= n; }, 60s));
  EXPECT_EQ(copy_versions(client, ns.name()), versions) << "a converged copy was rewritten";
  third.signal(SIGTERM);
  EXPECT_EQ(third.wait(30s), 0);
}

TEST(EchoProcess, StandbyTakesOverWithinOneLeaseDuration) {
  ASSERT_FALSE(testing::gpufleet_bin().empty()) << "GPUFLEET_BIN unset; run through ctest";
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "echo-leader");
  const std::chrono::milliseconds lease_duration = 4s, retry = 500ms;
  std::vector<std::string> le = {"--leader-elect",
                                 "--lease-namespace",
                                 ns.name(),
                                 "--lease-name",
                                 "echo-leader",
                                 "--lease-duration",
                                 "4s",
                                 "--renew-deadline",
                                 "3s",
                                 "--retry-period",
                                 "500ms"};
  int port_a = testing::free_port(), port_b = testing::free_port();
  auto args_a = controller_args(ns.name(), port_a, le),
       args_b = controller_args(ns.name(), port_b, le);
  args_a.insert(args_a.end(), {"--identity", "replica-a"});
  args_b.insert(args_b.end(), {"--identity", "replica-b"});
  auto a = std::make_unique<Child>(args_a, log_path("echo-leader-a"));
  auto b = std::make_unique<Child>(args_b, log_path("echo-leader-b"));
  auto holder = [&]() -> std::string {
    auto l = client.try_get(kube::resources::leases(), ns.name(), "echo-leader");
    return l ? std::string(kube::lease::holder_identity(*l)) : std::string();
  };
  ASSERT_TRUE(wait_until([&] { return !holder().empty(); }, 60s));
  std::string leader = holder();
  int leader_port = leader == "replica-a" ? port_a : port_b;
  int standby_port = leader == "replica-a" ? port_b : port_a;
  // Both caches warm (ready), only the leader reconciles.
  ASSERT_TRUE(
      wait_until([&] { return testing::http_get(standby_port, "/readyz").first == 200; }, 60s));
  client.create(kube::resources::config_maps(), source(ns.name(), "before", "1"));
  ASSERT_TRUE(wait_until([&] { return list(client, ns.name(), "copy").size() == 1; }, 30s));
  // The copy is visible as soon as the reconcile wrote it; the success counter moves when the
  // reconcile returns, a moment later on a loaded machine.
  EXPECT_TRUE(wait_until([&] { return metric_of(leader_port, kSuccess) >= 1; }, 10s));
  EXPECT_EQ(metric_of(standby_port, kSuccess), 0) << "the standby reconciled";
  EXPECT_EQ(metric_of(standby_port, "gpufleet_controller_leader{manager=\"echo-leader\"}"), 0);

  // kill -9 the leader: no release; the standby waits out the lease.
  auto killed_at = std::chrono::steady_clock::now();
  (leader == "replica-a" ? a : b)->signal(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return !holder().empty() && holder() != leader; }, 30s));
  auto took = std::chrono::steady_clock::now() - killed_at;
  // The lease was last renewed at most one retry period before the kill; the standby
  // acquires it on its first try after the lease expires.
  EXPECT_LE(took, lease_duration + 2 * retry + 1s)
      << "took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  client.create(kube::resources::config_maps(), source(ns.name(), "after", "2"));
  EXPECT_TRUE(wait_until([&] { return list(client, ns.name(), "copy").size() == 2; }, 30s));
  EXPECT_EQ(metric_of(standby_port, "gpufleet_controller_leader{manager=\"echo-leader\"}"), 1);

  // A graceful stop releases the lease at once.
  auto& survivor = leader == "replica-a" ? b : a;
  survivor->signal(SIGTERM);
  EXPECT_EQ(survivor->wait(30s), 0);
  EXPECT_TRUE(wait_until([&] { return holder().empty(); }, 5s)) << "lease not released";
}

}  // namespace
}  // namespace gpufleet::controller
