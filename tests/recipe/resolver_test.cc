#include "recipe/resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/yaml.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::ElementsAre;
using testing::file;
using ::testing::HasSubstr;
using testing::repo_library;
using testing::small_library;

constexpr const char* kHead = "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\n";

Overlay overlay_with(CriteriaValues c) {
  Overlay o;
  o.criteria = c;
  return o;
}

std::vector<std::string> names(const Recipe& r) {
  std::vector<std::string> out;
  for (const Component& c : r.components) out.push_back(c.name);
  return out;
}

std::vector<std::string> overlay_names(const Recipe& r) {
  std::vector<std::string> out;
  for (const AppliedOverlay& o : r.overlays) out.push_back(o.name);
  return out;
}

Query query(CriteriaValues c) {
  Query q;
  q.criteria = std::move(c);
  return q;
}

TEST(ResolverTest, WildcardSemantics) {
  CriteriaValues any = any_criteria();
  CriteriaValues eks_h100 = any;
  eks_h100[kService] = "eks";
  eks_h100[kAccelerator] = "h100";
  CriteriaValues h100_overlay = any;
  h100_overlay[kAccelerator] = "h100";
  // A wildcard overlay matches any query value.
  EXPECT_TRUE(overlay_matches(overlay_with(any), eks_h100, std::nullopt));
  EXPECT_TRUE(overlay_matches(overlay_with(h100_overlay), eks_h100, std::nullopt));
  // A wildcard query matches only wildcard overlays: no hardware settings for a generic query.
  EXPECT_FALSE(overlay_matches(overlay_with(h100_overlay), any, std::nullopt));
  CriteriaValues b200 = any;
  b200[kAccelerator] = "b200";
  EXPECT_FALSE(overlay_matches(overlay_with(h100_overlay), b200, std::nullopt));
  // A node-count criterion needs a node count that satisfies it.
  Overlay big = overlay_with(any);
  big.node_count = parse_requirement(">= 64", "t");
  EXPECT_FALSE(overlay_matches(big, any, std::nullopt));
  EXPECT_FALSE(overlay_matches(big, any, 8));
  EXPECT_TRUE(overlay_matches(big, any, 64));
}

TEST(ResolverTest, GenericQueryGetsNoHardwareSettings) {
  Recipe r = resolve(repo_library(), query(any_criteria()));
  EXPECT_THAT(overlay_names(r), ElementsAre("base"));
  EXPECT_FALSE(r.pools[0].settings.find("mig"));
  for (const Component& c : r.components) EXPECT_NE(c.name, "dra-driver-nvidia-gpu");
}

TEST(ResolverTest, EksH100InferenceDynamo) {
  Recipe r = resolve(repo_library(), query({"eks", "h100", "ubuntu", "inference", "dynamo"}));
  EXPECT_EQ(r.name, "eks-h100-ubuntu-inference-dynamo");
  EXPECT_THAT(overlay_names(r), ElementsAre("base", "dynamo", "h100", "inference", "ubuntu",
                                            "managed-control-plane", "eks", "dynamo-inference"));
  std::vector<std::string> n = names(r);
  for (const char* want :
       {"cert-manager", "gpu-operator", "dynamo-platform", "grove", "kai-scheduler", "agentgateway",
        "prometheus-adapter", "aws-ebs-csi-driver", "gpufleet"}) {
    EXPECT_NE(std::find(n.begin(), n.end(), want), n.end()) << want;
  }
  // EFA on every EKS recipe: disaggregated serving moves KV caches over it (NIXL).
  EXPECT_NE(std::find(n.begin(), n.end(), "aws-efa-k8s-device-plugin"), n.end());
  // Every component comes after its dependencies, at a higher level.
  std::map<std::string, int> level;
  for (const Component& c : r.components) {
    for (const std::string& d : c.dependencies) {
      ASSERT_TRUE(level.count(d)) << c.name << " before " << d;
      EXPECT_LT(level[d], c.level);
    }
    level[c.name] = c.level;
  }
  // Managed control plane mixin reached kube-prometheus-stack values.
  for (const Component& c : r.components) {
    if (c.name == "kube-prometheus-stack") {
      EXPECT_EQ(c.values.get({"kubeScheduler", "enabled"})->as_bool(), false);
      EXPECT_EQ(c.values.get({"crds", "enabled"})->as_bool(), false);
    }
  }
  EXPECT_EQ(r.pools[0].settings.get_string({"mig", "strategy"}), "single");
  EXPECT_EQ(r.digest.size(), 7u + 64u);
}

TEST(ResolverTest, MoreSpecificOverlayWinsAndChildInheritsCriteria) {
  Recipe r = resolve(repo_library(), query({"gke", "gb200", "cos", "training", "kubeflow"}));
  for (const Component& c : r.components) {
    if (c.name == "gpu-operator") {
      EXPECT_EQ(c.values.get({"driver", "enabled"})->as_bool(), false);  // gke-cos over registry
      EXPECT_EQ(c.values.get_string({"driver", "version"}), "580.126.20");
    }
    if (c.name == "dra-driver-nvidia-gpu") {
      EXPECT_EQ(c.values.get_string({"nvidiaDriverRoot"}), "/home/kubernetes/bin/nvidia");
    }
  }
  const Constraint* k8s = nullptr;
  for (const Constraint& c : r.constraints) {
    if (c.name == "kubernetes-version") k8s = &c;
  }
  ASSERT_NE(k8s, nullptr);
  EXPECT_EQ(k8s->requirement, ">= 1.33");  // gke over base
  EXPECT_EQ(r.pools[0].settings.get_string({"driver", "kernelModuleType"}), "open");
}

TEST(ResolverTest, NodeCountSelectsLargeClusterOverlay) {
  Query q = query({"kind", "h100", "ubuntu", "training", "kubeflow"});
  Recipe small = resolve(repo_library(), q);
  q.node_count = 128;
  Recipe large = resolve(repo_library(), q);
  auto retention = [](const Recipe& r) {
    for (const Component& c : r.components) {
      if (c.name == "kube-prometheus-stack") {
        return std::string(c.values.get_string({"prometheus", "prometheusSpec", "retention"}));
      }
    }
    return std::string();
  };
  EXPECT_EQ(retention(small), "15d");
  EXPECT_EQ(retention(large), "30d");
  EXPECT_NE(small.digest, large.digest);
}

TEST(ResolverTest, HeterogeneousPoolsGetTheirOwnSettings) {
  Query q = query({"oke", "any", "ubuntu", "training", "kubeflow"});
  q.pools = {parse_pool_flag("train=gb200:18"), parse_pool_flag("serve=h100")};
  Recipe r = resolve(repo_library(), q);
  EXPECT_EQ(r.name, "oke-mixed-ubuntu-training-kubeflow");
  ASSERT_EQ(r.pools.size(), 2u);
  EXPECT_EQ(r.pools[0].name, "train");
  EXPECT_EQ(r.pools[0].settings.get_string({"driver", "kernelModuleType"}), "open");
  EXPECT_TRUE(r.pools[0].settings.get({"imex", "computeDomains"}));
  EXPECT_EQ(r.pools[1].settings.get_string({"driver", "kernelModuleType"}), "auto");
  EXPECT_EQ(r.pools[1].settings.get_string({"mig", "strategy"}), "single");
  EXPECT_EQ(r.pools[1].node_selector.get_string({"gpufleet.io/node-pool"}), "serve");
  EXPECT_THAT(r.pools[0].overlays, ::testing::Contains("gb200"));
  EXPECT_THAT(r.pools[1].overlays, ::testing::Not(::testing::Contains("gb200")));
  // Cluster-wide: the DRA driver for the GB200 pool, the mixed MIG strategy.
  bool dra = false;
  for (const Component& c : r.components) {
    dra = dra || c.name == "dra-driver-nvidia-gpu";
    if (c.name == "gpu-operator") {
      EXPECT_EQ(c.values.get_string({"mig", "strategy"}), "mixed");
    }
  }
  EXPECT_TRUE(dra);
  for (const AppliedOverlay& o : r.overlays) {
    if (o.name == "gb200") {
      EXPECT_THAT(o.pools, ElementsAre("train"));
    }
    if (o.name == "base") {
      EXPECT_THAT(o.pools, ElementsAre("train", "serve"));
    }
  }
}

TEST(ResolverTest, InvalidCriteriaListValidValues) {
  try {
    resolve(repo_library(), query({"eks", "a99", "ubuntu", "training", "dynamo"}));
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("--accelerator 'a99' is not a known accelerator"));
    EXPECT_THAT(e.what(), HasSubstr("b200, gb200, h100, h200"));
  }
  Query q = query({"eks", "h100", "ubuntu", "training", "dynamo"});
  q.pools = {parse_pool_flag("x=h100")};
  EXPECT_THROW(resolve(repo_library(), q), core::InvalidInput);
  EXPECT_THROW(parse_pool_flag("x"), core::InvalidInput);
  EXPECT_THROW(parse_pool_flag("X=h100"), core::InvalidInput);
  EXPECT_THROW(parse_pool_flag("x=h100:0"), core::InvalidInput);
  q = query({"eks", "h100", "ubuntu", "training", "dynamo"});
  q.mixins = {"nope"};
  EXPECT_THROW(resolve(repo_library(), q), core::InvalidInput);
}

TEST(ResolverTest, ConflictBetweenUnrelatedOverlaysNamesBothFiles) {
  auto files = small_library({
      file("overlays/eks.yaml",
           std::string(kHead) +
               "criteria: {service: eks}\ncomponents: {a: {enabled: true, values: {x: 2}}}\n"),
      file("overlays/h100.yaml",
           std::string(kHead) +
               "criteria: {accelerator: h100}\ncomponents: {a: {values: {x: 3}}}\n"),
  });
  Library lib = load_library(files);
  try {
    resolve(lib, query({"eks", "h100", "any", "any", "any"}));
    FAIL() << "no conflict";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("components.a.values.x"));
    EXPECT_THAT(e.what(), HasSubstr("test:overlays/eks.yaml"));
    EXPECT_THAT(e.what(), HasSubstr("test:overlays/h100.yaml"));
  }
  // A more specific overlay settles it.
  files.push_back(
      file("overlays/eks-h100.yaml",
           std::string(kHead) +
               "criteria: {service: eks, accelerator: h100}\ncomponents: {a: {values: {x: 4}}}\n"));
  Recipe r = resolve(load_library(files), query({"eks", "h100", "any", "any", "any"}));
  EXPECT_EQ(r.components[0].values.get({"x"})->as_int(), 4);
  EXPECT_EQ(r.components[0].values.get({"nested", "keep"})->as_bool(), true);
}

TEST(ResolverTest, DependencyOnDisabledComponentAndCyclesAreErrors) {
  auto files = small_library(
      {file("overlays/o.yaml", std::string(kHead) + "components: {b: {enabled: true}}\n")});
  try {
    resolve(load_library(files), query(any_criteria()));
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("'b' depends on 'a'"));
  }
  files = small_library(
      {file("overlays/o.yaml",
            std::string(kHead) +
                "components: {a: {enabled: true, dependencies: [d]}, b: {enabled: true}, "
                "c: {enabled: true}, d: {enabled: true}}\n")});
  try {
    resolve(load_library(files), query(any_criteria()));
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("dependency cycle: a -> d -> b -> a"));
  }
}

TEST(ResolverTest, SameInputsGiveTheSameDigestAndDataChangesIt) {
  Query q = query({"eks", "h100", "ubuntu", "inference", "dynamo"});
  Recipe a = resolve(repo_library(), q);
  Recipe b = resolve(repo_library(), q);
  EXPECT_EQ(recipe_to_yaml(a), recipe_to_yaml(b));
  std::vector<LibraryFile> files = testing::repo_library_files();
  for (LibraryFile& f : files) {
    if (f.path == "overlays/h100.yaml") f.content += "# edited\n";
  }
  EXPECT_NE(resolve(load_library(files), q).digest, a.digest);
}

}  // namespace
}  // namespace gpufleet::recipe
