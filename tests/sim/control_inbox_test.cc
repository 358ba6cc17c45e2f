#include "sim/control_inbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/yaml.h"
#include "sim/atomic_file.h"
#include "sim/scenario.h"

namespace gpufleet::sim {
namespace {

TEST(ControlInbox, SubmitListReadComplete) {
  auto dir = std::filesystem::temp_directory_path() / ("sim-inbox-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  core::Value first = core::parse_yaml("{node: n1, type: xid, gpu: 3, code: 79}");
  core::Value second = core::parse_yaml("{node: n2, type: reboot, down: 30s}");
  submit_control_event(dir.string(), first);
  submit_control_event(dir.string(), second);
  auto files = list_control_inbox(dir.string());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_LT(files[0], files[1]);  // name order is submission order
  core::Value read = read_control_event(dir.string(), files[0]);
  SimEvent e = parse_event(read, files[0], "event", false);
  EXPECT_EQ(e.fault.code, 79);
  EXPECT_EQ(e.nodes, std::vector<std::string>{"n1"});
  complete_control_event(dir.string(), files[0], "applied: n1 xid 79 gpu 3");
  EXPECT_EQ(list_control_inbox(dir.string()).size(), 1u);
  std::string done = read_text_file((dir / "control/done" / files[0]).string());
  EXPECT_THAT(done, ::testing::HasSubstr("# applied: n1 xid 79 gpu 3\n"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::sim
