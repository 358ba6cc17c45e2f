// The one definition of a node being out and the DisruptionBudget's arithmetic
// (kube/api/disruption.h): percent rounding as a PodDisruptionBudget's maxUnavailable, the
// spec reader's errors, who holds a node, and the bounded status.
#include "kube/api/disruption.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"

namespace gpufleet::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string error_of(const std::string& yaml) {
  try {
    (void)parse_disruption_budget(core::parse_yaml(yaml));
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(DisruptionBudget, PercentRoundsUpLikeAPodDisruptionBudget) {
  IntOrPercent ten{true, 10};
  EXPECT_EQ(ten.resolve(100), 10);
  EXPECT_EQ(ten.resolve(15), 2);  // 1.5 -> 2 (a Deployment's maxUnavailable would give 1)
  EXPECT_EQ(ten.resolve(5), 1);   // 0.5 -> 1
  EXPECT_EQ(ten.resolve(1), 1);
  EXPECT_EQ(ten.resolve(0), 0);
  EXPECT_EQ((IntOrPercent{true, 0}).resolve(5000), 0);  // "0%": nothing new goes out
  EXPECT_EQ((IntOrPercent{true, 100}).resolve(7), 7);
  EXPECT_EQ((IntOrPercent{true, 33}).resolve(10), 4);  // 3.3 -> 4
  EXPECT_EQ((IntOrPercent{false, 3}).resolve(1), 3);   // a count is a count
  EXPECT_EQ((IntOrPercent{false, 0}).resolve(10), 0);
}

TEST(DisruptionBudget, ReadsCountsAndPercents) {
  EXPECT_EQ(parse_int_or_percent(core::Value(std::int64_t{5}), "f"), (IntOrPercent{false, 5}));
  EXPECT_EQ(parse_int_or_percent(core::Value("25%"), "f"), (IntOrPercent{true, 25}));
  EXPECT_EQ(parse_int_or_percent(core::Value("0%"), "f"), (IntOrPercent{true, 0}));
  EXPECT_EQ(parse_int_or_percent(core::Value("100%"), "f"), (IntOrPercent{true, 100}));
  auto spec = parse_disruption_budget(core::parse_yaml(
      "metadata: {name: default}\nspec: {maxUnavailable: '10%', topologyKey: rack, "
      "maxUnavailablePerDomain: 2}"));
  EXPECT_EQ(spec.max_unavailable, (IntOrPercent{true, 10}));
  EXPECT_EQ(spec.topology_key, "rack");
  EXPECT_EQ(spec.domain_limit(), 2);
  auto no_key = parse_disruption_budget(
      core::parse_yaml("metadata: {name: default}\nspec: {maxUnavailable: 3}"));
  EXPECT_EQ(no_key.domain_limit(), INT64_MAX);
  EXPECT_EQ(no_key.total_limit(100), 3);
}

TEST(DisruptionBudget, BadInputNamesFieldValueAndFix) {
  EXPECT_THAT(error_of("metadata: {name: other}\nspec: {maxUnavailable: 5}"),
              HasSubstr("metadata.name: \"other\" is not allowed: the DisruptionBudget is one per "
                        "cluster; name it \"default\""));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: '150%'}"),
              HasSubstr("spec.maxUnavailable: \"150%\" is not a percentage from 0% to 100%; give "
                        "a node count (5) or a percentage (\"10%\")"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: -2}"),
              HasSubstr("spec.maxUnavailable: -2 is negative; give a node count >= 0"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: '-5%'}"),
              HasSubstr("spec.maxUnavailable: \"-5%\" is not a percentage"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: 1.5}"),
              HasSubstr("spec.maxUnavailable: 1.5 is neither a node count nor a percentage"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {topologyKey: rack}"),
              HasSubstr("spec.maxUnavailable: required"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: 1, "
                       "maxUnavailablePerDomain: 2}"),
              HasSubstr("spec.maxUnavailablePerDomain: 2 needs spec.topologyKey"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: 1, topologyKey: r, "
                       "maxUnavailablePerDomain: 0}"),
              HasSubstr("spec.maxUnavailablePerDomain: 0 is not a node count >= 1"));
  EXPECT_THAT(error_of("metadata: {name: default}\nspec: {maxUnavailable: 1, topologyKy: r}"),
              HasSubstr("spec.topologyKy: is not a known field (did you mean \"topologyKey\"?"));
}

core::Value node(const std::string& yaml) {
  return core::parse_yaml("metadata: {name: n1, labels: {rack: r1}}\n" + yaml);
}
constexpr const char* kReady = "status: {conditions: [{type: Ready, status: 'True'}]}\n";

TEST(DisruptionBudget, OneDefinitionOfOut) {
  // Ready and schedulable, no record, no incident: in.
  NodeOutFacts in = node_out_facts(node(kReady), "rack", false);
  EXPECT_FALSE(is_out(in));
  EXPECT_TRUE(out_holders(in).empty());
  EXPECT_EQ(in.domain, "r1");
  // Not Ready.
  NodeOutFacts not_ready = node_out_facts(node("status: {conditions: [{type: Ready, status: "
                                               "'False'}]}"),
                                          "rack", false);
  EXPECT_THAT(out_holders(not_ready), ElementsAre("NotReady"));
  // Cordoned by a person (no owners): someone else's.
  NodeOutFacts person =
      node_out_facts(node(std::string("spec: {unschedulable: true}\n") + kReady), "rack", false);
  EXPECT_THAT(out_holders(person), ElementsAre("Cordoned"));
  // An open sentinel incident, even before its cordon lands.
  NodeOutFacts incident = node_out_facts(node(kReady), "rack", true);
  EXPECT_TRUE(is_out(incident));
  EXPECT_THAT(out_holders(incident), ElementsAre("Sentinel"));
  // A hostpkg record InProgress, with hostpkg's and sentinel's cordon shares.
  NodeOutFacts both = node_out_facts(
      core::parse_yaml(
          "metadata:\n  name: n1\n  annotations:\n    gpufleet.io/cordon-owners: hostpkg,sentinel\n"
          "    hostpkg.gpufleet.io/record.driver: '{\"set\":\"driver\",\"state\":\"InProgress\"}'\n"
          "    hostpkg.gpufleet.io/record.fw: '{\"set\":\"fw\",\"state\":\"Done\"}'\n"
          "spec: {unschedulable: true}\n" +
          std::string(kReady)),
      "rack", false);
  EXPECT_THAT(out_holders(both), ElementsAre("HostPackageSet/driver", "Sentinel"));
  EXPECT_EQ(both.domain, "");  // no rack label: the shared domain ""
  // A Failed record holds only while hostpkg still holds its cordon share.
  const std::string failed =
      "    hostpkg.gpufleet.io/record.driver: '{\"set\":\"driver\",\"state\":\"Failed\"}'\n";
  NodeOutFacts held = node_out_facts(
      core::parse_yaml("metadata:\n  name: n1\n  annotations:\n    gpufleet.io/cordon-owners: "
                       "hostpkg\n" +
                       failed + "spec: {unschedulable: true}\n" + kReady),
      "rack", false);
  EXPECT_THAT(out_holders(held), ElementsAre("HostPackageSet/driver"));
  NodeOutFacts handed_back = node_out_facts(
      core::parse_yaml("metadata:\n  name: n1\n  annotations:\n" + failed + kReady), "rack", false);
  EXPECT_FALSE(is_out(handed_back));
  // Another gpufleet component's cordon share.
  NodeOutFacts other = node_out_facts(
      core::parse_yaml(
          "metadata:\n  name: n1\n  annotations: {gpufleet.io/cordon-owners: certify}\n"
          "spec: {unschedulable: true}\n" +
          std::string(kReady)),
      "rack", false);
  EXPECT_THAT(out_holders(other), ElementsAre("CordonOwner/certify"));
  // Phases that no longer hold the node.
  for (const char* p : {"Released", "Failed", "Cancelled"}) EXPECT_FALSE(incident_open(p)) << p;
  for (const char* p : {"", "Detected", "Quarantined", "Draining", "Remediating", "Validating"})
    EXPECT_TRUE(incident_open(p)) << p;
}

TEST(DisruptionBudget, TallyCountsTotalAndPerDomain) {
  OutTally t;
  auto f = [](std::string name, std::string domain, bool ready) {
    NodeOutFacts n;
    n.name = std::move(name);
    n.domain = std::move(domain);
    n.ready = ready;
    return n;
  };
  t.add(f("a", "r1", false));
  t.add(f("b", "r1", false));
  t.add(f("c", "r2", true));
  t.add(f("d", "", false));
  EXPECT_EQ(t.nodes, 4);
  EXPECT_EQ(t.out, 3);
  EXPECT_EQ(t.out_in("r1"), 2);
  EXPECT_EQ(t.out_in("r2"), 0);
  EXPECT_EQ(t.out_in(""), 1);
}

TEST(DisruptionBudget, StatusIsBoundedAt5000NodesAndSaysWhatItOmits) {
  DisruptionBudgetSpec spec;
  spec.max_unavailable = IntOrPercent{true, 10};
  spec.topology_key = "rack";
  spec.max_per_domain = 2;
  std::vector<NodeOutFacts> nodes;
  for (int i = 0; i < 5000; ++i) {
    NodeOutFacts n;
    char name[32];
    std::snprintf(name, sizeof name, "node-%04d", i);
    n.name = name;
    n.domain = "rack-" + std::to_string(i / 10);                          // 500 racks of 10
    if (i % 4 == 0) n.ready = false;                                      // 1,250 NotReady
    if (i % 10 == 1) n.hostpkg_sets = {"set-" + std::to_string(i % 70)};  // spread over sets
    nodes.push_back(std::move(n));
  }
  core::Value s = budget_status(spec, nodes);
  EXPECT_EQ(s.find("nodes")->as_int(), 5000);
  EXPECT_EQ(s.find("maxUnavailable")->as_int(), 500);
  EXPECT_EQ(s.find("unavailable")->as_int(), 1250 + 500);
  const auto& holders = s.find("holders")->as_list();
  std::int64_t named = 0;
  for (const auto& h : holders) {
    ASSERT_LE(h.find("nodeNames")->size(), kStatusNamesPerHolder);
    EXPECT_EQ(h.find("nodes")->as_int(),
              static_cast<std::int64_t>(h.find("nodeNames")->size()) + h.find("omitted")->as_int());
    if (h.get_string({"holder"}) == "NotReady") {
      EXPECT_EQ(h.find("nodes")->as_int(), 1250);
      EXPECT_EQ(h.find("omitted")->as_int(), 1250 - 20);
      EXPECT_EQ((*h.find("nodeNames"))[0].as_string(), "node-0000");  // the smallest names
    }
    ++named;
  }
  // set-1, set-11, ..., set-61 (7 sets) plus NotReady: all fit.
  EXPECT_EQ(named, 8);
  EXPECT_EQ(s.find("holdersOmitted")->as_int(), 0);
  EXPECT_EQ(s.find("domains")->size(), kStatusDomains);
  EXPECT_EQ(s.find("domainsOmitted")->as_int(), 500 - 100);
  EXPECT_EQ(s.find("domainsAtLimit")->as_int(), 500);  // every rack has 3 or 4 out
  EXPECT_LT(core::to_json(s).size(), 64u * 1024u);
  // The same nodes in another order give the same bytes (no rewrite when nothing changed).
  std::reverse(nodes.begin(), nodes.end());
  EXPECT_EQ(core::to_json(budget_status(spec, nodes)), core::to_json(s));
}

TEST(DisruptionBudget, StatusBoundsHoldersToo) {
  DisruptionBudgetSpec spec;
  std::vector<NodeOutFacts> nodes;
  for (int i = 0; i < 60; ++i) {
    NodeOutFacts n;
    n.name = "n" + std::to_string(i);
    n.hostpkg_sets = {"set-" + std::to_string(100 + i)};
    nodes.push_back(std::move(n));
  }
  core::Value s = budget_status(spec, nodes);
  EXPECT_EQ(s.find("holders")->size(), kStatusHolders);
  EXPECT_EQ(s.find("holdersOmitted")->as_int(), 10);
  EXPECT_EQ(s.find("domains"), nullptr);  // no topology key: no domains
}

}  // namespace
}  // namespace gpufleet::kube
