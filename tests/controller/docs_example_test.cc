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

// The code between the example markers of `source`, and the fenced block after `marker` in
// `doc`: the two must be the same text.
void expect_doc_shows_source(const std::string& source, const std::string& doc_file,
                             const std::string& marker_name) {
  std::string src = read(source);
  const std::string begin = "// --- example begin ---\n", end = "// --- example end ---";
  ASSERT_NE(src.find(begin), std::string::npos) << source;
  std::size_t b = src.find(begin) + begin.size();
  std::string code = src.substr(b, src.find(end) - b);
  std::string doc = read(doc_file);
  const std::string marker = "<!-- " + marker_name + " -->\n```cpp\n";
  ASSERT_NE(doc.find(marker), std::string::npos) << doc_file;
  std::size_t db = doc.find(marker) + marker.size();
  std::string block = doc.substr(db, doc.find("```", db) - db);
  EXPECT_EQ(block, code) << "update " << doc_file << " from " << source;
}

TEST(DocsExample, ControllerDocMatchesTheCompiledSource) {
  expect_doc_shows_source("tests/integration/controller/node_labeler.cc", "docs/controller.md",
                          "example-reconciler");
}

TEST(DocsExample, ArchitectureDocShowsTheCompiledObserveDecideAct) {
  expect_doc_shows_source("src/sentinel/incident_phases.cc", "docs/architecture.md",
                          "example-observe-decide-act");
}

}  // namespace
