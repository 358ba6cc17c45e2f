// goodput reads the time from the Manager's clock: on kube-local, with `setup_goodput` on a
// Manager given a FakeClock, a gone job's ledger is kept while the clock stays within the
// retention (7 days) and removed once the test moves the clock 8 days on — no waiting. (Read
// from the wall clock instead, the retention is days away and the ledger stays.)
#include <gtest/gtest.h>

#include <thread>

#include "controller/clock.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "goodput/controller.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet::goodput {
namespace {

using namespace std::chrono_literals;

std::string kubectl() {
  std::string kl = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  return (kl.empty() ? std::string("kubectl") : "'" + kl + "' kubectl") + " --kubeconfig '" +
         kube::testing::env_or_empty("KUBECONFIG") + "'";
}

bool eventually(const std::function<bool()>& f, std::chrono::seconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return f();
}

TEST(GoodputClock, AGoneJobsLedgerIsRemovedOnceTheInjectedClockPassesItsRetention) {
  kube::Client client(kube::testing::admin_config());
  // The Remediation cache's CRD (incidents are what interrupt jobs).
  ASSERT_EQ(kube::testing::run_command(kubectl() + " apply --server-side --force-conflicts -f " +
                                       GPUFLEET_SOURCE_DIR +
                                       "/deploy/crds/remediation.yaml >/dev/null && " + kubectl() +
                                       " wait --for=condition=Established --timeout=30s "
                                       "crd/remediations.gpufleet.io >/dev/null"),
            0);
  kube::testing::TestNamespace ns(client, "goodput-clock");

  controller::FakeClock clock;
  controller::ManagerOptions mo;
  mo.name = "goodput-clock-itest";
  mo.metrics_address = "";
  mo.shutdown_grace = 2s;
  mo.clock = &clock;
  controller::Manager manager(client, mo);
  controller::Context ctx;
  ctx.settings["goodput.namespace"] = ns.name();  // retention: the default 7 days
  setup_goodput(manager, ctx);
  std::stop_source stop;
  std::thread run([&] { manager.run(stop.get_token()); });

  // A one-pod job (pending: kube-local has no node for it).
  const std::string job = "train";
  core::Value pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  pod["metadata"]["name"] = "train-0";
  pod["metadata"]["namespace"] = ns.name();
  pod["metadata"]["labels"][std::string(kJobLabel)] = job;
  core::Value c;
  c["name"] = "main";
  c["image"] = "example.com/train:test";
  c["resources"]["limits"]["nvidia.com/gpu"] = "1";
  pod["spec"]["containers"].push_back(c);
  client.create(kube::resources::pods(), pod);
  const std::string ledger = ledger_configmap_name({ns.name(), std::string(kJobLabel), job});
  auto ledger_exists = [&] {
    return client.try_get(kube::resources::config_maps(), ns.name(), ledger).has_value();
  };
  const bool written = eventually(ledger_exists, 30s);

  // The job ends: its ledger is kept for the retention, counted from the clock's time.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  client.remove(kube::resources::pods(), ns.name(), "train-0", now);
  bool gone = eventually(
      [&] { return !client.try_get(kube::resources::pods(), ns.name(), "train-0").has_value(); },
      30s);
  clock.advance(6 * 24h);
  // A pass in which the job is gone and 6 days passed: the ledger stays (touch: wakes the job).
  auto touch = [&](const std::string& v) {
    core::Value patch;
    patch["metadata"]["annotations"]["clock-test/touch"] = v;
    client.patch(kube::resources::config_maps(), ns.name(), ledger, kube::PatchType::Merge, patch);
  };
  if (written) touch("6d");
  std::this_thread::sleep_for(2s);
  const bool kept_within_retention = ledger_exists();

  clock.advance(2 * 24h);  // 8 days since the job was last seen
  if (written && kept_within_retention) touch("8d");
  const bool removed = eventually([&] { return !ledger_exists(); }, 30s);
  stop.request_stop();
  run.join();

  ASSERT_TRUE(written) << "no ledger ConfigMap " << ledger;
  ASSERT_TRUE(gone);
  EXPECT_TRUE(kept_within_retention) << "removed 6 days into a 7-day retention";
  EXPECT_TRUE(removed) << "kept 8 days (by the injected clock) into a 7-day retention";
}

}  // namespace
}  // namespace gpufleet::goodput
