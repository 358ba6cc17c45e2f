// The example monitor in docs/agent.md must be the code the agent tests compile and run.
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

TEST(DocsExample, MonitorMatchesTheCompiledSource) {
  std::string src = read("tests/agent/example_monitor.cc");
  const std::string begin = "// --- example begin ---\n", end = "// --- example end ---";
  ASSERT_NE(src.find(begin), std::string::npos);
  std::size_t b = src.find(begin) + begin.size();
  std::string code = src.substr(b, src.find(end) - b);
  std::string doc = read("docs/agent.md");
  const std::string marker = "<!-- example-monitor -->\n```cpp\n";
  ASSERT_NE(doc.find(marker), std::string::npos) << "docs/agent.md lacks the example marker";
  std::size_t db = doc.find(marker) + marker.size();
  EXPECT_EQ(doc.substr(db, doc.find("```", db) - db), code)
      << "update docs/agent.md from tests/agent/example_monitor.cc";
}

}  // namespace
