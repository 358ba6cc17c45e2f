// The sample echo controller in-process: 5,000 objects converge; after an API server restart
// the caches resync and the world converges again.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <thread>

#include "controller/echo.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/log.h"
#include "process.h"
#include "test_env.h"

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;
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

// Sources by name -> data.v, copies by source name -> data.v (read from the API server).
std::map<std::string, std::string> read(kube::Client& client, const std::string& ns,
                                        const std::string& role) {
  kube::ListOptions o;
  o.label_selector = std::string(kEchoLabel) + "=" + role;
  std::map<std::string, std::string> out;
  for (const auto& cm : client.list(kube::resources::config_maps(), ns, o).items) {
    std::string name(kube::name_of(cm));
    if (role == "copy") name = name.substr(0, name.size() - 5);  // "-echo"
    out[name] = std::string(cm.get_string({"data", "v"}));
  }
  return out;
}

bool converged(kube::Client& client, const std::string& ns) {
  return read(client, ns, "source") == read(client, ns, "copy");
}

void create_sources(kube::Client& client, const std::string& ns, int n, int threads = 8) {
  std::vector<std::jthread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = t; i < n; i += threads)
        client.create(kube::resources::config_maps(), source(ns, "s" + std::to_string(i), "v0"));
    });
  }
}

struct RunningManager {
  RunningManager(kube::Client& client, const std::string& ns) {
    ManagerOptions mo;
    mo.name = "echo-test";
    mo.metrics_address = "";
    mo.registry = &registry;
    manager = std::make_unique<Manager>(client, mo);
    Context ctx;
    ctx.namespace_ = ns;
    setup_echo(*manager, ctx);
    run = std::jthread([this](std::stop_token stop) { manager->run(stop); });
  }
  ~RunningManager() {
    run.request_stop();
    run.join();
  }
  core::metrics::Registry registry;
  std::unique_ptr<Manager> manager;
  std::jthread run;
};

std::string kube_local(const std::string& args) {
  std::string bin = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  std::string dir = kube::testing::env_or_empty("GPUFLEET_KUBE_LOCAL_DIR");
  if (bin.empty() || dir.empty()) return {};
  return bin + " " + args + " --data-dir " + dir + " >/dev/null";
}

TEST(Echo, FiveThousandObjectsConverge) {
  int n = 5000;
  if (const char* s = std::getenv("GPUFLEET_CONTROLLER_SCALE")) n = std::atoi(s);
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "echo-scale");
  auto t0 = std::chrono::steady_clock::now();
  create_sources(client, ns.name(), n);
  auto created = std::chrono::steady_clock::now();
  RunningManager m(client, ns.name());
  EXPECT_TRUE(
      wait_until([&] { return read(client, ns.name(), "copy").size() == std::size_t(n); }, 600s));
  auto done = std::chrono::steady_clock::now();
  EXPECT_TRUE(converged(client, ns.name()));
  core::log::info("echo scale",
                  {{"objects", n}, {"create", created - t0}, {"converge", done - created}});
  auto st = m.manager->controllers().front()->stats();
  EXPECT_GE(st.reconciles, std::uint64_t(n));
  EXPECT_EQ(st.errors, 0u);
}

TEST(Echo, ResyncsAndConvergesAfterAnApiServerRestart) {
  if (kube_local("down").empty()) GTEST_SKIP() << "KUBE_LOCAL_BIN/GPUFLEET_KUBE_LOCAL_DIR unset";
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "echo-restart");
  create_sources(client, ns.name(), 20, 4);
  RunningManager m(client, ns.name());
  ASSERT_TRUE(wait_until([&] { return converged(client, ns.name()); }, 60s));

  ASSERT_EQ(kube::testing::run_command(kube_local("down")), 0);
  ASSERT_EQ(kube::testing::run_command(kube_local("up --detach")), 0);
  // Changes right after the restart, while the caches are still reconnecting.
  auto cms = kube::resources::config_maps();
  for (int i = 0; i < 20; i += 4) {
    core::Value p;
    p["data"]["v"] = "after-restart";
    client.patch(cms, ns.name(), "s" + std::to_string(i), kube::PatchType::Merge, p);
  }
  client.create(cms, source(ns.name(), "s-new", "new"));
  EXPECT_TRUE(wait_until([&] { return converged(client, ns.name()); }, 120s))
      << "sources and copies differ after the restart";
  EXPECT_EQ(read(client, ns.name(), "copy").at("s4"), "after-restart");
  EXPECT_EQ(m.manager->controllers().front()->stats().errors, 0u);
}

}  // namespace
}  // namespace gpufleet::controller
