#include "core/subprocess.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpufleet::core {
namespace {

using namespace std::chrono_literals;

SubprocessOptions with_timeout(std::chrono::milliseconds t) {
  SubprocessOptions o;
  o.timeout = t;
  return o;
}

TEST(Subprocess, ExitCodesAndOutput) {
  auto ok = run_subprocess({"/bin/true"}, with_timeout(5s));
  EXPECT_TRUE(ok.ok()) << ok.describe();

  auto fail = run_subprocess({"false"}, with_timeout(5s));  // found in PATH
  EXPECT_TRUE(fail.started);
  EXPECT_FALSE(fail.ok());
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_NE(fail.describe().find("exit status 1"), std::string::npos);

  auto both = run_subprocess({"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"},
                             with_timeout(5s));
  EXPECT_EQ(both.exit_code, 3);
  EXPECT_NE(both.output.find("to-stdout"), std::string::npos);
  EXPECT_NE(both.output.find("to-stderr"), std::string::npos);

  auto killed = run_subprocess({"/bin/sh", "-c", "kill -9 $$"}, with_timeout(5s));
  EXPECT_EQ(killed.signal, 9);
  EXPECT_EQ(killed.exit_code, -1);
  EXPECT_NE(killed.describe().find("signal 9"), std::string::npos);
}

TEST(Subprocess, KeepsTheTailOrStopsAtTheBound) {
  SubprocessOptions o = with_timeout(10s);
  o.max_output = 64;
  auto tail = run_subprocess(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; exit 2"}, o);
  EXPECT_LE(tail.output.size(), 64u);
  EXPECT_NE(tail.output.find("line1999"), std::string::npos) << tail.output;
  EXPECT_EQ(tail.exit_code, 2);

  o.keep_tail = false;
  o.max_output = 1000;
  auto flood = run_subprocess({"/bin/sh", "-c", "while :; do echo flood; done"}, o);
  EXPECT_TRUE(flood.output_overflow);
  EXPECT_FALSE(flood.ok());
  EXPECT_EQ(flood.output.size(), 1000u);
  EXPECT_EQ(flood.output.substr(0, 6), "flood\n");
}

TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  const auto start = std::chrono::steady_clock::now();
  auto slow = run_subprocess({"/bin/sleep", "5"}, with_timeout(500ms));
  EXPECT_TRUE(slow.timed_out);
  EXPECT_FALSE(slow.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  EXPECT_NE(slow.describe().find("timed out"), std::string::npos);

  // A child of the command holds the pipe open; it goes with the group at the deadline.
  const auto t0 = std::chrono::steady_clock::now();
  auto group =
      run_subprocess({"/bin/sh", "-c", "sleep 30 & sleep 30; echo never"}, with_timeout(500ms));
  EXPECT_TRUE(group.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
}

TEST(Subprocess, GraceGivesSigtermFirst) {
  SubprocessOptions o = with_timeout(300ms);
  o.kill_grace = 3s;
  auto r = run_subprocess(
      {"/bin/sh", "-c", "trap 'echo got-term; exit 7' TERM; while :; do sleep 0.05; done"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_NE(r.output.find("got-term"), std::string::npos) << r.output;
}

TEST(Subprocess, ExitWhileAChildHoldsThePipeDoesNotWait) {
  const auto t0 = std::chrono::steady_clock::now();
  SubprocessOptions o = with_timeout(20s);
  o.kill_group_on_exit = true;
  auto r = run_subprocess({"/bin/sh", "-c", "sleep 30 & echo started; exit 0"}, o);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_NE(r.output.find("started"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(Subprocess, EnvironmentStderrFileAndNoStart) {
  std::vector<std::string> env = {"GPUFLEET_X=42", "PATH=/usr/bin:/bin"};
  SubprocessOptions o = with_timeout(5s);
  o.env = &env;
  auto r = run_subprocess({"/bin/sh", "-c", "echo x=$GPUFLEET_X home=${HOME:-unset}"}, o);
  EXPECT_EQ(r.output, "x=42 home=unset\n");

  const std::string file = ::testing::TempDir() + "/subprocess-stderr-" + std::to_string(getpid());
  SubprocessOptions f = with_timeout(5s);
  f.stderr_to = StderrTo::File;
  f.stderr_file = file;
  auto split = run_subprocess({"/bin/sh", "-c", "echo out; echo err >&2"}, f);
  EXPECT_EQ(split.output, "out\n");
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "err\n");
  std::filesystem::remove(file);

  auto missing = run_subprocess({"/nonexistent/gpufleet-no-such-tool", "x"}, with_timeout(5s));
  EXPECT_FALSE(missing.started);
  EXPECT_EQ(missing.describe(),
            "cannot run /nonexistent/gpufleet-no-such-tool: No such file or directory");
  auto not_in_path = run_subprocess({"gpufleet-no-such-tool-in-path"}, with_timeout(5s));
  EXPECT_FALSE(not_in_path.started);
  EXPECT_NE(not_in_path.error.find("No such file"), std::string::npos) << not_in_path.error;

  SubprocessOptions c = with_timeout(5s);
  c.chroot_dir = "/nonexistent-root";
  auto chrooted = run_subprocess({"/bin/true"}, c);
  EXPECT_FALSE(chrooted.started);
  EXPECT_NE(chrooted.error.find("chroot into /nonexistent-root"), std::string::npos)
      << chrooted.error;
  EXPECT_FALSE(run_subprocess({}, c).started);
}

// Bigger than a pipe buffer (64 KiB on Linux) in both directions: the input is written as the
// child reads while its output is drained, so neither side blocks the other.
TEST(Subprocess, StdinLargerThanAPipeBuffer) {
  std::string input;
  input.reserve(1u << 20);
  for (std::size_t i = 0; input.size() < (1u << 20); ++i) input += std::to_string(i) + '\n';
  SubprocessOptions o = with_timeout(20s);
  o.stdin_data = input;
  o.max_output = 2u << 20;
  auto echoed = run_subprocess({"cat"}, o);
  ASSERT_TRUE(echoed.ok()) << echoed.describe();
  EXPECT_EQ(echoed.stdin_written, input.size());
  EXPECT_EQ(echoed.output.size(), input.size());
  EXPECT_TRUE(echoed.output == input);

  // Not captured: the same bytes arrive (counted by the child).
  o.capture_stdout = false;
  o.stderr_to = StderrTo::File;
  const std::string file = ::testing::TempDir() + "/subprocess-stdin-" + std::to_string(getpid());
  o.stderr_file = file;
  auto counted = run_subprocess({"/bin/sh", "-c", "wc -c >&2"}, o);
  ASSERT_TRUE(counted.ok()) << counted.describe();
  std::ifstream in(file);
  std::size_t bytes = 0;
  in >> bytes;
  EXPECT_EQ(bytes, input.size());
  std::filesystem::remove(file);

  // Empty input: the child sees end of file at once.
  SubprocessOptions e = with_timeout(5s);
  e.stdin_data = std::string_view{};
  auto empty = run_subprocess({"/bin/sh", "-c", "cat; echo done"}, e);
  EXPECT_EQ(empty.output, "done\n");
}

// A child that exits without reading (or reads only the start) ends the feeding, with no
// SIGPIPE for this process and no error: the exit status says what happened.
TEST(Subprocess, ChildThatDoesNotReadItsStdin) {
  const std::string input(1u << 20, 'x');
  SubprocessOptions o = with_timeout(10s);
  o.stdin_data = input;
  auto gone = run_subprocess({"/bin/sh", "-c", "echo ignored; exit 0"}, o);
  EXPECT_TRUE(gone.ok()) << gone.describe();
  EXPECT_EQ(gone.output, "ignored\n");
  EXPECT_LT(gone.stdin_written, input.size());

  auto head = run_subprocess({"head", "-c", "5"}, o);
  EXPECT_TRUE(head.ok()) << head.describe();
  EXPECT_EQ(head.output, "xxxxx");
  EXPECT_LT(head.stdin_written, input.size());

  auto failed = run_subprocess({"/bin/sh", "-c", "exec 0<&-; echo closed; exit 4"}, o);
  EXPECT_EQ(failed.exit_code, 4);
  EXPECT_EQ(failed.output, "closed\n");
}

// A child that never reads nor exits: the deadline stops it although the input is not
// all written (the writes never block).
TEST(Subprocess, StdinDoesNotOutliveTheDeadline) {
  const std::string input(1u << 20, 'y');
  SubprocessOptions o = with_timeout(300ms);
  o.stdin_data = input;
  const auto start = std::chrono::steady_clock::now();
  auto r = run_subprocess({"sleep", "30"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_LT(r.stdin_written, input.size());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);

  o.capture_stdout = false;
  auto quiet = run_subprocess({"sleep", "30"}, o);
  EXPECT_TRUE(quiet.timed_out);
}

}  // namespace
}  // namespace gpufleet::core
