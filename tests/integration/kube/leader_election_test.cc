// Leader election: hand-over between two processes when the leader is SIGKILLed, and a
// leader that cannot renew stops its work before its lease could expire.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/errors.h"
#include "kube/api/objects.h"
#include "kube/credentials.h"
#include "kube/leader_election.h"
#include "test_env.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using testing::admin_config;
using testing::env_or_empty;
using testing::TestNamespace;
using Steady = std::chrono::steady_clock;

struct Helper {
  pid_t pid = 0;
  std::string out;
};

Helper spawn_helper(const std::string& ns, const std::string& lease, const std::string& id) {
  Helper h;
  h.out = "/tmp/" + testing::unique_name("leader-" + id) + ".out";
  std::string kc = env_or_empty("KUBECONFIG");
  std::vector<std::string> args{KUBE_LEADER_HELPER, kc, ns, lease, id};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, h.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EXPECT_EQ(posix_spawn(&h.pid, args[0].c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return h;
}

std::string output(const Helper& h) {
  std::ifstream in(h.out);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wait_for_output(const Helper& h, const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = Steady::now() + timeout;
  while (Steady::now() < deadline) {
    if (output(h).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

void kill_and_reap(Helper& h) {
  if (h.pid <= 0) return;
  ::kill(h.pid, SIGKILL);
  int status = 0;
  ::waitpid(h.pid, &status, 0);
  h.pid = 0;
  std::remove(h.out.c_str());
}

TEST(LeaderElection, SecondProcessTakesOverAfterTheLeaderIsKilled) {
  Client client(admin_config());
  TestNamespace ns(client);
  Helper a = spawn_helper(ns.name(), "handover", "alpha");
  ASSERT_TRUE(wait_for_output(a, "leading alpha", 30s)) << output(a);
  Helper b = spawn_helper(ns.name(), "handover", "beta");
  // beta must not lead while alpha renews.
  std::this_thread::sleep_for(6s);
  EXPECT_EQ(output(b).find("leading"), std::string::npos);
  core::Value lease = client.get(resources::leases(), ns.name(), "handover");
  EXPECT_EQ(lease::holder_identity(lease), "alpha");

  auto killed = Steady::now();
  kill_and_reap(a);
  ASSERT_TRUE(wait_for_output(b, "leading beta", 20s));
  auto took_over = Steady::now() - killed;
  // Not before the 4 s lease expired (beta measures from its last view of a renewal), and
  // soon after it (plus a few retry periods).
  EXPECT_GE(took_over, 3s);
  EXPECT_LE(took_over, 9s);
  lease = client.get(resources::leases(), ns.name(), "handover");
  EXPECT_EQ(lease::holder_identity(lease), "beta");
  EXPECT_EQ(lease::transitions(lease), 1);
  kill_and_reap(b);
}

TEST(LeaderElection, LeaderThatCannotRenewStopsBeforeTheLeaseExpires) {
  Client client(admin_config());
  TestNamespace ns(client);
  LeaderElectionConfig cfg;
  cfg.lease_namespace = ns.name();
  cfg.lease_name = "unrenewable";
  cfg.identity = "victim";
  cfg.lease_duration = 4s;
  cfg.renew_deadline = 2s;
  cfg.retry_period = 300ms;
  std::atomic<bool> working{false};
  std::atomic<Steady::rep> work_stopped_at{0};
  LeaderCallbacks cb;
  cb.on_started_leading = [&](std::stop_token stop) {
    working = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(10ms);
    work_stopped_at = Steady::now().time_since_epoch().count();
    working = false;
  };
  LeaderElector elector(client, cfg, cb);
  std::stop_source stop;
  std::thread runner([&] { elector.run(stop.get_token()); });
  for (int i = 0; i < 300 && !working; ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(working.load());
  EXPECT_TRUE(elector.is_leader());

  // Another writer takes the lease over; from now on every renewal of the victim fails.
  core::Value lease = client.get(resources::leases(), ns.name(), "unrenewable");
  std::string last_renew_text(lease.get_string({"spec", "renewTime"}));
  auto stolen = Steady::now();
  lease["spec"]["holderIdentity"] = "thief";
  lease["spec"]["renewTime"] = format_micro_time(std::chrono::system_clock::now());
  lease["spec"]["leaseDurationSeconds"] = 3600;
  client.update(resources::leases(), lease);

  runner.join();  // run() returns once leadership is lost
  ASSERT_NE(work_stopped_at.load(), 0);
  Steady::time_point stopped{Steady::duration(work_stopped_at.load())};
  // The victim's last successful renewal was at most one retry period before the theft; it
  // must stop within renew_deadline of it, well before its own 4 s lease would run out.
  EXPECT_LE(stopped - stolen, cfg.renew_deadline + 200ms);
  EXPECT_LT(stopped - stolen, cfg.lease_duration);
  EXPECT_FALSE(elector.is_leader());
  EXPECT_EQ(elector.observed_leader(), "thief");
  (void)last_renew_text;
}

TEST(LeaderElection, RejectsInconsistentDurations) {
  Client client(admin_config());
  LeaderElectionConfig cfg{"ns", "l", "me", 2s, 3s, 1s, true};
  EXPECT_THROW(LeaderElector(client, cfg, {[](std::stop_token) {}, {}, {}}), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::kube
