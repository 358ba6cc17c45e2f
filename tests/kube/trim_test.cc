#include "kube/api/trim.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/json.h"
#include "kube/api/objects.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

TEST(Projection, KeepsOnlyNamedPathsThroughLists) {
  core::Value v = core::parse_json(R"({"a":{"b":1,"c":2},"l":[{"x":1,"y":2},{"x":3}],"z":"drop"})");
  Projection p({"a.b", "l.x"});
  EXPECT_EQ(core::to_json(p.apply(std::move(v))), R"({"a":{"b":1},"l":[{"x":1},{"x":3}]})");
}

TEST(Projection, CopiesAreIndependent) {
  Projection a({"a"});
  Projection b = a;
  b.keep("b");
  core::Value v = core::parse_json(R"({"a":1,"b":2})");
  core::Value w = v;
  EXPECT_EQ(core::to_json(a.apply(std::move(v))), R"({"a":1})");
  EXPECT_EQ(core::to_json(b.apply(std::move(w))), R"({"a":1,"b":2})");
}

TEST(Projection, NodeCacheFieldsKeepWhatControllersRead) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/node-gpu.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  core::JsonPrune prune;
  for (const auto& path : node_prune_paths()) prune.add(path);
  core::Value node = core::parse_json(ss.str(), "node", &prune);
  EXPECT_EQ(node.get({"status", "images"}), nullptr);
  EXPECT_EQ(node.get({"metadata", "managedFields"}), nullptr);
  core::Value cached = Projection(node_cache_fields()).apply(std::move(node));
  EXPECT_TRUE(node::ready(cached));
  EXPECT_EQ(node::allocatable(cached, "nvidia.com/gpu"), "8");
  EXPECT_EQ(node::taints(cached).size(), 1u);
  EXPECT_EQ(node::kubelet_version(cached), "v1.32.4");
  EXPECT_EQ(label_of(cached, "nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(cached.get({"status", "addresses"}), nullptr);
  EXPECT_EQ(find_condition(cached, "Ready")->find("lastHeartbeatTime"), nullptr);
}

}  // namespace
}  // namespace gpufleet::kube
