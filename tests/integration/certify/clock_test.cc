// certify's reconcilers read the time from the Manager's clock, so a test moves time instead
// of sleeping: on kube-local, `setup_certify` on a Manager given a FakeClock two hours ahead
// answers a ValidationRequest whose deadline is one hour from now Expired at once, stamping
// the fake time, and creates no Certification for it. (Read from the wall clock instead, the
// deadline is an hour away: the request would be accepted and a Certification made.)
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "certify/controller.h"
#include "controller/clock.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/json.h"
#include "kube/api/conditions.h"
#include "kube/errors.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet::certify {
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

TEST(CertifyClock, ValidationRequestExpiresByTheInjectedClockNotTheWallClock) {
  kube::Client client(kube::testing::admin_config());
  ASSERT_EQ(kube::testing::run_command(kubectl() + " apply --server-side --force-conflicts -f " +
                                       GPUFLEET_SOURCE_DIR +
                                       "/deploy/crds/validationrequest.yaml >/dev/null"),
            0);
  ASSERT_EQ(
      kube::testing::run_command(kubectl() + " apply --server-side --force-conflicts -f " +
                                 GPUFLEET_SOURCE_DIR + "/deploy/crds/certification.yaml -f " +
                                 GPUFLEET_SOURCE_DIR + "/deploy/crds/workloadrun.yaml >/dev/null"),
      0);
  ASSERT_EQ(kube::testing::run_command(
                kubectl() + " wait --for=condition=Established --timeout=30s "
                            "crd/certifications.gpufleet.io crd/workloadruns.gpufleet.io "
                            "crd/validationrequests.gpufleet.io >/dev/null"),
            0);
  kube::testing::TestNamespace ns(client, "certify-clock");

  const auto real_now = std::chrono::system_clock::now();
  controller::FakeClock clock(real_now + 2h);
  controller::ManagerOptions mo;
  mo.name = "certify-clock-itest";
  mo.metrics_address = "";
  mo.shutdown_grace = 2s;
  mo.clock = &clock;
  controller::Manager manager(client, mo);
  ASSERT_EQ(&manager.clock(), &clock);
  controller::Context ctx;
  ctx.namespace_ = ns.name();
  ctx.settings["certify.namespace"] = ns.name();
  setup_certify(manager, ctx);
  std::stop_source stop;
  std::thread run([&] { manager.run(stop.get_token()); });

  const std::string name = kube::testing::unique_name("clock-vr");
  const std::string deadline = kube::format_rfc3339(real_now + 1h);
  core::Value vr;
  vr["apiVersion"] = "gpufleet.io/v1alpha1";
  vr["kind"] = "ValidationRequest";
  vr["metadata"]["name"] = name;
  vr["spec"]["nodeNames"].push_back(name + "-node");
  vr["spec"]["categories"].push_back("diagnostics/dcgm-r1");
  vr["spec"]["requester"] = "clock-test";
  vr["spec"]["deadline"] = deadline;
  client.create(resources::validation_requests(), vr);

  core::Value got;
  const bool expired = eventually(
      [&] {
        got = client.get(resources::validation_requests(), "", name);
        return got.get_string({"status", "phase"}) == "Expired";
      },
      30s);
  const std::string cert = ValidationReconciler::certification_name(name);
  const bool cert_made = client.try_get(resources::certifications(), ns.name(), cert).has_value();
  stop.request_stop();
  run.join();
  client.remove(resources::validation_requests(), "", name);

  ASSERT_TRUE(expired) << "the deadline " << deadline << " is an hour before the clock's time, "
                       << "yet the request was not Expired: " << core::to_json(got);
  // Both times are the fake clock's (it did not move): two hours ahead of the wall clock.
  const std::string fake_now = kube::format_rfc3339(clock.now());
  EXPECT_EQ(got.get_string({"status", "startTime"}), fake_now) << core::to_json(got);
  EXPECT_EQ(got.get_string({"status", "completionTime"}), fake_now) << core::to_json(got);
  EXPECT_NE(got.get_string({"status", "message"}).find(deadline), std::string::npos)
      << core::to_json(got);
  EXPECT_FALSE(cert_made) << "an expired request starts no Certification";
}

}  // namespace
}  // namespace gpufleet::certify
