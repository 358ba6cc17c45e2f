#include "recipe/dependency_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::recipe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DependencyGraphTest, LevelsAreLongestPathsAndSorted) {
  DeploymentPlan p = plan_deployment(
      {{"d", {"b", "c"}}, {"c", {"a"}}, {"b", {"a"}}, {"a", {}}, {"e", {}}, {"f", {"d", "a"}}});
  EXPECT_THAT(p.order, ElementsAre("a", "e", "b", "c", "d", "f"));
  ASSERT_EQ(p.levels.size(), 4u);
  EXPECT_THAT(p.levels[0], ElementsAre("a", "e"));
  EXPECT_THAT(p.levels[1], ElementsAre("b", "c"));
  EXPECT_THAT(p.levels[3], ElementsAre("f"));
  EXPECT_EQ(p.level_of.at("f"), 3);
}

TEST(DependencyGraphTest, CycleErrorPrintsTheCycle) {
  try {
    plan_deployment({{"a", {"c"}}, {"b", {"a"}}, {"c", {"b"}}, {"x", {}}});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("a -> c -> b -> a"));
  }
}

TEST(DependencyGraphTest, SelfDependencyIsACycle) {
  EXPECT_THROW(plan_deployment({{"a", {"a"}}}), core::InvalidInput);
}

TEST(DependencyGraphTest, UnknownDependencyIsNamed) {
  try {
    plan_deployment({{"gpu-operator", {"nfd"}}});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("'gpu-operator' depends on 'nfd'"));
  }
}

}  // namespace
}  // namespace gpufleet::recipe
