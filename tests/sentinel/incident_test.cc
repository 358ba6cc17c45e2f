// The incident document helpers (sentinel/incident.h): names, escalation records, budget waits.
#include "sentinel/incident.h"

#include <gtest/gtest.h>

namespace gpufleet::sentinel::detail {
namespace {

TEST(Incident, NamesAreTheNodeAndTheTimeInBase36WithinTheNameLimit) {
  EXPECT_EQ(incident_name("gpu-1", 0), "gpu-1-0");
  EXPECT_EQ(incident_name("gpu-1", 36 * 36 + 35), "gpu-1-10z");
  const std::string n = incident_name(std::string(300, 'a'), 1'800'000'000'000);
  EXPECT_EQ(n.size(), 253u);
  EXPECT_EQ(n.substr(n.rfind('-') + 1).size(), 8u);
}

TEST(Incident, FaultyGpusAreStillFaultyUuidsOnceEach) {
  const std::set<std::string> entities{"xid/GPU-a", "gpu-nvml/GPU-a", "xid/GPU-b",
                                       "xid/0000:17:00.0", "ib-port"};
  const std::set<std::string> faulty{"xid/GPU-a", "gpu-nvml/GPU-a", "xid/0000:17:00.0", "ib-port"};
  EXPECT_EQ(faulty_gpus(entities, faulty), (std::vector<std::string>{"GPU-a"}));
}

TEST(Incident, EscalationsKeepTheNewestFourAndSetTheCondition) {
  core::Value s = core::Value::map();
  for (int i = 0; i < 6; ++i)
    record_escalation(s, "gpu-reset", "reboot", "FaultPersisted", "try " + std::to_string(i),
                      1'800'000'000'000 + i);
  ASSERT_EQ(s.find("escalations")->size(), 4u);
  EXPECT_EQ(s.find("escalations")->as_list().front().get_string({"message"}), "try 2");
  const core::Value& c = s.find("conditions")->as_list().at(0);
  EXPECT_EQ(c.get_string({"type"}), "Escalated");
  EXPECT_EQ(c.get_string({"reason"}), "FaultPersisted");
  EXPECT_EQ(c.get_string({"message"}), "gpu-reset → reboot: try 5");
}

TEST(Incident, ClearingABudgetWaitTurnsTheConditionFalse) {
  core::Value s = core::Value::map();
  clear_budget_wait(s);
  EXPECT_EQ(s.find("conditions"), nullptr);  // nothing was waiting: nothing written
  s["waitingFor"] = "budget";
  clear_budget_wait(s);
  EXPECT_EQ(s.find("waitingFor"), nullptr);
  EXPECT_EQ(s.find("conditions")->as_list().at(0).get_string({"status"}), "False");
}

TEST(Incident, ARuleEscalationAppliesOnlyWhenThePolicyCanCarryItOut) {
  Policy p;
  Decision d;
  d.escalate = "replace";
  d.escalate_rule = "repeat-xid";
  std::string action = "reboot";
  auto e = rule_escalation(p, d, action);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->find("applied")->as_bool());
  EXPECT_NE(std::string(e->get_string({"message"})).find("replacement.provider is not set"),
            std::string::npos);
  EXPECT_EQ(action, "reboot");
  p.remediation.provider = "simulator";
  e = rule_escalation(p, d, action);
  EXPECT_TRUE(e->find("applied")->as_bool());
  EXPECT_EQ(action, "replace");
  d.escalate = "gpu-reset";  // weaker than what was asked: no escalation
  EXPECT_FALSE(rule_escalation(p, d, action).has_value());
}

}  // namespace
}  // namespace gpufleet::sentinel::detail
