// Snapshot facts from real-format Kubernetes objects and Helm release records, validation of
// constraints and health, and drift.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "core/json.h"
#include "recipe/drift.h"
#include "recipe/resolver.h"
#include "recipe/snapshot.h"
#include "recipe/validate.h"
#include "support/source_paths.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;

core::Value read_json(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/recipe/testdata/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return core::parse_json(s.str(), name);
}

Snapshot fixture_snapshot() {
  core::Value objs = read_json("cluster-objects.json");
  ClusterObjects o;
  o.kubernetes_version = std::string(objs.get_string({"kubernetesVersion"}));
  o.nodes = objs.find("nodes")->as_list();
  o.crds = objs.find("crds")->as_list();
  o.deployments = objs.find("deployments")->as_list();
  o.daemon_sets = objs.find("daemonSets")->as_list();
  o.pods = objs.find("pods")->as_list();
  o.helm_release_secrets = read_json("helm-releases.json").find("items")->as_list();
  return snapshot_from_objects(o);
}

Recipe eks_recipe() {
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "training", "kubeflow"};
  return resolve(testing::repo_library(), q);
}

const CheckResult* find_result(const ValidationReport& r, const std::string& name,
                               const std::string& subject) {
  for (const CheckResult& c : r.results) {
    if (c.name.find(name) != std::string::npos && c.subject.find(subject) != std::string::npos)
      return &c;
  }
  return nullptr;
}

TEST(SnapshotTest, NodeFactsFromLabelsNodeInfoAndCapacity) {
  Snapshot s = fixture_snapshot();
  ASSERT_EQ(s.nodes.size(), 3u);
  const NodeFacts& n1 = s.nodes[0];
  EXPECT_EQ(n1.name, "gpu-node-1");
  EXPECT_EQ(n1.os, "ubuntu");
  EXPECT_EQ(n1.os_version, "24.04");
  EXPECT_EQ(n1.kernel, "6.8.0-1015-aws");
  EXPECT_EQ(n1.gpu_product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(n1.gpu_driver, "580.126.20");
  EXPECT_EQ(n1.gpu_count, 8);
  const NodeFacts& n2 = s.nodes[1];
  EXPECT_EQ(n2.os, "ubuntu");  // from osImage when NFD labels are absent
  EXPECT_EQ(n2.gpu_count, 8);  // from capacity
  EXPECT_EQ(n2.gpu_driver, "570.133.20");
  EXPECT_EQ(s.nodes[2].gpu_count, 0);
}

TEST(SnapshotTest, HelmReleasesLatestRevisionWithValues) {
  Snapshot s = fixture_snapshot();
  ASSERT_EQ(s.components.size(), 3u);
  const InstalledComponent& op = s.components[1];
  EXPECT_EQ(op.name, "gpu-operator");
  EXPECT_EQ(op.version, "v26.3.2");
  EXPECT_EQ(op.revision, 2);
  EXPECT_EQ(op.status, "deployed");
  EXPECT_EQ(op.values.get_string({"driver", "version"}), "580.126.20");
  EXPECT_THROW(decode_helm_release("not base64!"), core::InvalidInput);
}

TEST(SnapshotTest, PodProblemsIncludeRunningPodsInCrashLoop) {
  Snapshot s = fixture_snapshot();
  ASSERT_EQ(s.pod_problems.size(), 2u);
  EXPECT_EQ(s.pod_problems[0].pod, "gpu-feature-discovery-abcde");
  EXPECT_TRUE(s.pod_problems[0].init);
  EXPECT_EQ(s.pod_problems[0].reason, "ImagePullBackOff");
  EXPECT_EQ(s.pod_problems[1].phase, "Running");
  EXPECT_EQ(s.pod_problems[1].reason, "CrashLoopBackOff");
}

// testdata/snapshot.yaml (used by cli_test.sh) is this fixture's snapshot; UPDATE_GOLDEN=1
// rewrites it.
TEST(SnapshotTest, FixtureSnapshotFileIsCurrent) {
  std::string path = std::string(GPUFLEET_SOURCE_DIR) + "/tests/recipe/testdata/snapshot.yaml";
  std::string text = snapshot_to_yaml(fixture_snapshot());
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    GTEST_SKIP() << "regenerated " << path;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), text) << "UPDATE_GOLDEN=1 regenerates " << path;
}

TEST(SnapshotTest, ObjectsFromKubectlDumps) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gpufleet-dump-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  core::Value objs = read_json("cluster-objects.json");
  auto write = [&](const char* file, const std::string& text) {
    std::ofstream(dir / file) << text;
  };
  write("version.json", R"({"clientVersion": {}, "serverVersion": {"gitVersion": "v1.32.4"}})");
  core::Value list = core::Value::map();
  list["kind"] = "List";
  list["items"] = *objs.find("nodes");
  write("nodes.json", core::to_json(list));
  // YAML with several documents works too.
  write("pods.json",
        "kind: Pod\nmetadata: {name: a, namespace: x}\n---\nkind: Pod\nmetadata: {name: b, "
        "namespace: x}\n");
  ClusterObjects o = cluster_objects_from_dir(dir.string());
  EXPECT_EQ(o.kubernetes_version, "v1.32.4");
  EXPECT_EQ(o.nodes.size(), 3u);
  EXPECT_EQ(o.pods.size(), 2u);
  EXPECT_TRUE(o.deployments.empty());
  write("crds.json", "[1, 2]");
  EXPECT_THROW(cluster_objects_from_dir(dir.string()), core::InvalidInput);
  fs::remove_all(dir);
  EXPECT_THROW(cluster_objects_from_dir(dir.string()), core::InvalidInput);
}

TEST(SnapshotTest, DocumentRoundTrip) {
  Snapshot s = fixture_snapshot();
  std::string text = snapshot_to_yaml(s);
  EXPECT_EQ(snapshot_to_yaml(snapshot_from_text(text, "snap.yaml")), text);
  EXPECT_THROW(
      snapshot_from_text(
          "apiVersion: gpufleet.io/v1alpha1\nkind: Snapshot\nspec: {nodes: [{gpu: {count: x}}]}\n",
          "s"),
      core::InvalidInput);
}

TEST(ValidateTest, ConstraintsAreVersionAwarePerNodeAndPool) {
  ValidationReport r = validate(eks_recipe(), fixture_snapshot());
  const CheckResult* k8s = find_result(r, "kubernetes-version", "cluster");
  ASSERT_NE(k8s, nullptr);
  EXPECT_TRUE(k8s->passed) << k8s->actual;  // v1.32.4-eks-1234 satisfies >= 1.32
  const CheckResult* drv1 = find_result(r, "gpu-driver", "gpu-node-1");
  const CheckResult* drv2 = find_result(r, "gpu-driver", "gpu-node-2");
  ASSERT_NE(drv1, nullptr);
  ASSERT_NE(drv2, nullptr);
  EXPECT_TRUE(drv1->passed);
  EXPECT_FALSE(drv2->passed);  // 570.133.20 < 580.126
  EXPECT_THAT(drv2->remediation, HasSubstr("driver"));
  const CheckResult* kernel = find_result(r, "node-kernel", "gpu-node-2");
  ASSERT_NE(kernel, nullptr);
  EXPECT_TRUE(kernel->passed);  // 5.15.0-1072-aws >= 5.15
  const CheckResult* osv = find_result(r, "node-os-version", "gpu-node-2");
  ASSERT_NE(osv, nullptr);
  EXPECT_FALSE(osv->passed);            // unknown without NFD labels
  EXPECT_EQ(osv->severity, "warning");  // untested OS releases warn, they do not fail
  // The system node is in no pool: not checked.
  EXPECT_EQ(find_result(r, "node-os", "system-1"), nullptr);
  EXPECT_FALSE(r.passed());
}

TEST(ValidateTest, HealthAssertions) {
  ValidationReport r = validate(eks_recipe(), fixture_snapshot());
  auto passed = [&](const std::string& name) {
    const CheckResult* c = find_result(r, name, "");
    EXPECT_NE(c, nullptr) << name;
    return c != nullptr && c->passed;
  };
  EXPECT_TRUE(passed("CustomResourceDefinition clusterpolicies.nvidia.com"));
  EXPECT_FALSE(passed("CustomResourceDefinition nvidiadrivers.nvidia.com"));  // not Established
  EXPECT_TRUE(passed("Deployment gpu-operator/gpu-operator"));
  EXPECT_FALSE(passed("Deployment cert-manager/cert-manager"));  // 1/2 available
  EXPECT_TRUE(passed("DaemonSet gpu-operator/nvidia-device-plugin-daemonset"));
  EXPECT_FALSE(passed("DaemonSet gpu-operator/nvidia-dcgm-exporter"));   // 1/2 ready
  EXPECT_FALSE(passed("DaemonSet gpu-operator/gpu-feature-discovery"));  // not found
  EXPECT_FALSE(passed("Pods gpu-operator"));  // CrashLoopBackOff in a Running pod
  EXPECT_TRUE(passed("Pods cert-manager"));   // ContainerCreating is not a failure
  const CheckResult* pods = find_result(r, "Pods gpu-operator", "");
  EXPECT_THAT(pods->actual, HasSubstr("nvidia-dcgm-exporter-x7k2p container nvidia-dcgm-exporter "
                                      "CrashLoopBackOff (phase Running)"));
  std::string table = report_table(r);
  EXPECT_THAT(table, HasSubstr("FAIL"));
  EXPECT_THAT(table, HasSubstr("is NOT satisfied"));
  EXPECT_EQ(report_to_value(r).find("passed")->as_bool(), false);
}

TEST(ValidateTest, PoolWithoutNodesFails) {
  Recipe rec = eks_recipe();
  rec.pools[0].node_selector = core::Value::map();
  rec.pools[0].node_selector["gpufleet.io/node-pool"] = "train";
  ValidationReport r = validate(rec, fixture_snapshot());
  const CheckResult* c = find_result(r, "pool default nodes", "");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->passed);
}

TEST(DriftTest, RecipeAgainstClusterFindsMissingExtraVersionAndValues) {
  std::vector<Drift> d = diff_recipe(eks_recipe(), fixture_snapshot());
  auto has = [&](const std::string& kind, const std::string& subject,
                 const std::string& field = "") {
    for (const Drift& x : d) {
      if (x.kind == kind && x.subject == subject && (field.empty() || x.field == field))
        return true;
    }
    return false;
  };
  EXPECT_TRUE(has("missing", "kueue-system/kueue"));
  EXPECT_TRUE(has("extra", "kube-system/metrics-server"));
  EXPECT_TRUE(has("values", "cert-manager/cert-manager", "crds.keep"));
  EXPECT_FALSE(has("values", "gpu-operator/gpu-operator"));  // matches the recipe
  EXPECT_FALSE(has("version", "gpu-operator/gpu-operator"));
  EXPECT_FALSE(has("missing", "gpu-operator/gpu-operator"));
  EXPECT_THAT(drift_table(d), HasSubstr("crds.keep"));
  EXPECT_TRUE(drift_to_value(d).find("drift")->as_bool());
}

TEST(DriftTest, EachGpuNodeOffItsPoolsDriverPinIsDrift) {
  Recipe rec = eks_recipe();
  ASSERT_EQ(rec.pools[0].settings.get_string({"driver", "version"}), "580.126.20");
  auto driver_rows = [](const std::vector<Drift>& d) {
    std::vector<Drift> out;
    for (const Drift& x : d) {
      if (x.kind == "node-driver") out.push_back(x);
    }
    return out;
  };
  std::vector<Drift> d = driver_rows(diff_recipe(rec, fixture_snapshot()));
  // gpu-node-1 runs the pin; gpu-node-2 570.133.20; the system node has no GPU.
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].subject, "gpu-node-2");
  EXPECT_EQ(d[0].field, "gpu.driver");
  EXPECT_EQ(d[0].expected, "580.126.20");
  EXPECT_EQ(d[0].actual, "570.133.20");

  // A node that does not report its driver is drift too, "unknown", not a match.
  Snapshot s = fixture_snapshot();
  for (NodeFacts& n : s.nodes) {
    if (n.name == "gpu-node-1") n.gpu_driver.clear();
    if (n.name == "gpu-node-2") n.gpu_driver = "580.126.20";
  }
  d = driver_rows(diff_recipe(rec, s));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].subject, "gpu-node-1");
  EXPECT_EQ(d[0].actual, "unknown");

  // A pool that pins no driver (the host image owns it and no one pinned it) has no such rows.
  rec.pools[0].settings["driver"] = core::Value::map();
  EXPECT_TRUE(driver_rows(diff_recipe(rec, fixture_snapshot())).empty());
}

TEST(DriftTest, SnapshotAgainstSnapshot) {
  Snapshot a = fixture_snapshot();
  Snapshot b = a;
  EXPECT_TRUE(diff_snapshots(a, b).empty());
  EXPECT_EQ(drift_table({}), "no drift\n");
  b.kubernetes_version = "v1.33.1";
  b.nodes[1].gpu_driver = "580.95.05";
  b.nodes.pop_back();
  b.components[1].version = "v26.3.3";
  std::vector<Drift> d = diff_snapshots(a, b);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].kind, "kubernetes");
  EXPECT_EQ(d[1].kind, "node");
  EXPECT_EQ(d[1].field, "gpu.driver");
  EXPECT_EQ(d[2].kind, "node-removed");
  EXPECT_EQ(d[3].kind, "version");
}

}  // namespace
}  // namespace gpufleet::recipe
