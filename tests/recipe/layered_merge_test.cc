#include "recipe/layered_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;

core::Value y(const char* text) { return core::parse_yaml(text); }

Layer layer(std::string file, int spec, std::string owner, std::vector<std::string> ancestors = {},
            bool mixin = false) {
  std::vector<std::string> lineage{owner};
  lineage.insert(lineage.end(), ancestors.begin(), ancestors.end());
  return Layer{std::move(file), spec, std::move(owner), std::move(lineage), mixin};
}

TEST(LayeredMergeTest, MapsMergeAndLeavesReplaceByHigherSpecificity) {
  LayeredMerge m;
  m.apply(y("v: {a: 1, b: {c: 2, d: [1, 2]}}"), layer("base.yaml", 0, "base"));
  m.apply(y("v: {b: {d: [3]}, e: x}"), layer("eks.yaml", 1, "eks"));
  m.apply(y("v: {a: null}"), layer("eks-h100.yaml", 2, "eks-h100"));
  EXPECT_EQ(m.result(), y("v: {a: null, b: {c: 2, d: [3]}, e: x}"));
}

TEST(LayeredMergeTest, EqualSpecificityConflictNamesBothFiles) {
  LayeredMerge m;
  m.apply(y("v: {driver: {version: '570.1'}}"), layer("overlays/h100.yaml", 1, "h100"));
  m.apply(y("v: {driver: {version: '580.1'}}"), layer("overlays/training.yaml", 1, "training"));
  try {
    m.finish();
    FAIL() << "no conflict";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("v.driver.version"));
    EXPECT_THAT(e.what(), HasSubstr("overlays/h100.yaml"));
    EXPECT_THAT(e.what(), HasSubstr("overlays/training.yaml"));
  }
}

TEST(LayeredMergeTest, EqualValuesAtEqualSpecificityAgree) {
  LayeredMerge m;
  m.apply(y("c: {kueue: {enabled: true}}"), layer("training.yaml", 1, "training"));
  m.apply(y("c: {kueue: {enabled: true}}"), layer("kubeflow.yaml", 1, "kubeflow"));
  EXPECT_NO_THROW(m.finish());
}

TEST(LayeredMergeTest, ChildOverridesParentAndOverlayOverridesItsMixin) {
  LayeredMerge m;
  m.apply(y("v: {x: 1}"), layer("parent.yaml", 1, "parent"));
  m.apply(y("v: {x: 2}"), layer("child.yaml", 1, "child", {"parent"}));
  m.apply(y("v: {y: 1}"), layer("mixin.yaml", 2, "o", {}, true));
  m.apply(y("v: {y: 2}"), layer("o.yaml", 2, "o"));
  EXPECT_EQ(m.result(), y("v: {x: 2, y: 2}"));
}

TEST(LayeredMergeTest, ReplacingAMappingWithAScalarChecksEveryLeaf) {
  LayeredMerge m;
  m.apply(y("v: {x: {a: 1}}"), layer("a.yaml", 1, "a"));
  m.apply(y("v: {x: off}"), layer("b.yaml", 1, "b"));
  EXPECT_THROW(m.finish(), core::InvalidInput);
}

TEST(LayeredMergeTest, MoreSpecificLayerSettlesAConflict) {
  LayeredMerge m;
  m.apply(y("v: {x: 1}"), layer("a.yaml", 1, "a"));
  m.apply(y("v: {x: 2}"), layer("b.yaml", 1, "b"));
  m.apply(y("v: {x: 3}"), layer("ab.yaml", 2, "ab"));
  EXPECT_NO_THROW(m.finish());
  EXPECT_EQ(m.result(), y("v: {x: 3}"));
}

}  // namespace
}  // namespace gpufleet::recipe
