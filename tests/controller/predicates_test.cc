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

TEST(Predicates, FieldsChangedLooksOnlyAtItsPaths) {
  auto p =
      predicates::fields_changed({{"spec", "unschedulable"}, {"status", "nodeInfo", "bootID"}});
  auto node = [](const std::string& spec, const std::string& status) {
    return core::parse_yaml("{metadata: {name: n}, spec: " + spec + ", status: " + status + "}",
                            "test");
  };
  core::Value a = node("{}", "{nodeInfo: {bootID: b1}, allocatable: {cpu: '1'}}");
  core::Value b = node("{}", "{nodeInfo: {bootID: b1}, allocatable: {cpu: '2'}}");
  core::Value c = node("{unschedulable: true}", "{nodeInfo: {bootID: b1}}");
  core::Value d = node("{unschedulable: true}", "{nodeInfo: {bootID: b2}}");
  core::Value e = node("{unschedulable: true}", "{}");
  EXPECT_FALSE(update_passes(p, a, b));  // a field not named
  EXPECT_TRUE(update_passes(p, b, c));   // appeared
  EXPECT_TRUE(update_passes(p, c, b));   // went
  EXPECT_TRUE(update_passes(p, c, d));   // changed
  EXPECT_TRUE(update_passes(p, d, e));   // its parent went
  EXPECT_TRUE(p({WatchEvent::Type::Add, nullptr, a}));
}

TEST(Predicates, AnnotationsChangedWithPrefixIgnoresOthers) {
  auto p = predicates::annotations_changed_with_prefix({"rec.", "owners"});
  core::Value a = obj("{name: x, annotations: {rec.s1: '1', other: a}}");
  core::Value b = obj("{name: x, annotations: {rec.s1: '1', other: b}}");
  core::Value c = obj("{name: x, annotations: {rec.s1: '2', other: b}}");
  core::Value d = obj("{name: x, annotations: {rec.s1: '2', rec.s2: '1', other: b}}");
  core::Value e = obj("{name: x, annotations: {rec.s1: '2', rec.s2: '1', owners: h}}");
  core::Value none = obj("{name: x}");
  EXPECT_FALSE(update_passes(p, a, b));
  EXPECT_TRUE(update_passes(p, b, c));
  EXPECT_TRUE(update_passes(p, c, d));  // a matching key appeared
  EXPECT_TRUE(update_passes(p, d, c));  // and went
  EXPECT_TRUE(update_passes(p, d, e));  // a whole key is its own prefix
  EXPECT_TRUE(update_passes(p, e, none));
  EXPECT_FALSE(update_passes(p, none, obj("{name: x, annotations: {other: a}}")));
}

TEST(Predicates, ConditionChangedIgnoresHeartbeats) {
  auto p = predicates::condition_changed("Ready", {"status"});
  auto node = [](const std::string& conditions) {
    return core::parse_yaml("{metadata: {name: n}, status: {conditions: " + conditions + "}}",
                            "test");
  };
  core::Value a =
      node("[{type: Ready, status: 'True', lastHeartbeatTime: t1}, {type: X, status: 'False'}]");
  core::Value b =
      node("[{type: Ready, status: 'True', lastHeartbeatTime: t2}, {type: X, status: 'True'}]");
  core::Value c = node("[{type: Ready, status: 'False', lastHeartbeatTime: t2}]");
  core::Value none = node("[]");
  EXPECT_FALSE(update_passes(p, a, b));  // a heartbeat, and another condition
  EXPECT_TRUE(update_passes(p, b, c));
  EXPECT_TRUE(update_passes(p, c, none));  // the condition went
  EXPECT_TRUE(update_passes(p, none, c));
  EXPECT_FALSE(update_passes(p, none, none));
}

}  // namespace
}  // namespace gpufleet::controller
