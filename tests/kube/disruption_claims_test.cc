#include "kube/api/disruption_claims.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/errors.h"

namespace gpufleet::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::int64_t kNow = 1'000'000;
constexpr std::int64_t kGrace = 30;

// The caller's cache in these tests: a map of node -> view; absent nodes are absent.
struct View {
  std::map<std::string, ClaimedNodeView, std::less<>> nodes;
  void set(const std::string& n, bool out, const std::string& rv) {
    nodes[n] = ClaimedNodeView{true, out, rv};
  }
  ClaimedNodeLookup lookup() const {
    return [this](std::string_view n) {
      auto it = nodes.find(n);
      return it == nodes.end() ? ClaimedNodeView{} : it->second;
    };
  }
};

DisruptionClaim claim(const std::string& node, const std::string& domain, std::int64_t since,
                      const std::string& rv, const std::string& holder = "HostPackageSet/a") {
  return DisruptionClaim{node, domain, holder, since, rv};
}

TEST(DisruptionClaims, TextRoundTrips) {
  std::vector<DisruptionClaim> cs{claim("n1", "r1", 5, "17"), claim("n2", "", 6, "", "Sentinel/x")};
  EXPECT_EQ(parse_disruption_claims(disruption_claims_text(cs)), cs);
  EXPECT_TRUE(parse_disruption_claims("").empty());
}

TEST(DisruptionClaims, MalformedTextNamesTheFieldAndTheFix) {
  try {
    (void)parse_disruption_claims(R"([{"node":"n1","holder":"h","since":-1}])");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("gpufleet.io/disruption-claims[0].since: -1 is not unix seconds"));
    EXPECT_THAT(e.what(), HasSubstr("delete the annotation"));
  }
  try {
    (void)parse_disruption_claims(R"([{"node":"n1","holder":"h","since":1,"nod":"x"}])");
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("nod"));
    EXPECT_THAT(e.what(), HasSubstr("did you mean \"node\""));
  }
  EXPECT_THROW((void)parse_disruption_claims("{"), core::InvalidInput);
  EXPECT_THROW((void)parse_disruption_claims(R"({"node":"n"})"), core::InvalidInput);
  EXPECT_THROW((void)parse_disruption_claims(R"([{"holder":"h","since":1}])"), core::InvalidInput);
}

TEST(DisruptionClaims, AClaimLivesWhileItsNodeIsOutOrWithinGraceUntilTheNodeMoves) {
  const DisruptionClaim c = claim("n1", "r", kNow - 100, "10");
  // Out: alive however old.
  EXPECT_TRUE(claim_alive(c, {true, true, "50"}, kNow, kGrace));
  // Not out, Node newer than the claim's decision: the action is over (or never happened).
  EXPECT_FALSE(claim_alive(claim("n1", "r", kNow, "10"), {true, false, "11"}, kNow, kGrace));
  // Not out, same or older Node (the cordon has not reached this cache): grace decides.
  EXPECT_TRUE(claim_alive(claim("n1", "r", kNow - 29, "10"), {true, false, "10"}, kNow, kGrace));
  EXPECT_TRUE(claim_alive(claim("n1", "r", kNow - 29, "10"), {true, false, "9"}, kNow, kGrace));
  EXPECT_FALSE(claim_alive(claim("n1", "r", kNow - 30, "10"), {true, false, "10"}, kNow, kGrace));
  // Unknown node (not in this cache yet) or opaque versions: grace only.
  EXPECT_TRUE(claim_alive(claim("n1", "r", kNow - 1, "10"), {}, kNow, kGrace));
  EXPECT_FALSE(claim_alive(claim("n1", "r", kNow - 31, "10"), {}, kNow, kGrace));
  EXPECT_TRUE(claim_alive(claim("n1", "r", kNow - 1, "abc"), {true, false, "abd"}, kNow, kGrace));
  // A claimer's clock ahead of ours keeps the claim.
  EXPECT_TRUE(claim_alive(claim("n1", "r", kNow + 60, "10"), {true, false, "10"}, kNow, kGrace));
}

TEST(DisruptionClaims, TwoContendersForOneDomainSlotOnlyOneGoes) {
  View v;
  v.set("a", false, "1");
  v.set("b", false, "2");
  const ClaimLimits lim{100, 1};
  // First writer: nothing claimed, nothing out.
  ClaimDecision d1 =
      decide_claims({}, {{"a", "r1", "HostPackageSet/s", "1"}}, {}, lim, v.lookup(), kNow, kGrace);
  ASSERT_THAT(d1.granted, ElementsAre(true));
  EXPECT_TRUE(d1.changed);
  // Second writer re-read after its 409: a's claim is there, a's cordon is not in its cache.
  ClaimDecision d2 = decide_claims(d1.claims, {{"b", "r1", "Sentinel/inc", "2"}}, {}, lim,
                                   v.lookup(), kNow, kGrace);
  ASSERT_THAT(d2.granted, ElementsAre(false));
  EXPECT_THAT(d2.why[0], HasSubstr("domain \"r1\" has 1 node(s) out or claimed without b, "
                                   "maxUnavailablePerDomain 1"));
  EXPECT_FALSE(d2.changed);
  // Another domain is free.
  ClaimDecision d3 = decide_claims(d1.claims, {{"b", "r2", "Sentinel/inc", "2"}}, {}, lim,
                                   v.lookup(), kNow, kGrace);
  EXPECT_THAT(d3.granted, ElementsAre(true));
}

TEST(DisruptionClaims, ANodeOutAndClaimedCountsOnceAndTheRequestersOwnNodeCountsOnce) {
  View v;
  v.set("a", true, "5");  // out and claimed
  v.set("q", true, "6");  // out (quarantined), its reboot asks
  const ClaimLimits lim{2, 2};
  std::vector<CountedNode> counted{{"a", "r"}, {"q", "r"}};
  // a counts once (claimed and out); q is out already and adds nothing: 2 <= 2.
  ClaimDecision d = decide_claims({claim("a", "r", kNow, "4")}, {{"q", "r", "Sentinel/i", "6"}},
                                  counted, lim, v.lookup(), kNow, kGrace);
  EXPECT_THAT(d.granted, ElementsAre(true));
  // A third node would make 3.
  v.set("c", false, "7");
  ClaimDecision d2 = decide_claims(d.claims, {{"c", "r", "HostPackageSet/s", "7"}}, counted, lim,
                                   v.lookup(), kNow, kGrace);
  ASSERT_THAT(d2.granted, ElementsAre(false));
  EXPECT_THAT(d2.why[0], HasSubstr("2 node(s) out or claimed in the cluster without c, "
                                   "maxUnavailable 2"));
}

TEST(DisruptionClaims, ABatchIsDecidedInOrderAndEachGrantCountsForTheNext) {
  View v;
  for (const char* n : {"a", "b", "c", "d"}) v.set(n, false, "1");
  ClaimDecision d = decide_claims({},
                                  {{"a", "r1", "HostPackageSet/s", "1"},
                                   {"b", "r1", "HostPackageSet/s", "1"},
                                   {"c", "r2", "HostPackageSet/s", "1"},
                                   {"d", "r3", "HostPackageSet/s", "1"}},
                                  {}, ClaimLimits{2, 1}, v.lookup(), kNow, kGrace);
  EXPECT_THAT(d.granted, ElementsAre(true, false, true, false));
  EXPECT_EQ(d.claims.size(), 2u);
  EXPECT_THAT(d.why[3], HasSubstr("maxUnavailable 2"));
}

TEST(DisruptionClaims, AnOwnClaimIsGrantedAgainWithoutAWrite) {
  View v;
  v.set("a", true, "9");
  ClaimDecision d = decide_claims({claim("a", "r", kNow - 500, "8", "Sentinel/i")},
                                  {{"a", "r", "Sentinel/i", "8"}}, {{"a", "r"}}, ClaimLimits{1, 1},
                                  v.lookup(), kNow, kGrace);
  EXPECT_THAT(d.granted, ElementsAre(true));
  EXPECT_FALSE(d.changed);
  // Decided again on a newer Node: the claim takes the new version (else a reader would see
  // the Node past the claim and drop it before the action lands).
  ClaimDecision d2 = decide_claims({claim("a", "r", kNow - 500, "8", "Sentinel/i")},
                                   {{"a", "r", "Sentinel/i", "9"}}, {{"a", "r"}}, ClaimLimits{1, 1},
                                   v.lookup(), kNow, kGrace);
  EXPECT_THAT(d2.granted, ElementsAre(true));
  EXPECT_TRUE(d2.changed);
  ASSERT_EQ(d2.claims.size(), 1u);
  EXPECT_EQ(d2.claims[0].rv, "9");
  EXPECT_EQ(d2.claims[0].since, kNow);
}

TEST(DisruptionClaims, DeadClaimsArePrunedAndFreeTheirSlot) {
  View v;
  v.set("done", false, "20");    // finished: not out, moved past the claim
  v.set("killed", false, "30");  // claimer killed before its cordon: never moved
  v.set("new", false, "40");
  std::vector<DisruptionClaim> cur{claim("done", "r", kNow - 5, "19"),
                                   claim("killed", "r", kNow - 5, "30")};
  ClaimDecision d = decide_claims(cur, {{"new", "r", "HostPackageSet/s", "40"}}, {},
                                  ClaimLimits{10, 1}, v.lookup(), kNow, kGrace);
  // "killed" still holds the domain within its grace.
  ASSERT_THAT(d.granted, ElementsAre(false));
  EXPECT_TRUE(d.changed);  // "done" was dropped
  ASSERT_EQ(d.claims.size(), 1u);
  EXPECT_EQ(d.claims[0].node, "killed");
  // Past the grace it goes, and the newcomer gets the slot.
  ClaimDecision d2 = decide_claims(cur, {{"new", "r", "HostPackageSet/s", "40"}}, {},
                                   ClaimLimits{10, 1}, v.lookup(), kNow + 30, kGrace);
  ASSERT_THAT(d2.granted, ElementsAre(true));
  ASSERT_EQ(d2.claims.size(), 1u);
  EXPECT_EQ(d2.claims[0].node, "new");
}

TEST(DisruptionClaims, ZeroLetsNothingNewOutAndTheClaimCountIsBounded) {
  View v;
  v.set("a", false, "1");
  ClaimDecision d = decide_claims({}, {{"a", "", "h", "1"}}, {}, ClaimLimits{0, INT64_MAX},
                                  v.lookup(), kNow, kGrace);
  EXPECT_THAT(d.granted, ElementsAre(false));
  std::vector<DisruptionClaim> full;
  for (std::size_t i = 0; i < kMaxDisruptionClaims; ++i)
    full.push_back(claim("n" + std::to_string(i), "", kNow, "1"));
  ClaimDecision d2 =
      decide_claims(full, {{"a", "", "h", "1"}}, {}, ClaimLimits{}, v.lookup(), kNow, kGrace);
  ASSERT_THAT(d2.granted, ElementsAre(false));
  EXPECT_THAT(d2.why[0], HasSubstr("the most the object holds"));
}

}  // namespace
}  // namespace gpufleet::kube
