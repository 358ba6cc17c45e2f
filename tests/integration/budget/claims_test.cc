// The disruption budget's claims (controller/disruption_reservation.h) against the real API
// server of kube-local, with no controller around them:
//  - two contenders, each with its own client and reservation, on one domain with a limit of
//    1 (then on two domains with a total of 1), many rounds: each reads its view of the nodes,
//    waits a random few ms (a cache one watch event behind), claims its node, cordons it with
//    the claimed resourceVersion as precondition, holds it and uncordons. The limit is never
//    exceeded (an atomic counts the holders), and both did contend (refusals were seen);
//  - a claimer killed between claim and cordon holds its slot for the grace period only;
//  - a claim whose node moved without going out frees its slot at once.
// The nodes are Node objects of this test (no kubelet): "out" in the test's view is cordoned.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "controller/disruption_reservation.h"
#include "kube/api/objects.h"
#include "kube/api/resource.h"
#include "kube/client.h"
#include "kube/errors.h"
#include "test_env.h"

namespace gpufleet {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::string kRackLabel = "gpufleet.io/claims-itest-rack";

class ClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<kube::Client>(kube::testing::admin_config());
    ns_ = std::make_unique<kube::testing::TestNamespace>(*client_, "claims-it");
    for (const char* n : {"a", "b", "c", "d"}) {
      const std::string name = "claims-it-" + std::to_string(::getpid()) + "-" + n;
      core::Value node;
      node["apiVersion"] = "v1";
      node["kind"] = "Node";
      node["metadata"]["name"] = name;
      node["metadata"]["labels"][kRackLabel] = rack_;
      client_->create(kube::resources::nodes(), node);
      nodes_.push_back(name);
    }
    // kube-local's node lifecycle controller taints a Node without a kubelet once, soon after
    // it appears: let that land, so a Node moves in the cases below only when they move it.
    std::string last;
    auto stable_since = std::chrono::steady_clock::now();
    const auto give_up = stable_since + 20s;
    while (std::chrono::steady_clock::now() < give_up) {
      std::string rvs;
      for (const auto& n : nodes_)
        rvs +=
            std::string(kube::resource_version_of(client_->get(kube::resources::nodes(), "", n))) +
            ",";
      if (rvs != last) {
        last = rvs;
        stable_since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - stable_since > 2s) {
        break;
      }
      std::this_thread::sleep_for(200ms);
    }
  }
  void TearDown() override {
    for (const auto& n : nodes_) {
      try {
        client_->remove(kube::resources::nodes(), "", n);
      } catch (const std::exception&) {
      }
    }
    ns_.reset();
  }

  controller::DisruptionReservation::Options options(std::int64_t grace = 30) const {
    controller::DisruptionReservation::Options o;
    o.namespace_ = ns_->name();
    o.grace_seconds = grace;
    o.remember = 0ms;  // every look reads: the race is the point
    return o;
  }

  // The test's view of its nodes (one LIST): counted = cordoned, the lookup from the same list.
  struct Snapshot {
    std::vector<kube::CountedNode> counted;
    std::map<std::string, kube::ClaimedNodeView, std::less<>> views;
    kube::ClaimedNodeLookup lookup() const {
      return [this](std::string_view n) {
        auto it = views.find(n);
        return it == views.end() ? kube::ClaimedNodeView{} : it->second;
      };
    }
  };
  Snapshot snapshot(kube::Client& c, const std::map<std::string, std::string>& domain_of) {
    Snapshot s;
    kube::ListOptions o;
    o.label_selector = kRackLabel + "=" + rack_;
    for (const auto& n : c.list(kube::resources::nodes(), "", o).items) {
      const std::string name(kube::name_of(n));
      const bool out = kube::node::unschedulable(n);
      s.views[name] = {true, out, std::string(kube::resource_version_of(n))};
      if (out) s.counted.push_back({name, domain_of.at(name)});
    }
    return s;
  }

  // Cordons (or uncordons) with the version decided on as precondition, as hostpkg does.
  static bool cordon(kube::Client& c, const std::string& node, bool on, const std::string& rv) {
    core::Value patch;
    patch["spec"]["unschedulable"] = on;
    if (!rv.empty()) patch["metadata"]["resourceVersion"] = rv;
    try {
      c.patch(kube::resources::nodes(), "", node, kube::PatchType::Merge, patch);
      return true;
    } catch (const kube::ApiError& e) {
      if (e.is(kube::Reason::Conflict)) return false;
      throw;
    }
  }

  struct RaceResult {
    int grants = 0, refusals = 0, violations = 0, most = 0;
  };
  RaceResult race(const std::map<std::string, std::string>& domain_of, kube::ClaimLimits limits,
                  int rounds) {
    std::atomic<int> inside{0}, most{0}, grants{0}, refusals{0}, violations{0};
    auto contender = [&](const std::string& node) {
      kube::Client c(kube::testing::admin_config());
      controller::DisruptionReservation r(c, options());
      std::mt19937 gen(std::random_device{}());
      std::uniform_int_distribution<int> lag(0, 15), hold(5, 25);
      for (int i = 0; i < rounds; ++i) {
        Snapshot s = snapshot(c, domain_of);
        std::this_thread::sleep_for(std::chrono::milliseconds(lag(gen)));
        const std::string rv = s.views.at(node).rv;
        auto out = r.reserve({{node, domain_of.at(node), "Test/" + node, rv}}, s.counted, limits,
                             s.lookup());
        if (!out.granted[0]) {
          ++refusals;
          std::this_thread::sleep_for(std::chrono::milliseconds(lag(gen)));
          continue;
        }
        if (!cordon(c, node, true, rv)) continue;  // the node moved: the claim is void
        const int now = ++inside;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        if (now > 1) ++violations;
        ++grants;
        std::this_thread::sleep_for(std::chrono::milliseconds(hold(gen)));
        --inside;  // before the uncordon: the other may go once it lands
        cordon(c, node, false, "");
      }
    };
    std::jthread t1(contender, nodes_[0]);
    std::jthread t2(contender, nodes_[1]);
    t1.join();
    t2.join();
    return {grants.load(), refusals.load(), violations.load(), most.load()};
  }

  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::testing::TestNamespace> ns_;
  std::string rack_ = "r-" + std::to_string(::getpid());
  std::vector<std::string> nodes_;
};

TEST_F(ClaimsTest, TwoContendersNeverExceedALimitOfOne) {
  std::map<std::string, std::string> one_domain, two_domains;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    one_domain[nodes_[i]] = "rack-1";
    two_domains[nodes_[i]] = "rack-" + std::to_string(i);
  }
  // Per-domain limit 1.
  RaceResult d = race(one_domain, kube::ClaimLimits{100, 1}, 30);
  EXPECT_EQ(d.violations, 0) << "two nodes of one domain were out at once";
  EXPECT_EQ(d.most, 1);
  EXPECT_GT(d.refusals, 0) << "the contenders never met: the race was not run";
  EXPECT_GE(d.grants, 10);
  // Total limit 1, each contender in a domain of its own.
  RaceResult t = race(two_domains, kube::ClaimLimits{1, 100}, 30);
  EXPECT_EQ(t.violations, 0) << "two nodes of the cluster were out at once";
  EXPECT_EQ(t.most, 1);
  EXPECT_GT(t.refusals, 0);
  EXPECT_GE(t.grants, 10);
  std::cout << "per-domain race: " << d.grants << " grants, " << d.refusals
            << " refusals; total race: " << t.grants << " grants, " << t.refusals << " refusals\n";
}

TEST_F(ClaimsTest, AClaimerKilledBeforeItsCordonHoldsTheSlotForTheGracePeriodOnly) {
  const std::map<std::string, std::string> dom{
      {nodes_[0], "r"}, {nodes_[1], "r"}, {nodes_[2], "r"}, {nodes_[3], "r"}};
  const kube::ClaimLimits limits{100, 1};
  kube::Client& c = *client_;
  controller::DisruptionReservation killed(c, options(3));
  controller::DisruptionReservation other(c, options(3));
  Snapshot s = snapshot(c, dom);
  auto req = [&](int i, const char* holder) {
    return kube::ClaimRequest{nodes_[i], "r", holder, s.views.at(nodes_[i]).rv};
  };
  ASSERT_TRUE(killed.reserve({req(2, "Killed/x")}, s.counted, limits, s.lookup()).granted[0]);
  const auto claimed_at = std::chrono::steady_clock::now();
  // ... and it dies here: no cordon. The other contender waits while the claim is young.
  auto o = other.reserve({req(3, "Other/y")}, s.counted, limits, s.lookup());
  ASSERT_FALSE(o.granted[0]);
  EXPECT_THAT(o.why[0],
              HasSubstr("domain \"r\" has 1 node(s) out or claimed without " + nodes_[3]));
  // Past the grace (whole seconds on the claimer's clock: up to one more) it goes, and the
  // dead claim is gone from the object.
  std::this_thread::sleep_for(4100ms - (std::chrono::steady_clock::now() - claimed_at));
  s = snapshot(c, dom);
  o = other.reserve({req(3, "Other/y")}, s.counted, limits, s.lookup());
  ASSERT_TRUE(o.granted[0]) << o.why[0];
  EXPECT_EQ(o.writes, 1);
  std::vector<kube::DisruptionClaim> now = other.read();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].node, nodes_[3]);
  EXPECT_EQ(now[0].holder, "Other/y");

  // A claimer whose cordon landed keeps its slot past the grace while the node is out.
  ASSERT_TRUE(cordon(c, nodes_[3], true, now[0].rv));
  std::this_thread::sleep_for(4100ms);
  s = snapshot(c, dom);
  EXPECT_FALSE(killed.reserve({req(2, "Killed/x")}, s.counted, limits, s.lookup()).granted[0]);
  // Once it is back (uncordoned: the Node moved past the claim), the slot is free at once.
  ASSERT_TRUE(cordon(c, nodes_[3], false, ""));
  s = snapshot(c, dom);
  EXPECT_TRUE(killed.reserve({req(2, "Killed/x")}, s.counted, limits, s.lookup()).granted[0]);
}

TEST_F(ClaimsTest, AClaimWhoseNodeMovedWithoutGoingOutFreesItsSlotAtOnce) {
  const std::map<std::string, std::string> dom{
      {nodes_[0], "r"}, {nodes_[1], "r"}, {nodes_[2], "r"}, {nodes_[3], "r"}};
  const kube::ClaimLimits limits{100, 1};
  kube::Client& c = *client_;
  controller::DisruptionReservation r(c, options(300));
  Snapshot s = snapshot(c, dom);
  ASSERT_TRUE(
      r.reserve({{nodes_[0], "r", "A/x", s.views.at(nodes_[0]).rv}}, s.counted, limits, s.lookup())
          .granted[0]);
  // The Node changes before the claimer's cordon (which carries the old version and so would
  // get 409): the claim protects nothing any more.
  core::Value patch;
  patch["metadata"]["labels"]["gpufleet.io/claims-itest-touched"] = "yes";
  c.patch(kube::resources::nodes(), "", nodes_[0], kube::PatchType::Merge, patch);
  EXPECT_FALSE(cordon(c, nodes_[0], true, s.views.at(nodes_[0]).rv));
  s = snapshot(c, dom);
  auto o =
      r.reserve({{nodes_[1], "r", "B/y", s.views.at(nodes_[1]).rv}}, s.counted, limits, s.lookup());
  ASSERT_TRUE(o.granted[0]) << o.why[0];
  std::vector<kube::DisruptionClaim> now = r.read();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].node, nodes_[1]);
}

}  // namespace
}  // namespace gpufleet
