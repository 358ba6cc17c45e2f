// Kubernetes condition semantics (kube/api/conditions.h).
#include "kube/api/conditions.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using std::chrono::system_clock;

const system_clock::time_point t0 = system_clock::from_time_t(1'800'000'000);

Condition cond(std::string status, std::string reason, std::string message = "") {
  return {"Ready", std::move(status), std::move(reason), std::move(message), 3, {}};
}

TEST(Conditions, NewConditionGetsNowAsTransitionTime) {
  core::Value list;
  EXPECT_TRUE(set_condition(list, cond("True", "AllGood"), t0 + 500ms));
  auto c = get_condition(list, "Ready");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->reason, "AllGood");
  EXPECT_EQ(c->observed_generation, 3);
  EXPECT_EQ(c->last_transition_time, t0);  // seconds precision, as the API stores it
  EXPECT_EQ(list.as_list()[0].get_string({"lastTransitionTime"}), format_rfc3339(t0));
}

TEST(Conditions, TransitionTimeMovesOnlyWhenStatusChanges) {
  core::Value list;
  set_condition(list, cond("False", "Starting"), t0);
  // Same status, new reason and message: the transition time stays.
  EXPECT_TRUE(set_condition(list, cond("False", "StillStarting", "waiting"), t0 + 60s));
  EXPECT_EQ(get_condition(list, "Ready")->last_transition_time, t0);
  EXPECT_EQ(get_condition(list, "Ready")->reason, "StillStarting");
  // Identical: no change at all.
  EXPECT_FALSE(set_condition(list, cond("False", "StillStarting", "waiting"), t0 + 120s));
  // Status change: the time moves.
  EXPECT_TRUE(set_condition(list, cond("True", "Started"), t0 + 180s));
  EXPECT_EQ(get_condition(list, "Ready")->last_transition_time, t0 + 180s);
  EXPECT_EQ(list.size(), 1u);
}

TEST(Conditions, ObservedGenerationChangeIsAChange) {
  core::Value list;
  set_condition(list, cond("True", "Ok"), t0);
  Condition c = cond("True", "Ok");
  c.observed_generation = 4;
  EXPECT_TRUE(set_condition(list, c, t0 + 10s));
  EXPECT_EQ(get_condition(list, "Ready")->observed_generation, 4);
  EXPECT_EQ(get_condition(list, "Ready")->last_transition_time, t0);
}

TEST(Conditions, OtherTypesAreKeptAndRemoveWorks) {
  core::Value list;
  set_condition(list, cond("True", "Ok"), t0);
  Condition other{"gpufleet.io/Certified", "Unknown", "Pending", "", 1, {}};
  set_condition(list, other, t0);
  EXPECT_EQ(list.size(), 2u);
  EXPECT_TRUE(remove_condition(list, "Ready"));
  EXPECT_FALSE(remove_condition(list, "Ready"));
  EXPECT_FALSE(get_condition(list, "Ready"));
  EXPECT_TRUE(get_condition(list, "gpufleet.io/Certified"));
}

TEST(Conditions, ValidationNamesFieldValueAndFix) {
  auto message_of = [](Condition c) {
    try {
      validate_condition(c);
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(
      message_of(cond("Maybe", "Ok")).find("status \"Maybe\" is not one of True, False, Unknown"),
      std::string::npos);
  EXPECT_NE(message_of(cond("True", "not camel")).find("reason \"not camel\""), std::string::npos);
  EXPECT_NE(message_of(cond("True", "1Bad")).find("must start with a letter"), std::string::npos);
  EXPECT_NE(message_of(cond("True", "")).find("must not be empty"), std::string::npos);
  EXPECT_NE(message_of(cond("True", "Trailing:")).find("must end with"), std::string::npos);
  EXPECT_NE(message_of({"", "True", "Ok", "", 0, {}}).find("condition type"), std::string::npos);
  EXPECT_NE(message_of({"bad type!", "True", "Ok", "", 0, {}}).find("condition type"),
            std::string::npos);
  EXPECT_NE(message_of(cond("True", "Ok", std::string(40000, 'x'))).find("at most 32768"),
            std::string::npos);
  EXPECT_EQ(message_of(cond("True", "Reason_With,Colon:Ok")), "");
  core::Value list;
  EXPECT_THROW(set_condition(list, cond("Yes", "Ok"), t0), core::InvalidInput);
  EXPECT_TRUE(list.is_null());  // nothing written on invalid input
}

TEST(Conditions, ReadsWhatTheServerWrites) {
  core::Value list = core::Value::list();
  core::Value c;
  c["type"] = "Ready";
  c["status"] = "False";
  c["reason"] = "KubeletNotReady";
  c["lastTransitionTime"] = "2027-01-15T08:00:00Z";
  list.push_back(c);
  auto got = get_condition(list, "Ready");
  ASSERT_TRUE(got);
  EXPECT_EQ(format_rfc3339(got->last_transition_time), "2027-01-15T08:00:00Z");
  EXPECT_EQ(got->observed_generation, 0);
}

}  // namespace
}  // namespace gpufleet::kube
