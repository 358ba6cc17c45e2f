// The example controller in docs/controller.md must be the code the integration test compiles.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/source_paths.h"

namespace {

std::string read(const std::string& rel) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/" + rel);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DocsExample, ControllerDocMatchesTheCompiledSource) {
  std::string src = read("tests/integration/controller/node_labeler.cc");
  const std::string begin = "// --- example begin ---\n", end = "// --- example end ---";
  ASSERT_NE(src.find(begin), std::string::npos);
  std::size_t b = src.find(begin) + begin.size();
  std::string code = src.substr(b, src.find(end) - b);
  std::string doc = read("docs/controller.md");
  const std::string marker = "<!-- example-reconciler -->\n```cpp\n";
  ASSERT_NE(doc.find(marker), std::string::npos);
  std::size_t db = doc.find(marker) + marker.size();
  std::string block = doc.substr(db, doc.find("```", db) - db);
  EXPECT_EQ(block, code) << "update docs/controller.md from node_labeler.cc";
}

TEST(DocsExample, ArchitectureDocShowsTheCompiledObserveDecideAct) {
  std::string src = read("src/sentinel/incident_phases.cc");
  const std::string begin = "// --- example begin ---\n", end = "// --- example end ---";
  ASSERT_NE(src.find(begin), std::string::npos);
  std::size_t b = src.find(begin) + begin.size();
  std::string code = src.substr(b, src.find(end) - b);
  std::string doc = read("docs/architecture.md");
  const std::string marker = "<!-- example-observe-decide-act -->\n```cpp\n";
  ASSERT_NE(doc.find(marker), std::string::npos);
  std::size_t db = doc.find(marker) + marker.size();
  std::string block = doc.substr(db, doc.find("```", db) - db);
  EXPECT_EQ(block, code) << "update docs/architecture.md from src/sentinel/incident_phases.cc";
}

}  // namespace
