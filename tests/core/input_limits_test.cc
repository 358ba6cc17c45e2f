// Input limits: the YAML alias budget, JSON size/depth/string limits and the capped file
// reader. The hostile-input suite (tests/hostile) drives the same limits through every
// command; these tests pin the exact behaviour and messages.
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/input_limits.h"
#include "core/json.h"
#include "core/yaml.h"

namespace gpufleet::core {
namespace {

using ::testing::HasSubstr;

// `levels` anchors, each a list of ten aliases of the one before ("billion laughs").
std::string alias_bomb(int levels) {
  std::string doc = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    doc += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) doc += (j ? ", " : "") + prev;
    doc += "]\n";
  }
  return doc;
}

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(YamlAliasBudget, BillionLaughsFailsFastNamingAliasAndLimit) {
  // CPU time of this thread, not wall time: a loaded CI machine stretches the wall clock, but
  // a bomb the budget did not stop would burn minutes of CPU.
  const double start = thread_cpu_seconds();
  std::string msg = message_of([] { parse_yaml(alias_bomb(10), "bomb.yaml"); });
  const double cpu = thread_cpu_seconds() - start;
  EXPECT_THAT(msg, HasSubstr("bomb.yaml:"));
  EXPECT_THAT(msg, HasSubstr("alias *a"));
  EXPECT_THAT(msg, HasSubstr("limit of 1000000"));
  EXPECT_LT(cpu, 5.0) << "even under ASan the budget stops the bomb early";
}

TEST(YamlAliasBudget, ErrorPointsAtTheAliasThatCrossesTheLimit) {
  InputLimits l;
  l.max_alias_nodes = 50;
  // a0 is 11 nodes, a1 = [*a0] is 12 (charging 11); the fourth *a1 in b takes the total
  // 11 + 3 x 12 = 47 past 50.
  std::string doc =
      "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
      "a1: &a1 [*a0]\n"
      "b: [*a1, *a1, *a1, *a1, *a1]\n";
  try {
    parse_yaml(doc, "f.yaml", l);
    FAIL() << "expected the alias budget to be exceeded";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.column(), 20u);
    EXPECT_THAT(e.reason(), HasSubstr("alias *a1 expands to 12 nodes"));
    EXPECT_THAT(e.reason(), HasSubstr("limit of 50"));
  }
}

TEST(YamlAliasBudget, ByteBudgetCountsScalarBytes) {
  InputLimits l;
  l.max_alias_bytes = 1000;
  std::string big(300, 'x');
  std::string doc = "s: &s " + big + "\nl: [*s, *s, *s, *s]\n";
  EXPECT_THAT(message_of([&] { parse_yaml(doc, "f.yaml", l); }),
              HasSubstr("alias *s expands to 300 bytes of scalars"));
  std::string ok = "s: &s " + big + "\nl: [*s, *s, *s]\n";
  EXPECT_EQ(parse_yaml(ok, "f.yaml", l).find("l")->size(), 3u);
}

TEST(YamlAliasBudget, RealAliasesStayWithinDefaults) {
  Value v = parse_yaml(alias_bomb(5), "ok.yaml");  // 10^4 leaves: large but legitimate
  EXPECT_EQ(v.find("a4")->size(), 10u);
  // The budget spans every document of a stream.
  InputLimits l;
  l.max_alias_nodes = 15;
  std::string stream = "a: &a [1, 2, 3, 4]\nb: [*a, *a]\n---\na: &a [1, 2, 3, 4]\nb: [*a, *a]\n";
  EXPECT_THAT(message_of([&] { parse_yaml_documents(stream, "s.yaml", l); }),
              HasSubstr("alias *a"));
}

TEST(YamlLimits, SizeDepthAndScalar) {
  InputLimits l;
  l.max_bytes = 10;
  EXPECT_THAT(message_of([&] { parse_yaml("key: value-too-long", "f.yaml", l); }),
              HasSubstr("over the input limit of 10 bytes"));
  l = InputLimits{};
  l.max_depth = 3;
  EXPECT_THAT(message_of([&] { parse_yaml("[[[[[1]]]]]", "f.yaml", l); }),
              HasSubstr("nested too deeply (limit 3)"));
  l = InputLimits{};
  l.max_string_bytes = 4;
  EXPECT_THAT(message_of([&] { parse_yaml("k: hello", "f.yaml", l); }),
              HasSubstr("scalar of 5 bytes is over the limit of 4 bytes"));
}

TEST(JsonLimits, SizeDepthAndString) {
  InputLimits l;
  l.max_bytes = 4;
  EXPECT_THAT(message_of([&] { parse_json("[1,2,3]", "f.json", nullptr, l); }),
              HasSubstr("f.json"));
  l = InputLimits{};
  l.max_depth = 2;
  EXPECT_THAT(message_of([&] { parse_json("[[[[1]]]]", "f.json", nullptr, l); }),
              HasSubstr("nested too deeply (limit 2)"));
  EXPECT_NO_THROW(parse_json("[[1]]", "f.json", nullptr, l));
  l = InputLimits{};
  l.max_string_bytes = 3;
  EXPECT_THAT(message_of([&] { parse_json(R"({"k":"long"})", "f.json", nullptr, l); }),
              HasSubstr("string of 4 bytes is over the limit of 3 bytes"));
}

class FileReader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpufleet-file-reader-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(FileReader, ReadsARegularFile) {
  std::ofstream(path("a.yaml")) << "a: 1\n";
  EXPECT_EQ(read_file(path("a.yaml")), "a: 1\n");
}

TEST_F(FileReader, RefusesByNameBeforeReading) {
  EXPECT_THAT(message_of([&] { read_file(dir_.string()); }),
              HasSubstr(dir_.string() + ": is a directory"));
  EXPECT_THAT(message_of([&] { read_file(path("missing")); }),
              HasSubstr(path("missing") + ": does not exist"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(message_of([&] { read_file(path("fifo")); }), HasSubstr(": is a FIFO"));
  // A reader that opened the FIFO would block for ever; the bound only has to tell that
  // apart from a refusal, on a machine of any load.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_THAT(message_of([] { read_file("/dev/zero"); }),
              HasSubstr("/dev/zero: is a character device"));
}

TEST_F(FileReader, RefusesOversizeFilesWithoutReadingThem) {
  // A sparse 200 MB file: refused from its size, no page of it is read.
  int fd = ::open(path("sparse").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 200LL << 20), 0);
  ::close(fd);
  EXPECT_THAT(message_of([&] { read_file(path("sparse")); }),
              HasSubstr("is 209715200 bytes (200 MiB), over the input limit of 67108864 bytes"));
  InputLimits l;
  l.max_bytes = 3;
  std::ofstream(path("four")) << "abcd";
  EXPECT_THAT(message_of([&] { read_file(path("four"), l); }),
              HasSubstr("GPUFLEET_MAX_INPUT_BYTES"));
}

TEST_F(FileReader, RefusesUnreadableFiles) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  std::ofstream(path("secret")) << "x";
  ::chmod(path("secret").c_str(), 0);
  EXPECT_THAT(message_of([&] { read_file(path("secret")); }), HasSubstr("permission denied"));
}

TEST(InputLimitsText, DescribeBytes) {
  EXPECT_EQ(describe_bytes(64u << 20), "67108864 bytes (64 MiB)");
  EXPECT_EQ(describe_bytes(2048), "2048 bytes (2 KiB)");
  EXPECT_EQ(describe_bytes(7), "7 bytes");
}

}  // namespace
}  // namespace gpufleet::core
