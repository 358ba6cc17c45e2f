#include <gtest/gtest.h>

#include "core/json.h"
#include "hostpkg/node_record.h"

namespace gpufleet::hostpkg {
namespace {

NodeRecord sample() {
  NodeRecord r;
  r.set = "tuning";
  r.generation = 4;
  r.installed["a"] = InstalledPackage{"1.2.0",
                                      "r/a:1.2.0",
                                      {{"x.conf", "0123456789abcdef"}},
                                      true,
                                      Interrupt{InterruptKind::RestartServices, {"s.service"}},
                                      {},
                                      {}};
  r.pending_interrupt = Interrupt{InterruptKind::Reboot, {}};
  r.pending_post = {"a"};
  r.state = NodeState::InProgress;
  r.rollout = "feedfacefeedface";
  r.batch = 3;
  r.epoch = 1;
  r.boot_id = "b-1";
  return r;
}

TEST(NodeRecord, RoundTripsThroughJson) {
  NodeRecord r = sample();
  RecordRead back = record_from_value(core::parse_json(core::to_json(record_to_value(r))));
  ASSERT_TRUE(back.record) << back.error;
  EXPECT_EQ(*back.record, r);
}

TEST(NodeRecord, MalformedRecordsAreReportedNotThrown) {
  auto err = [](const std::string& json) {
    RecordRead r = record_from_value(core::parse_json(json));
    EXPECT_FALSE(r.record);
    return r.error;
  };
  EXPECT_NE(err("[1]").find("expected a map"), std::string::npos);
  EXPECT_NE(err(R"({"format": 9, "set": "a"})").find("record.format: 9"), std::string::npos);
  EXPECT_NE(err(R"({"format": 1, "set": "a", "state": "Dancing"})").find("record.state"),
            std::string::npos);
  EXPECT_NE(err(R"({"format": 1, "set": "a", "installed": {"p": {"version": "new"}}})")
                .find("record.installed.p.version"),
            std::string::npos);
  EXPECT_NE(err(R"({"format": 1, "set": "a", "extra": 1})").find("record.extra: unknown field"),
            std::string::npos);
}

TEST(NodeRecord, CommitIsOptimistic) {
  NodeRecord stored = sample();
  NodeRecord a = stored, b = stored;
  a.state = NodeState::Done;
  b.state = NodeState::Failed;
  commit(stored, a);
  EXPECT_EQ(stored.generation, 5);
  EXPECT_EQ(stored.state, NodeState::Done);
  // b was derived from generation 4 too: it loses, and nothing changes.
  EXPECT_THROW(commit(stored, b), RecordConflict);
  EXPECT_EQ(stored.state, NodeState::Done);
  EXPECT_EQ(stored.generation, 5);
}

}  // namespace
}  // namespace gpufleet::hostpkg
