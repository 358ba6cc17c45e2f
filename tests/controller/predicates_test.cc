// Event predicates (controller/predicates.h).
#include "controller/predicates.h"

#include <gtest/gtest.h>

#include "core/yaml.h"

namespace gpufleet::controller {
namespace {

core::Value obj(const std::string& meta) {
  return core::parse_yaml("{metadata: " + meta + "}", "test");
}

bool update_passes(const Predicate& p, const core::Value& a, const core::Value& b) {
  return p({WatchEvent::Type::Update, &a, b});
}

TEST(Predicates, GenerationChanged) {
  auto p = predicates::generation_changed();
  core::Value g1 = obj("{name: x, generation: 1, resourceVersion: '5'}");
  core::Value g1_status = obj("{name: x, generation: 1, resourceVersion: '6'}");
  core::Value g2 = obj("{name: x, generation: 2, resourceVersion: '7'}");
  EXPECT_FALSE(update_passes(p, g1, g1_status));  // status-only write
  EXPECT_TRUE(update_passes(p, g1_status, g2));
  EXPECT_TRUE(p({WatchEvent::Type::Add, nullptr, g1}));
  EXPECT_TRUE(p({WatchEvent::Type::Delete, nullptr, g1}));
}

TEST(Predicates, LabelsAndAnnotationsChanged) {
  core::Value a = obj("{name: x, labels: {k: v}, annotations: {n: '1'}}");
  core::Value b = obj("{name: x, labels: {k: v}, annotations: {n: '2'}}");
  core::Value c = obj("{name: x, labels: {k: w}, annotations: {n: '2'}}");
  core::Value none = obj("{name: x}");
  EXPECT_FALSE(update_passes(predicates::labels_changed(), a, b));
  EXPECT_TRUE(update_passes(predicates::labels_changed(), b, c));
  EXPECT_TRUE(update_passes(predicates::labels_changed(), c, none));  // all labels removed
  EXPECT_TRUE(update_passes(predicates::annotations_changed(), a, b));
  EXPECT_FALSE(update_passes(predicates::annotations_changed(), b, c));
}

TEST(Predicates, ResyncIsDroppedByResourceVersionChanged) {
  core::Value a = obj("{name: x, resourceVersion: '5'}");
  core::Value b = obj("{name: x, resourceVersion: '6'}");
  EXPECT_FALSE(update_passes(predicates::resource_version_changed(), a, a));
  EXPECT_TRUE(update_passes(predicates::resource_version_changed(), a, b));
}

TEST(Predicates, Combinators) {
  core::Value a = obj("{name: x, generation: 1, labels: {k: v}}");
  core::Value b = obj("{name: x, generation: 1, labels: {k: w}}");
  auto gen = predicates::generation_changed();
  auto lab = predicates::labels_changed();
  EXPECT_TRUE(update_passes(predicates::any_of({gen, lab}), a, b));
  EXPECT_FALSE(update_passes(predicates::all_of({gen, lab}), a, b));
  EXPECT_TRUE(update_passes(predicates::negate(gen), a, b));
  EXPECT_FALSE(update_passes(predicates::any_of({}), a, b));
  EXPECT_TRUE(passes({}, {WatchEvent::Type::Update, &a, b}));
  EXPECT_FALSE(passes({lab, gen}, {WatchEvent::Type::Update, &a, b}));
}

}  // namespace
}  // namespace gpufleet::controller
