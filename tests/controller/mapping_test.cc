// Event -> key mappings (controller/mapping.h).
#include "controller/mapping.h"

#include <gtest/gtest.h>

#include "core/yaml.h"

namespace gpufleet::controller {
namespace {

core::Value yaml(const std::string& text) { return core::parse_yaml(text, "test"); }

TEST(Mapping, ToSelf) {
  EXPECT_EQ(mapping::to_self()(yaml("{metadata: {name: a, namespace: ns}}")),
            (std::vector<Request>{{"ns", "a"}}));
  EXPECT_EQ(mapping::to_self()(yaml("{metadata: {name: node-1}}")),
            (std::vector<Request>{{"", "node-1"}}));
}

TEST(Mapping, ToControllerOwnerMatchesGroupAndKindAndControllerFlag) {
  core::Value child = yaml(R"({metadata: {name: c, namespace: ns, ownerReferences: [
      {apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: u1, controller: true},
      {apiVersion: gpufleet.io/v1alpha1, kind: NodeSet, name: not-controller, uid: u2},
      {apiVersion: gpufleet.io/v1alpha1, kind: NodeSet, name: set-a, uid: u3, controller: true}]}})");
  EXPECT_EQ(mapping::to_controller_owner("gpufleet.io", "NodeSet", true)(child),
            (std::vector<Request>{{"ns", "set-a"}}));
  EXPECT_EQ(mapping::to_controller_owner("gpufleet.io", "NodeSet", false)(child),
            (std::vector<Request>{{"", "set-a"}}));
  EXPECT_EQ(mapping::to_controller_owner("apps", "ReplicaSet", true)(child),
            (std::vector<Request>{{"ns", "rs"}}));
  EXPECT_TRUE(mapping::to_controller_owner("", "ReplicaSet", true)(child).empty());  // wrong group
  EXPECT_TRUE(mapping::to_controller_owner("apps", "Deployment", true)(child).empty());
  core::Value core_owned = yaml(R"({metadata: {name: c, namespace: ns, ownerReferences: [
      {apiVersion: v1, kind: ConfigMap, name: src, uid: u, controller: true}]}})");
  EXPECT_EQ(mapping::to_controller_owner("", "ConfigMap", true)(core_owned),
            (std::vector<Request>{{"ns", "src"}}));
  EXPECT_TRUE(
      mapping::to_controller_owner("", "ConfigMap", true)(yaml("{metadata: {name: x}}")).empty());
}

TEST(Mapping, NodeToEverySetThatSelectsIt) {
  std::vector<kube::ObjectPtr> sets = {
      std::make_shared<const core::Value>(
          yaml("{metadata: {name: h100}, spec: {nodeSelector: {matchLabels: {gpu: h100}}}}")),
      std::make_shared<const core::Value>(
          yaml("{metadata: {name: zone-a}, spec: {nodeSelector: {matchExpressions: [{key: zone, "
               "operator: In, values: [a]}]}}}")),
      std::make_shared<const core::Value>(
          yaml("{metadata: {name: all}, spec: {nodeSelector: {}}}")),
      std::make_shared<const core::Value>(yaml("{metadata: {name: none}, spec: {}}")),
  };
  auto map = mapping::by_selector([&] { return sets; }, "spec.nodeSelector");
  auto keys = map(yaml("{metadata: {name: n1, labels: {gpu: h100, zone: b}}}"));
  EXPECT_EQ(keys, (std::vector<Request>{{"", "h100"}, {"", "all"}}));
  keys = map(yaml("{metadata: {name: n2, labels: {gpu: a100, zone: a}}}"));
  EXPECT_EQ(keys, (std::vector<Request>{{"", "zone-a"}, {"", "all"}}));
  keys = map(yaml("{metadata: {name: n3}}"));
  EXPECT_EQ(keys, (std::vector<Request>{{"", "all"}}));
}

TEST(Mapping, RequestKeysRoundTrip) {
  EXPECT_EQ((Request{"ns", "a"}).key(), "ns/a");
  EXPECT_EQ((Request{"", "a"}).key(), "a");
  EXPECT_EQ(Request::from_key("ns/a"), (Request{"ns", "a"}));
  EXPECT_EQ(Request::from_key("node-1"), (Request{"", "node-1"}));
}

}  // namespace
}  // namespace gpufleet::controller
