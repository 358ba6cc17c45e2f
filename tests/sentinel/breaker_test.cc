#include "sentinel/breaker.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::sentinel {
namespace {

constexpr std::int64_t kMin = 60 * 1000;

BreakerPolicy policy(double fraction, std::size_t nodes, std::int64_t quiet_ms = 0) {
  BreakerPolicy p;
  p.window_ms = 10 * kMin;
  p.max_fraction = fraction;
  p.max_nodes = nodes;
  p.quiet_reset_ms = quiet_ms;
  return p;
}

TEST(Breaker, TripsOnUniqueNodesByFraction) {
  CircuitBreaker b(policy(0.05, 0));
  // 5 % of 100 GPU nodes: 5 quarantines go through, the 6th new one is refused.
  EXPECT_EQ(b.threshold(100), 5u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(b.admit("n" + std::to_string(i), 1000 + i, 100).admitted);
    // The same node again is not a new unique node.
    EXPECT_TRUE(b.admit("n" + std::to_string(i), 1000 + i, 100).admitted);
  }
  EXPECT_FALSE(b.tripped());
  EXPECT_TRUE(b.admit("n4", 2000, 100).admitted);
  EXPECT_TRUE(b.tripped());
  auto d = b.admit("n5", 2001, 100);
  EXPECT_FALSE(d.admitted);
  EXPECT_NE(d.reason.find("tripped"), std::string::npos);
  EXPECT_EQ(b.status(100).get_string({"state"}), "Tripped");
  EXPECT_EQ(b.status(100).find("refused")->as_uint(), 1u);
}

TEST(Breaker, CountAndFractionTakeTheSmaller) {
  CircuitBreaker b(policy(0.5, 3));
  EXPECT_EQ(b.threshold(100), 3u);
  EXPECT_EQ(b.threshold(4), 2u);
  EXPECT_EQ(b.threshold(1), 1u);
  CircuitBreaker none(policy(0, 0));
  EXPECT_EQ(none.threshold(100), 0u);
  for (int i = 0; i < 500; ++i) EXPECT_TRUE(none.admit("n" + std::to_string(i), i, 100).admitted);
  EXPECT_FALSE(none.tripped());
}

TEST(Breaker, WindowExpiresOldNodes) {
  CircuitBreaker b(policy(0, 3));
  EXPECT_TRUE(b.admit("a", 0, 10).admitted);
  EXPECT_TRUE(b.admit("b", 1 * kMin, 10).admitted);
  // 10 minutes after "a": it left the window, so "c" and "d" fit before the threshold.
  EXPECT_TRUE(b.admit("c", 10 * kMin, 10).admitted);
  EXPECT_EQ(b.unique_nodes(), 2u);
  EXPECT_FALSE(b.tripped());
  EXPECT_TRUE(b.admit("d", 10 * kMin + 1, 10).admitted);
  EXPECT_TRUE(b.tripped());
  // A tripped breaker stays tripped when the window empties (no quiet reset configured).
  b.tick(100 * kMin);
  EXPECT_EQ(b.unique_nodes(), 0u);
  EXPECT_TRUE(b.tripped());
  EXPECT_FALSE(b.admit("e", 100 * kMin, 10).admitted);
}

TEST(Breaker, ExplicitAndQuietReset) {
  CircuitBreaker b(policy(0, 1, 30 * kMin));
  EXPECT_TRUE(b.admit("a", 0, 10).admitted);
  EXPECT_TRUE(b.tripped());
  EXPECT_FALSE(b.admit("b", 20 * kMin, 10).admitted);  // attempts keep it from going quiet
  b.tick(49 * kMin);
  EXPECT_TRUE(b.tripped());
  b.tick(50 * kMin);
  EXPECT_FALSE(b.tripped());
  EXPECT_EQ(b.status(10).get_string({"lastResetBy"}), "quiet period");

  CircuitBreaker c(policy(0, 1));
  EXPECT_TRUE(c.admit("a", 0, 10).admitted);
  EXPECT_FALSE(c.admit("b", 1, 10).admitted);
  c.reset(2, "alice");
  EXPECT_FALSE(c.tripped());
  EXPECT_TRUE(c.admit("b", 3, 10).admitted);
}

TEST(Breaker, SurvivesARestartThroughValue) {
  CircuitBreaker b(policy(0, 2));
  EXPECT_TRUE(b.admit("a", 0, 10).admitted);
  // Serialised through JSON as the controller stores it in the API.
  std::string stored = core::to_json(b.to_value());
  CircuitBreaker r = CircuitBreaker::from_value(policy(0, 2), core::parse_json(stored));
  EXPECT_EQ(r.unique_nodes(), 1u);
  EXPECT_TRUE(r.admit("b", 1, 10).admitted);
  EXPECT_TRUE(r.tripped());
  stored = core::to_json(r.to_value());
  CircuitBreaker again = CircuitBreaker::from_value(policy(0, 2), core::parse_json(stored));
  EXPECT_TRUE(again.tripped());
  EXPECT_FALSE(again.admit("c", 2, 10).admitted);
  EXPECT_EQ(again.to_value().find("refused")->as_uint(), 1u);
}

TEST(Breaker, BadStateAndPolicyAreNamed) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([] {
              CircuitBreaker::from_value({}, core::parse_json(R"({"tripped":"yes"})"));
            }).find("breakerState.tripped"),
            std::string::npos);
  EXPECT_NE(msg([] {
              CircuitBreaker::from_value({}, core::parse_json(R"({"nodes":{"a":"x"}})"));
            }).find("breakerState.nodes.a"),
            std::string::npos);
  EXPECT_NE(msg([] {
              BreakerPolicy::from_value(core::parse_json(R"({"maxFraction":1.5})"));
            }).find("breaker.maxFraction"),
            std::string::npos);
  EXPECT_NE(msg([] {
              BreakerPolicy::from_value(core::parse_json(R"({"maxNodez":1})"));
            }).find("breaker.maxNodez: unknown key"),
            std::string::npos);
  auto p = BreakerPolicy::from_value(
      core::parse_json(R"({"windowSeconds":60,"maxNodes":7,"quietResetSeconds":5})"));
  EXPECT_EQ(p.window_ms, 60000);
  EXPECT_EQ(p.max_nodes, 7u);
  EXPECT_EQ(p.quiet_reset_ms, 5000);
}

TEST(Breaker, TrackedNodesAreBounded) {
  BreakerPolicy p = policy(0, 0);
  p.max_tracked = 10;
  CircuitBreaker b(p);
  for (int i = 0; i < 100; ++i) b.admit("n" + std::to_string(i), i, 1000);
  EXPECT_EQ(b.unique_nodes(), 10u);
}

// Admissions a crash kept out of the saved state come back from the Nodes' records: counted
// once, within the window, never from before a reset; the next new node then meets the limit.
TEST(Breaker, RememberedAdmissionsCountTowardTheLimit) {
  CircuitBreaker b(policy(0, 3));
  const std::int64_t now = 100 * kMin;
  b.remember("n1", now - kMin, now);
  b.remember("n1", now - 2 * kMin, now);    // the later time is kept
  b.remember("old", now - 11 * kMin, now);  // out of the window
  b.remember("bad", 0, now);                // no time: not counted
  EXPECT_EQ(b.unique_nodes(), 1u);
  EXPECT_TRUE(b.counts("n1"));
  EXPECT_FALSE(b.tripped());  // remembering never trips by itself
  b.remember("n2", now - kMin, now);
  b.remember("n3", now - kMin, now);
  EXPECT_FALSE(b.tripped());
  EXPECT_FALSE(b.admit("n4", now, 100).admitted);  // 3 already in the window
  EXPECT_TRUE(b.tripped());

  b.reset(now + 1, "test");
  b.remember("n1", now - kMin, now + 2);  // from before the reset: forgotten for good
  EXPECT_EQ(b.unique_nodes(), 0u);
  // The reset time survives a restart.
  CircuitBreaker r = CircuitBreaker::from_value(policy(0, 3), b.to_value());
  r.remember("n2", now, now + 2);
  EXPECT_EQ(r.unique_nodes(), 0u);
  r.remember("n5", now + 2, now + 3);
  EXPECT_EQ(r.unique_nodes(), 1u);
}

}  // namespace
}  // namespace gpufleet::sentinel
