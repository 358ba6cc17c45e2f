// The Recipe document: round trip, and what reading one back checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"
#include "recipe/resolver.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;

Recipe example() {
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "inference", "dynamo"};
  return resolve(testing::repo_library(), q);
}

TEST(RecipeDocumentTest, HasEveryPartTheIssueNames) {
  core::Value doc = recipe_to_value(example());
  EXPECT_EQ(doc.get_string({"apiVersion"}), "gpufleet.io/v1alpha1");
  EXPECT_EQ(doc.get_string({"kind"}), "Recipe");
  EXPECT_EQ(doc.get_string({"metadata", "name"}), "eks-h100-ubuntu-inference-dynamo");
  EXPECT_EQ(doc.get_string({"metadata", "digest"}).substr(0, 7), "sha256:");
  EXPECT_EQ(doc.get_string({"spec", "criteria", "service"}), "eks");
  const core::Value& first = (*doc.get({"spec", "components"}))[0];
  for (const char* f : {"name", "chart", "namespace", "values", "dependencies", "level"}) {
    EXPECT_NE(first.find(f), nullptr) << f;
  }
  EXPECT_NE(doc.get({"spec", "deployment", "order"}), nullptr);
  EXPECT_NE(doc.get({"spec", "deployment", "levels"}), nullptr);
  EXPECT_GT(doc.get({"spec", "constraints"})->size(), 0u);
  EXPECT_GT(doc.get({"spec", "health"})->size(), 0u);
  EXPECT_GT(doc.get({"spec", "overlays"})->size(), 0u);
  EXPECT_EQ(doc.get({"spec", "nodePools"})->size(), 1u);
}

TEST(RecipeDocumentTest, RoundTripsThroughYaml) {
  Recipe r = example();
  std::string text = recipe_to_yaml(r);
  Recipe back = recipe_from_yaml(text, "recipe.yaml");
  EXPECT_EQ(recipe_to_yaml(back), text);
}

std::string edited(std::string text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(RecipeDocumentTest, UserInputWithFloatingVersionIsRejected) {
  std::string text = recipe_to_yaml(example());
  try {
    recipe_from_yaml(edited(text, "version: v1.20.2", "version: latest"), "recipe.yaml");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("components[cert-manager].chart.version"));
    EXPECT_THAT(e.what(), HasSubstr("'latest'"));
  }
  EXPECT_THROW(recipe_from_yaml(edited(text, "version: v1.20.2", "version: ~1.20.0"), "r"),
               core::InvalidInput);
}

TEST(RecipeDocumentTest, UnknownDependencyAndCycleInUserRecipeAreErrors) {
  const char* head = R"(apiVersion: gpufleet.io/v1alpha1
kind: Recipe
metadata: {name: r, digest: "sha256:00"}
spec:
  components:
)";
  std::string a =
      "    - {name: a, namespace: x, chart: {repository: https://c.example, name: a, version: "
      "1.0.0}, dependencies: [b]}\n";
  try {
    recipe_from_yaml(std::string(head) + a, "r.yaml");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("'a' depends on 'b'"));
  }
  std::string b =
      "    - {name: b, namespace: x, chart: {repository: https://c.example, name: b, version: "
      "1.0.0}, dependencies: [a]}\n";
  try {
    recipe_from_yaml(std::string(head) + a + b, "r.yaml");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("a -> b -> a"));
  }
  EXPECT_THROW(recipe_from_yaml("apiVersion: v1\nkind: ConfigMap\n", "r.yaml"), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::recipe
