// How an incident ends, as an operator meets it (docs/sentinel.md "How an incident ends"): every
// end — Released, Failed, Cancelled — with or without a cordon that was there before sentinel,
// with or without sentinel holding a share of it, leaves the node either out with an incident
// that names why, or back with sentinel's marks gone; and a later fault is acted on either way.
#include "kube/api/cordon.h"
#include "sentinel_fixture.h"

namespace gpufleet::sentinel {
namespace {

constexpr std::string_view kTaint = "nvidia.com/gpu-error";

// The cordon before the incident: none, a person's (no owners), or hostpkg's (sentinel joins).
enum class Before { Uncordoned, Foreign, Hostpkg };
// How the incident ends: certify passes it, fails it (the node stays out, then a person
// uncordons it), or a person uncordons it while it is Validating.
enum class End { Released, FailedThenUncordoned, Cancelled };

struct Case {
  std::string suffix;
  Before before;
  End end;
};

class IncidentEndTest : public SentinelTest {
 protected:
  void uncordon(const std::string& n) {
    core::Value patch;
    patch["spec"]["unschedulable"] = core::Value(nullptr);  // `kubectl uncordon`
    client_->patch(kube::resources::nodes(), "", n, kube::PatchType::Merge, patch);
  }
  bool has_sentinel_taint(const std::string& n) {
    return kube::node::has_taint(get_node(n), kTaint, "NoSchedule");
  }
  std::set<std::string> recorded_entities(const std::string& n) {
    return QuarantineRecord::from_node(get_node(n)).entities;
  }
};

TEST_F(IncidentEndTest, EveryEndHandsTheNodeBackOrKeepsItOutAndLaterFaultsAreActedOn) {
  create_policy(kNoDrain);
  std::vector<Case> cases;
  for (auto [b, bname] :
       {std::pair{Before::Uncordoned, "own"}, std::pair{Before::Foreign, "person"},
        std::pair{Before::Hostpkg, "joint"}}) {
    for (auto [e, ename] :
         {std::pair{End::Released, "rel"}, std::pair{End::FailedThenUncordoned, "fail"},
          std::pair{End::Cancelled, "can"}}) {
      cases.push_back({std::string(ename) + "-" + bname, b, e});
    }
  }
  std::map<std::string, std::string> names;  // suffix -> node
  for (const auto& c : cases) {
    names[c.suffix] = node(c.suffix, c.before != Before::Uncordoned,
                           c.before == Before::Hostpkg ? "hostpkg" : "");
  }
  start_manager();
  for (const auto& c : cases) health(names[c.suffix], {{"xid/GPU-0", "Fatal"}});
  for (const auto& c : cases) {
    const std::string& n = names[c.suffix];
    ASSERT_TRUE(wait_phase(n, "Validating")) << c.suffix;
    EXPECT_TRUE(has_sentinel_taint(n)) << c.suffix;
    EXPECT_TRUE(kube::node::unschedulable(get_node(n))) << c.suffix;
  }

  // The ends.
  for (const auto& c : cases) {
    const std::string& n = names[c.suffix];
    switch (c.end) {
      case End::Released: answer_validation(n, "Passed"); break;
      case End::FailedThenUncordoned: answer_validation(n, "Failed"); break;
      case End::Cancelled: uncordon(n); break;
    }
  }
  for (const auto& c : cases) {
    const std::string& n = names[c.suffix];
    if (c.end == End::FailedThenUncordoned) {
      ASSERT_TRUE(wait_phase(n, "Failed")) << c.suffix;
      // Out, with the Failed incident named on the node: why it is out.
      core::Value obj = get_node(n);
      EXPECT_TRUE(kube::node::unschedulable(obj)) << c.suffix;
      EXPECT_TRUE(kube::node::has_taint(obj, kTaint, "NoSchedule")) << c.suffix;
      EXPECT_EQ(QuarantineRecord::from_node(obj).incident, kube::name_of(incidents(n).back()))
          << c.suffix;
      uncordon(n);
    } else {
      ASSERT_TRUE(wait_phase(n, c.end == End::Released ? "Released" : "Cancelled")) << c.suffix;
    }
  }
  // Back, with sentinel's marks gone; a person's cordon stays only while nobody lifted it.
  for (const auto& c : cases) {
    const std::string& n = names[c.suffix];
    ASSERT_TRUE(wait_until(
        [&] {
          core::Value obj = get_node(n);
          return !kube::node::has_taint(obj, kTaint) &&
                 kube::annotation_of(obj, kQuarantineAnnotation).empty();
        },
        20s))
        << c.suffix << ": " << core::to_json(get_node(n));
    core::Value obj = get_node(n);
    const bool person_still_cordons = c.before != Before::Uncordoned && c.end == End::Released;
    EXPECT_EQ(kube::node::unschedulable(obj), person_still_cordons) << c.suffix;
    const std::string owners(kube::annotation_of(obj, kube::kCordonOwnersAnnotation));
    EXPECT_EQ(owners.find("sentinel"), std::string::npos) << c.suffix << ": owners " << owners;
    if (c.before == Before::Hostpkg && c.end == End::Released) {
      EXPECT_EQ(owners, "hostpkg") << c.suffix;
    }
  }

  // A later fault (a newer transition) is acted on, whatever the end was.
  for (const auto& c : cases)
    health(names[c.suffix], {{"xid/GPU-0", "Fatal"}, {"xid/GPU-1", "Fatal"}});
  for (const auto& c : cases) {
    const std::string& n = names[c.suffix];
    ASSERT_TRUE(wait_until([&] { return incidents(n).size() == 2; }, 20s))
        << c.suffix << ": a new fault after the end was not quarantined";
    ASSERT_TRUE(wait_phase(n, "Validating")) << c.suffix;
    EXPECT_TRUE(kube::node::unschedulable(get_node(n))) << c.suffix;
    EXPECT_TRUE(has_sentinel_taint(n)) << c.suffix;
  }
}

// A node that stays out after its incident Failed is not deaf: a new fault opens a new incident
// that takes the quarantine over (it names the new incident and only the new entities).
TEST_F(IncidentEndTest, NewFaultOnANodeHeldByAFailedIncidentOpensANewOne) {
  create_policy(kNoDrain);
  const std::string own = node("held-own");
  const std::string person = node("held-person", true);
  start_manager();
  for (const auto& n : {own, person}) health(n, {{"xid/GPU-0", "Fatal"}});
  for (const auto& n : {own, person}) {
    ASSERT_TRUE(wait_phase(n, "Validating"));
    answer_validation(n, "Failed");
  }
  for (const auto& n : {own, person}) ASSERT_TRUE(wait_phase(n, "Failed"));
  // The same fault does not reopen it.
  std::this_thread::sleep_for(1500ms);
  for (const auto& n : {own, person}) EXPECT_EQ(incidents(n).size(), 1u);
  for (const auto& n : {own, person}) health(n, {{"xid/GPU-0", "Fatal"}, {"xid/GPU-4", "Fatal"}});
  for (const auto& n : {own, person}) {
    ASSERT_TRUE(wait_until([&] { return incidents(n).size() == 2; }, 20s)) << n;
    ASSERT_TRUE(wait_phase(n, "Validating"));
    const core::Value newest = incidents(n).back();
    const QuarantineRecord rec = QuarantineRecord::from_node(get_node(n));
    EXPECT_EQ(rec.incident, kube::name_of(newest)) << n;
    EXPECT_EQ(rec.entities, (std::set<std::string>{"xid/GPU-0", "xid/GPU-4"})) << n;
    EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
  }
  // Passed this time: the node comes back as it was before sentinel (the person's cordon stays).
  for (const auto& n : {own, person}) answer_validation(n, "Passed");
  for (const auto& n : {own, person}) ASSERT_TRUE(wait_phase(n, "Released"));
  EXPECT_FALSE(kube::node::unschedulable(get_node(own)));
  EXPECT_TRUE(kube::node::unschedulable(get_node(person)));
  for (const auto& n : {own, person}) {
    EXPECT_FALSE(has_sentinel_taint(n)) << n;
    EXPECT_EQ(kube::annotation_of(get_node(n), kQuarantineAnnotation), "") << n;
  }
}

// A taint-only rule (no cordon): removing sentinel's taint by hand is the hand-back gesture.
TEST_F(IncidentEndTest, RemovingATaintOnlyQuarantinesTaintCancelsIt) {
  create_policy(
      "  - {name: ib-taint, when: \"event.check == 'ib-link' && event.state == 'Fatal'\", "
      "taint: 'nvidia.com/ib-error=down:NoSchedule', remediate: none}\n" +
      std::string(kNoDrain));
  const std::string n = node("taint");
  start_manager();
  health(n, {{"ib-link/mlx5_0", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Validating"));
  EXPECT_FALSE(kube::node::unschedulable(get_node(n)));
  ASSERT_TRUE(kube::node::has_taint(get_node(n), "nvidia.com/ib-error", "NoSchedule"));
  core::Value patch;
  patch["spec"]["taints"] = core::Value::list();
  patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(get_node(n)));
  client_->patch(kube::resources::nodes(), "", n, kube::PatchType::Merge, patch);
  ASSERT_TRUE(wait_phase(n, "Cancelled"));
  EXPECT_EQ(kube::annotation_of(get_node(n), kQuarantineAnnotation), "");
}

// Entities that recover leave the quarantine record at once (the node stays held by the rest).
TEST_F(IncidentEndTest, RecoveredEntitiesLeaveTheRecordAtOnce) {
  create_policy(kNoDrain);
  const std::string n = node("rec");
  start_manager();
  health(n, {{"xid/GPU-0", "Fatal"}, {"xid/GPU-1", "Fatal"}, {"xid/GPU-2", "Fatal"}});
  ASSERT_TRUE(wait_phase(n, "Validating"));
  EXPECT_EQ(recorded_entities(n).size(), 3u);
  health(n, {{"xid/GPU-0", "Healthy"}, {"xid/GPU-1", "Fatal"}, {"xid/GPU-2", "Fatal"}});
  ASSERT_TRUE(wait_until(
      [&] {
        return recorded_entities(n) == std::set<std::string>{"xid/GPU-1", "xid/GPU-2"};
      },
      10s))
      << core::to_json(get_node(n));
  EXPECT_EQ(phase(n), "Validating");
  EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
  health(n, {{"xid/GPU-0", "Healthy"}, {"xid/GPU-1", "Healthy"}, {"xid/GPU-2", "Healthy"}});
  ASSERT_TRUE(wait_until([&] { return recorded_entities(n).empty(); }, 10s));
  EXPECT_EQ(phase(n), "Validating");  // certify decides when it comes back
  EXPECT_TRUE(kube::node::unschedulable(get_node(n)));
}

}  // namespace
}  // namespace gpufleet::sentinel
