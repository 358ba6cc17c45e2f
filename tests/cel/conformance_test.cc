// The conformance runner itself: it must count failures (so CTest fails on a regression),
// honour the skip list, and reject skip entries without a reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "conformance.h"
#include "core/errors.h"

namespace gpufleet::cel::conformance {
namespace {

struct TempDir {
  TempDir()
      : path(std::filesystem::temp_directory_path() / ("cel-conf-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
  }
  std::filesystem::path path;
};

const char* kSuite = R"({"name": "demo", "section": [{"name": "s", "test": [
  {"name": "ok", "expr": "1 + 1", "value": {"int64_value": "2"}},
  {"name": "wrong", "expr": "1 + 1", "value": {"int64_value": "3"}},
  {"name": "err", "expr": "1 / 0", "eval_error": {"errors": [{"message": "division by zero"}]}},
  {"name": "truthy", "expr": "x > 1", "type_env": [{"name": "x", "ident": {"type": {"primitive": "INT64"}}}],
   "bindings": {"x": {"value": {"int64_value": "5"}}}},
  {"name": "skipped", "expr": "TestAllTypes{}", "value": {"bool_value": true}}
]}]})";

TEST(CelConformanceRunner, CountsPassesFailuresAndSkips) {
  TempDir dir;
  dir.write("demo.json", kSuite);
  std::map<std::string, std::string> skips = {{"demo/s/skipped", "needs protobuf messages"}};
  auto results = run_folder(dir.path.string(), skips);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].passed, 3);
  EXPECT_EQ(results[0].failed, 1);
  EXPECT_EQ(results[0].skipped, 1);
  ASSERT_EQ(results[0].failures.size(), 1u);
  EXPECT_THAT(results[0].failures[0], ::testing::HasSubstr("demo/s/wrong: got int 2, want 3"));
}

TEST(CelConformanceRunner, SkipListNeedsReasons) {
  TempDir dir;
  dir.write("good.txt", "# comment\nfile/section/test  why\n\n");
  auto skips = read_skip_list((dir.path / "good.txt").string());
  EXPECT_EQ(skips.at("file/section/test"), "why");
  dir.write("bad.txt", "file/section/test\n");
  EXPECT_THROW(read_skip_list((dir.path / "bad.txt").string()), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::cel::conformance
