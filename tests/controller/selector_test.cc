// metav1.LabelSelector matching and validation (kube/api/selector.h).
#include "kube/api/selector.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"

namespace gpufleet::kube {
namespace {

core::Value yaml(const std::string& text) { return core::parse_yaml(text, "test"); }

TEST(Selector, MatchLabelsAndExpressions) {
  core::Value labels = yaml("{gpu: h100, zone: a, tier: gold}");
  EXPECT_TRUE(selector_matches(yaml("{matchLabels: {gpu: h100}}"), labels));
  EXPECT_FALSE(selector_matches(yaml("{matchLabels: {gpu: a100}}"), labels));
  EXPECT_FALSE(selector_matches(yaml("{matchLabels: {missing: x}}"), labels));
  EXPECT_TRUE(selector_matches(
      yaml("{matchExpressions: [{key: zone, operator: In, values: [a, b]}]}"), labels));
  EXPECT_FALSE(selector_matches(
      yaml("{matchExpressions: [{key: zone, operator: NotIn, values: [a]}]}"), labels));
  EXPECT_TRUE(selector_matches(
      yaml("{matchExpressions: [{key: other, operator: NotIn, values: [a]}]}"), labels));
  EXPECT_TRUE(
      selector_matches(yaml("{matchExpressions: [{key: tier, operator: Exists}]}"), labels));
  EXPECT_FALSE(
      selector_matches(yaml("{matchExpressions: [{key: tier, operator: DoesNotExist}]}"), labels));
  // ANDed.
  EXPECT_FALSE(selector_matches(
      yaml(
          "{matchLabels: {gpu: h100}, matchExpressions: [{key: zone, operator: In, values: [b]}]}"),
      labels));
}

TEST(Selector, EmptySelectsEverythingAndNoLabelsAreEmpty) {
  EXPECT_TRUE(selector_matches(yaml("{}"), yaml("{a: b}")));
  EXPECT_TRUE(selector_matches(core::Value(), core::Value()));
  EXPECT_FALSE(selector_matches(yaml("{matchLabels: {a: b}}"), core::Value()));
  EXPECT_TRUE(selector_matches(yaml("{matchExpressions: [{key: a, operator: DoesNotExist}]}"),
                               core::Value()));
}

TEST(Selector, ValidationNamesTheField) {
  auto message_of = [](const std::string& text) {
    try {
      validate_label_selector(yaml(text), "spec.nodeSelector");
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message_of("{matchLabels: {a: b}}"), "");
  EXPECT_NE(message_of("{matchExpressions: [{key: a, operator: Has}]}")
                .find("spec.nodeSelector.matchExpressions[0].operator \"Has\""),
            std::string::npos);
  EXPECT_NE(message_of("{matchExpressions: [{key: a, operator: In}]}").find("needs values"),
            std::string::npos);
  EXPECT_NE(message_of("{matchExpressions: [{key: a, operator: Exists, values: [x]}]}")
                .find("takes no values"),
            std::string::npos);
  EXPECT_NE(message_of("{matchLabel: {a: b}}").find("use matchLabels or matchExpressions"),
            std::string::npos);
  EXPECT_NE(message_of("{matchLabels: {'bad key!': b}}").find("matchLabels key"),
            std::string::npos);
}

}  // namespace
}  // namespace gpufleet::kube
