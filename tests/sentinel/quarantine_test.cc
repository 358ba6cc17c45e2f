#include "sentinel/quarantine.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::sentinel {
namespace {

core::Value json(std::string_view s) { return core::parse_json(s); }

// Applies a NodeChange to a Node value the way the controller's patch would.
void apply(core::Value& node, const NodeChange& c) {
  if (c.unschedulable) node["spec"]["unschedulable"] = *c.unschedulable;
  core::Value taints = core::Value::list();
  if (const core::Value* t = node.get({"spec", "taints"})) {
    for (const auto& x : t->as_list()) {
      Taint have{std::string(x.get_string({"key"})), std::string(x.get_string({"value"})),
                 std::string(x.get_string({"effect"}))};
      if (std::find(c.remove_taints.begin(), c.remove_taints.end(), have) ==
          c.remove_taints.end()) {
        taints.push_back(x);
      }
    }
  }
  for (const auto& t : c.add_taints) {
    core::Value x = core::Value::map();
    x["key"] = t.key;
    x["value"] = t.value;
    x["effect"] = t.effect;
    taints.push_back(std::move(x));
  }
  node["spec"]["taints"] = std::move(taints);
  if (c.annotation) {
    if (c.annotation->empty()) {
      node["metadata"]["annotations"].as_map().erase(kQuarantineAnnotation);
    } else {
      node["metadata"]["annotations"][kQuarantineAnnotation] = *c.annotation;
    }
  }
}

Decision fatal() {
  Decision d;
  d.cordon = true;
  d.taints.push_back(Taint::parse("nvidia.com/gpu-error=fatal:NoSchedule", "t"));
  return d;
}

core::Value health(std::string_view gpu_a, std::string_view port) {
  return json(std::string(R"({"status":{"checks":[{"name":"xid","state":"Fatal","entities":[)") +
              R"({"id":"GPU-a","state":")" + std::string(gpu_a) +
              R"("},{"id":"GPU-b","state":"Healthy"}]},)" +
              R"({"name":"ib-port","entities":[{"id":"mlx5_0/1","state":")" + std::string(port) +
              R"("}]},{"name":"disk","state":"Warning"}]}})");
}

TEST(Quarantine, FaultyEntitiesFromNodeHealth) {
  auto f = faulty_entities(health("Fatal", "Healthy"));
  EXPECT_EQ(f, (std::set<std::string>{"xid/GPU-a", "disk"}));
}

TEST(Quarantine, LeavesOnlyWhenEveryEntityRecovered) {
  core::Value node = json(R"({"metadata":{"name":"n1"},"spec":{}})");
  apply(node, plan_quarantine(node, fatal(), {"xid/GPU-a"}));
  Decision cordon_only;
  cordon_only.cordon = true;
  apply(node, plan_quarantine(node, cordon_only, {"ib-port/mlx5_0/1"}));
  EXPECT_TRUE(node.get({"spec", "unschedulable"})->as_bool());
  EXPECT_EQ(node.get({"spec", "taints"})->size(), 1u);
  EXPECT_EQ(QuarantineRecord::from_node(node).entities.size(), 2u);

  // GPU-a recovered, the port not yet: stays, the record forgets GPU-a.
  auto c = plan_release(node, faulty_entities(health("Healthy", "Fatal")));
  EXPECT_FALSE(c.unschedulable);
  EXPECT_TRUE(c.remove_taints.empty());
  apply(node, c);
  EXPECT_EQ(QuarantineRecord::from_node(node).entities, std::set<std::string>{"ib-port/mlx5_0/1"});
  // All recovered: undone.
  c = plan_release(node, faulty_entities(health("Healthy", "Healthy")));
  ASSERT_TRUE(c.unschedulable);
  EXPECT_FALSE(*c.unschedulable);
  ASSERT_EQ(c.remove_taints.size(), 1u);
  apply(node, c);
  EXPECT_EQ(node.get({"spec", "taints"})->size(), 0u);
  EXPECT_TRUE(QuarantineRecord::from_node(node).empty());
  EXPECT_TRUE(plan_release(node, {}).empty());  // idempotent
}

TEST(Quarantine, SomeoneElsesCordonAndTaintAreLeftAlone) {
  core::Value node = json(R"({"metadata":{"name":"n1"},"spec":{"unschedulable":true,"taints":[
      {"key":"nvidia.com/gpu-error","value":"manual","effect":"NoSchedule"},
      {"key":"maintenance","value":"","effect":"NoExecute"}]}})");
  auto c = plan_quarantine(node, fatal(), {"xid/GPU-a"});
  EXPECT_FALSE(c.unschedulable);      // already cordoned by someone else
  EXPECT_TRUE(c.add_taints.empty());  // same key and effect present: not ours
  apply(node, c);
  auto rec = QuarantineRecord::from_node(node);
  EXPECT_FALSE(rec.cordoned);
  EXPECT_TRUE(rec.taints.empty());
  c = plan_release(node, {});
  EXPECT_FALSE(c.unschedulable);
  EXPECT_TRUE(c.remove_taints.empty());
  apply(node, c);
  EXPECT_TRUE(node.get({"spec", "unschedulable"})->as_bool());
  EXPECT_EQ(node.get({"spec", "taints"})->size(), 2u);
}

TEST(Quarantine, OurTaintChangedBySomeoneIsKept) {
  core::Value node = json(R"({"metadata":{"name":"n1"},"spec":{}})");
  apply(node, plan_quarantine(node, fatal(), {"xid/GPU-a"}));
  node["spec"]["taints"] =
      json(R"([{"key":"nvidia.com/gpu-error","value":"rma","effect":"NoSchedule"}])");
  auto c = plan_release(node, {});
  EXPECT_TRUE(c.remove_taints.empty());
  EXPECT_TRUE(c.unschedulable.has_value());
}

TEST(Quarantine, DamagedAnnotationIsNamed) {
  core::Value node =
      json(R"({"metadata":{"annotations":{"sentinel.gpufleet.io/quarantine":"{oops"}}})");
  try {
    (void)plan_release(node, {});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("sentinel.gpufleet.io/quarantine"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpufleet::sentinel
