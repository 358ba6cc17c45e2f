#include "recipe/requirement.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::recipe {
namespace {

bool holds(const char* req, const char* actual) {
  return satisfies(parse_requirement(req, "test"), actual);
}

TEST(RequirementTest, VersionAwareOrdering) {
  EXPECT_TRUE(holds(">= 1.32", "1.32.4"));
  EXPECT_TRUE(holds(">= 1.32", "v1.33.0"));
  EXPECT_FALSE(holds(">= 1.32", "1.31.9"));
  EXPECT_TRUE(holds(">= 1.32", "v1.32.4-eks-1234"));
  EXPECT_TRUE(holds("< 1.10", "1.9.3"));  // numeric, not text, comparison
  EXPECT_FALSE(holds("> 580.95", "580.95.05"));
  EXPECT_TRUE(holds(">= 580.95", "580.105.08"));
  EXPECT_TRUE(holds("== 1.32", "1.32.0"));
  EXPECT_FALSE(holds(">= 1.32", "ubuntu"));
  // Kernels and drivers as hosts report them: the release part counts.
  EXPECT_TRUE(holds(">= 5.15", "5.15.0-91-generic"));
  EXPECT_TRUE(holds(">= 580.95", "580.95.05"));
  EXPECT_FALSE(holds(">= 6.8", "6.5.0-1024-aws"));
}

TEST(RequirementTest, TextGlobAndMembership) {
  EXPECT_TRUE(holds("== ubuntu", "ubuntu"));
  EXPECT_TRUE(holds("!= cos", "ubuntu"));
  EXPECT_TRUE(holds("matches NVIDIA-H100*", "NVIDIA-H100-80GB-HBM3"));
  EXPECT_FALSE(holds("matches NVIDIA-H100*", "NVIDIA-H200"));
  EXPECT_TRUE(holds("matches containerd://*", "containerd://2.1.4"));
  EXPECT_TRUE(holds("in 22.04, 24.04", "24.04"));
  EXPECT_FALSE(holds("in 22.04, 24.04", "20.04"));
  EXPECT_EQ(parse_requirement("in 22.04,24.04", "t").text, "in 22.04, 24.04");
}

TEST(RequirementTest, Counts) {
  Requirement r = parse_requirement(">= 64", "t");
  EXPECT_TRUE(satisfies_count(r, 64));
  EXPECT_TRUE(satisfies_count(r, 128));
  EXPECT_FALSE(satisfies_count(r, 8));
}

TEST(RequirementTest, MalformedRequirementsNameTheField) {
  for (const char* bad : {"", "1.32", ">=", "=> 1.32", ">= ubuntu", ">= 1.2 < 2", "in a,,b"}) {
    try {
      parse_requirement(bad, "overlays/x.yaml: constraints.k.requirement");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const core::InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("constraints.k.requirement"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gpufleet::recipe
