// decide_verify_round (controller/verify_round.h): one node's re-verification round, one
// package at a time in the set's order — create the next verify pod (or wait for room),
// wait for a running one, or record the outcome, the first failure (or timeout) deciding.
#include "hostpkg/controller/verify_round.h"

#include <gtest/gtest.h>

namespace gpufleet::hostpkg {
namespace {

using Clock = std::chrono::system_clock;
using Kind = VerifyRound::Kind;
const Clock::time_point kNow = Clock::time_point(std::chrono::seconds(1'700'000'000));

VerifyPodFacts missing(std::string package) {
  VerifyPodFacts f;
  f.package = package;
  f.pod_name = "hp-" + package;
  return f;
}

VerifyPodFacts running(std::string package, std::chrono::seconds age) {
  VerifyPodFacts f = missing(std::move(package));
  f.exists = true;
  f.created = kNow - age;
  f.limit = std::chrono::seconds(600);
  return f;
}

VerifyPodFacts finished(std::string package, bool ok, std::string status = "succeeded",
                        std::string message = "") {
  VerifyPodFacts f = missing(std::move(package));
  f.exists = true;
  f.outcome = StageOutcome{ok, std::move(status), std::move(message)};
  return f;
}

TEST(VerifyRound, CreatesTheFirstMissingPodWhenThereIsRoom) {
  VerifyRound r =
      decide_verify_round({finished("a", true), missing("b"), missing("c")}, true, kNow);
  EXPECT_EQ(r.kind, Kind::Create);
  EXPECT_EQ(r.looked_at, 2u);  // b's pod, created now; c waits for b
}

TEST(VerifyRound, NoRoomWaitsForALaterPass) {
  VerifyRound r = decide_verify_round({missing("a"), missing("b")}, false, kNow);
  EXPECT_EQ(r.kind, Kind::Wait);
  EXPECT_EQ(r.looked_at, 1u);
}

TEST(VerifyRound, RunningPodWaitsUntilPastItsLimitAndGrace) {
  VerifyRound r =
      decide_verify_round({running("a", std::chrono::seconds(780)), missing("b")}, true, kNow);
  EXPECT_EQ(r.kind, Kind::Wait);
  EXPECT_EQ(r.looked_at, 1u);
  r = decide_verify_round({running("a", std::chrono::seconds(781)), missing("b")}, true, kNow);
  EXPECT_EQ(r.kind, Kind::Record);
  EXPECT_EQ(r.looked_at, 1u);
  EXPECT_FALSE(r.outcome.ok);
  EXPECT_EQ(r.outcome.package, "a");
  EXPECT_EQ(r.outcome.message, "verify pod hp-a did not finish within its timeout");
  VerifyPodFacts no_time = running("a", std::chrono::seconds(0));
  no_time.created.reset();
  EXPECT_EQ(decide_verify_round({no_time}, true, kNow).kind, Kind::Wait);
}

TEST(VerifyRound, FirstFailureDecidesAndLaterPackagesAreNotLookedAt) {
  VerifyRound r = decide_verify_round(
      {finished("a", true), finished("b", false, "check-failed", "vm.swappiness is 60"),
       missing("c")},
      true, kNow);
  EXPECT_EQ(r.kind, Kind::Record);
  EXPECT_EQ(r.looked_at, 2u);
  EXPECT_FALSE(r.outcome.ok);
  EXPECT_EQ(r.outcome.package, "b");
  EXPECT_EQ(r.outcome.message, "check-failed: vm.swappiness is 60");
}

TEST(VerifyRound, EveryPackagePassedRecordsAPass) {
  VerifyRound r = decide_verify_round({finished("a", true), finished("b", true)}, false, kNow);
  EXPECT_EQ(r.kind, Kind::Record);
  EXPECT_EQ(r.looked_at, 2u);
  EXPECT_TRUE(r.outcome.ok);
  EXPECT_TRUE(r.outcome.package.empty());
}

}  // namespace
}  // namespace gpufleet::hostpkg
