#include "sentinel/quarantine.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::sentinel {
namespace {

core::Value json(std::string_view s) { return core::parse_json(s); }

// RFC 7386 merge patch, as the API server applies node_patch()'s result.
void merge(core::Value& target, const core::Value& patch) {
  if (!patch.is_map()) {
    target = patch;
    return;
  }
  if (!target.is_map()) target = core::Value::map();
  for (const auto& e : patch.as_map()) {
    if (e.value.is_null()) {
      target.as_map().erase(e.key);
    } else {
      merge(target[e.key], e.value);
    }
  }
}

void apply(core::Value& node, const NodeChange& c) {
  if (auto p = node_patch(node, c)) merge(node, *p);
}

bool unschedulable(const core::Value& node) {
  const core::Value* u = node.get({"spec", "unschedulable"});
  return u != nullptr && u->as_bool();
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
  EXPECT_TRUE(unschedulable(node));
  EXPECT_EQ(node.get_string({"metadata", "annotations", "gpufleet.io/cordon-owners"}), "sentinel");
  EXPECT_EQ(node.get({"spec", "taints"})->size(), 1u);
  EXPECT_EQ(QuarantineRecord::from_node(node).entities.size(), 2u);

  // GPU-a recovered, the port not yet: stays, the record forgets GPU-a.
  auto c = plan_release(node, faulty_entities(health("Healthy", "Fatal")));
  EXPECT_FALSE(c.uncordon);
  EXPECT_TRUE(c.remove_taints.empty());
  apply(node, c);
  EXPECT_EQ(QuarantineRecord::from_node(node).entities, std::set<std::string>{"ib-port/mlx5_0/1"});
  // All recovered: undone.
  c = plan_release(node, faulty_entities(health("Healthy", "Healthy")));
  EXPECT_TRUE(c.uncordon);
  ASSERT_EQ(c.remove_taints.size(), 1u);
  apply(node, c);
  EXPECT_FALSE(unschedulable(node));
  EXPECT_EQ(node.get_string({"metadata", "annotations", "gpufleet.io/cordon-owners"}), "");
  EXPECT_EQ(node.get({"spec", "taints"})->size(), 0u);
  EXPECT_TRUE(QuarantineRecord::from_node(node).empty());
  EXPECT_TRUE(plan_release(node, {}).empty());  // idempotent
}

TEST(Quarantine, SomeoneElsesCordonAndTaintAreLeftAlone) {
  core::Value node = json(R"({"metadata":{"name":"n1"},"spec":{"unschedulable":true,"taints":[
      {"key":"nvidia.com/gpu-error","value":"manual","effect":"NoSchedule"},
      {"key":"maintenance","value":"","effect":"NoExecute"}]}})");
  auto c = plan_quarantine(node, fatal(), {"xid/GPU-a"});
  EXPECT_FALSE(c.cordon);             // already cordoned by someone else: not claimed
  EXPECT_TRUE(c.add_taints.empty());  // same key and effect present: not ours
  apply(node, c);
  auto rec = QuarantineRecord::from_node(node);
  EXPECT_FALSE(rec.cordoned);
  EXPECT_TRUE(rec.taints.empty());
  c = plan_release(node, {});
  EXPECT_FALSE(c.uncordon);
  EXPECT_TRUE(c.remove_taints.empty());
  apply(node, c);
  EXPECT_TRUE(unschedulable(node));
  EXPECT_EQ(node.get({"spec", "taints"})->size(), 2u);
}

TEST(Quarantine, OurTaintChangedBySomeoneIsKept) {
  core::Value node = json(R"({"metadata":{"name":"n1"},"spec":{}})");
  apply(node, plan_quarantine(node, fatal(), {"xid/GPU-a"}));
  node["spec"]["taints"] =
      json(R"([{"key":"nvidia.com/gpu-error","value":"rma","effect":"NoSchedule"}])");
  auto c = plan_release(node, {});
  EXPECT_TRUE(c.remove_taints.empty());
  EXPECT_TRUE(c.uncordon);
}

TEST(Quarantine, SharesTheCordonWithHostpkgAndLeavesItsShareOnly) {
  core::Value node = json(R"({"metadata":{"name":"n1","resourceVersion":"7",
      "annotations":{"gpufleet.io/cordon-owners":"hostpkg"}},"spec":{"unschedulable":true}})");
  auto c = plan_quarantine(node, fatal(), {"xid/GPU-a"}, "n1-1");
  EXPECT_TRUE(c.cordon);
  auto p = node_patch(node, c);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->get_string({"metadata", "resourceVersion"}), "7");  // compare-and-swap
  apply(node, c);
  EXPECT_EQ(node.get_string({"metadata", "annotations", "gpufleet.io/cordon-owners"}),
            "hostpkg,sentinel");
  EXPECT_EQ(QuarantineRecord::from_node(node).incident, "n1-1");
  apply(node, plan_release(node, {}));
  EXPECT_TRUE(unschedulable(node));  // hostpkg still holds it
  EXPECT_EQ(node.get_string({"metadata", "annotations", "gpufleet.io/cordon-owners"}), "hostpkg");
  EXPECT_TRUE(QuarantineRecord::from_node(node).empty());
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
