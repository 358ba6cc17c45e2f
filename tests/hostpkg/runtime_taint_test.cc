// runtime_taint_action (controller/runtime_taint.h): when the runtime-required taint is
// lifted from a node, when it is put on a new one, and when it is left as it is.
#include "hostpkg/controller/runtime_taint.h"

#include <gtest/gtest.h>

#include <ostream>

namespace gpufleet::hostpkg {
namespace {

using Clock = std::chrono::system_clock;
const Clock::time_point kSetCreated = Clock::time_point(std::chrono::seconds(1'700'000'000));

struct Case {
  const char* name;
  TaintFacts facts;
  TaintAction action;
};

TaintFacts tainted(bool done_here, bool others_done) {
  TaintFacts f;
  f.tainted = true;
  f.has_record = true;
  f.done_here = done_here;
  f.others_done = others_done;
  f.set_created = kSetCreated;
  return f;
}

TaintFacts new_node(std::optional<Clock::time_point> joined, bool auto_taint = true) {
  TaintFacts f;
  f.auto_taint = auto_taint;
  f.set_created = kSetCreated;
  f.node_joined = joined;
  return f;
}

// gtest names the row instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class TaintTable : public ::testing::TestWithParam<Case> {};

TEST_P(TaintTable, Decides) {
  EXPECT_EQ(runtime_taint_action(GetParam().facts), GetParam().action);
}

INSTANTIATE_TEST_SUITE_P(
    RuntimeTaint, TaintTable,
    ::testing::Values(
        Case{"DoneEverywhereLiftsIt", tainted(true, true), TaintAction::Remove},
        Case{"AnotherSetNotDoneKeepsIt", tainted(true, false), TaintAction::Keep},
        Case{"NotDoneHereKeepsIt", tainted(false, true), TaintAction::Keep},
        Case{"TaintedDoneNodeWaitingOnOthersIsNeverReTainted",
             [] {
               TaintFacts f = tainted(true, false);
               f.auto_taint = true;
               f.has_record = false;
               f.node_joined = kSetCreated + std::chrono::seconds(1);
               return f;
             }(),
             TaintAction::Keep},
        Case{"NodeJoinedAfterTheSetIsTainted", new_node(kSetCreated + std::chrono::seconds(1)),
             TaintAction::Add},
        Case{"NodeJoinedWithTheSetIsNot", new_node(kSetCreated), TaintAction::Keep},
        Case{"NodeOlderThanTheSetIsNot", new_node(kSetCreated - std::chrono::hours(1)),
             TaintAction::Keep},
        Case{"NodeWithoutCreationTimeIsNot", new_node(std::nullopt), TaintAction::Keep},
        Case{"WithoutAutoTaintNothingIsAdded",
             new_node(kSetCreated + std::chrono::seconds(1), false), TaintAction::Keep},
        Case{"ANodeTheSetTouchedIsNotTainted",
             [] {
               TaintFacts f = new_node(kSetCreated + std::chrono::seconds(1));
               f.has_record = true;
               return f;
             }(),
             TaintAction::Keep},
        Case{"AnUnknownSetCreationTaintsNothing",
             [] {
               TaintFacts f = new_node(kSetCreated + std::chrono::seconds(1));
               f.set_created.reset();
               return f;
             }(),
             TaintAction::Keep}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gpufleet::hostpkg
