// Recipe inputs and validation phases: criteria detected from snapshots (service, OS,
// accelerator, pools from node groups, external components), criteria and config files,
// precedence (flags win), `recipe query` selectors, the deployment and conformance phases and
// the CTRF report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "recipe/bundle.h"
#include "recipe/detect.h"
#include "recipe/drift.h"
#include "recipe/inputs.h"
#include "recipe/query.h"
#include "recipe/resolver.h"
#include "recipe/validate.h"
#include "support/source_paths.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;

std::string testdata(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/recipe/testdata/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Snapshot mixed() { return snapshot_from_text(testdata("snapshot-mixed.yaml"), "mixed.yaml"); }

NodeFacts gpu_node(std::string name, std::string product, std::string provider = "",
                   std::string os = "ubuntu") {
  NodeFacts n;
  n.name = std::move(name);
  n.gpu_product = std::move(product);
  n.gpu_count = 8;
  n.provider_id = std::move(provider);
  n.os = std::move(os);
  return n;
}

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(DetectTest, ServiceFromProviderId) {
  EXPECT_EQ(service_of_provider_id("aws:///us-west-2a/i-0abc"), "eks");
  EXPECT_EQ(service_of_provider_id("gce://p/z/n"), "gke");
  EXPECT_EQ(service_of_provider_id("azure:///subscriptions/x"), "aks");
  EXPECT_EQ(service_of_provider_id("ocid1.instance.oc1.iad.abc"), "oke");
  EXPECT_EQ(service_of_provider_id("gpufleet-sim://fleet/node"), "");
}

TEST(DetectTest, AcceleratorFromProductTakesLongestLibraryValue) {
  const Library& lib = testing::repo_library();
  EXPECT_EQ(accelerator_of_product(lib, "NVIDIA-H100-80GB-HBM3"), "h100");
  EXPECT_EQ(accelerator_of_product(lib, "NVIDIA-H200"), "h200");
  EXPECT_EQ(accelerator_of_product(lib, "NVIDIA-GB200"), "gb200");
  EXPECT_EQ(accelerator_of_product(lib, "NVIDIA-B200"), "b200");
  EXPECT_EQ(accelerator_of_product(lib, "NVIDIA-H1000"), "");  // not h100 followed by '-'
  EXPECT_EQ(accelerator_of_product(lib, "Tesla-T4"), "");
}

TEST(DetectTest, MixedClusterGivesPoolsFromNodeGroups) {
  DetectedCriteria d = detect_criteria(testing::repo_library(), mixed());
  for (const std::string& p : d.problems) EXPECT_EQ(p, "");
  EXPECT_EQ(d.query.criteria[kService], "gke");
  EXPECT_EQ(d.query.criteria[kOs], "ubuntu");  // the GPU nodes', not the cos system node's
  EXPECT_EQ(d.query.criteria[kAccelerator], "any");
  ASSERT_EQ(d.query.pools.size(), 2u);
  EXPECT_EQ(d.query.pools[0].name, "a3-highgpu");
  EXPECT_EQ(d.query.pools[0].accelerator, "h100");
  EXPECT_EQ(d.query.pools[0].node_count, 2);
  EXPECT_EQ(d.query.pools[1].name, "a4-highgpu");  // from A4_HighGPU
  EXPECT_EQ(d.query.pools[1].accelerator, "b200");
  EXPECT_EQ(d.query.pools[1].node_selector.get_string({"cloud.google.com/gke-nodepool"}),
            "A4_HighGPU");

  Recipe r = resolve(testing::repo_library(), d.query);
  EXPECT_EQ(r.name, "gke-mixed-ubuntu-any-any");
  // The pools select the nodes they were found on, so validate checks the right ones.
  ASSERT_EQ(r.pools.size(), 2u);
  EXPECT_EQ(r.pools[1].node_selector.get_string({"cloud.google.com/gke-nodepool"}), "A4_HighGPU");
}

TEST(DetectTest, OneAcceleratorGivesNodeCountAndNoPools) {
  Snapshot s;
  s.nodes = {gpu_node("a", "NVIDIA-H100-80GB-HBM3", "aws:///x/i-1"),
             gpu_node("b", "NVIDIA-H100-80GB-HBM3", "aws:///x/i-2")};
  DetectedCriteria d = detect_criteria(testing::repo_library(), s);
  EXPECT_EQ(d.query.criteria[kService], "eks");
  EXPECT_EQ(d.query.criteria[kAccelerator], "h100");
  EXPECT_EQ(d.query.node_count, 2);
  EXPECT_TRUE(d.query.pools.empty());
}

TEST(DetectTest, NoManagedProviderMeansSelfManaged) {
  Snapshot s;
  s.nodes = {gpu_node("sim-0", "NVIDIA-H100-80GB-HBM3", "gpufleet-sim://f/sim-0")};
  DetectedCriteria d = detect_criteria(testing::repo_library(), s);
  EXPECT_EQ(d.query.criteria[kService], "kind");
  EXPECT_THAT(d.notes[0], HasSubstr("gpufleet-sim://f/sim-0"));
}

TEST(DetectTest, ProblemsNameNodesValueAndFlag) {
  Snapshot s;
  s.nodes = {gpu_node("a", "NVIDIA-H100-80GB-HBM3", "aws:///x/i-1", "ubuntu"),
             gpu_node("b", "Tesla-T4", "gce://p/z/b", "rhel")};
  DetectedCriteria d = detect_criteria(testing::repo_library(), s);
  EXPECT_THAT(d.problems[kService], HasSubstr("eks: a; gke: b"));
  EXPECT_THAT(d.problems[kService], HasSubstr("give --service"));
  EXPECT_THAT(d.problems[kOs], HasSubstr("rhel: b; ubuntu: a"));
  EXPECT_THAT(d.problems[kAccelerator], HasSubstr("node b has GPU product Tesla-T4"));
  EXPECT_THAT(d.problems[kAccelerator], HasSubstr("give --accelerator or --pool"));

  // A problem is an error only when nothing later settles the dimension.
  CriteriaInput in = input_from_detected(d, "--snapshot s.yaml");
  EXPECT_THAT(error_of([&] { query_from_input(in); }), HasSubstr("--snapshot s.yaml: "));
  CriteriaInput flags;
  flags.origin = "the flags";
  flags.values[kService] = "eks";
  flags.values[kOs] = "ubuntu";
  flags.values[kAccelerator] = "h100";
  layer_criteria(in, flags);
  Query q = query_from_input(in);
  EXPECT_EQ(q.criteria[kService], "eks");
  EXPECT_EQ(q.criteria[kAccelerator], "h100");
}

TEST(DetectTest, RunningComponentsAreOthersReleasesOnly) {
  DetectedCriteria d = detect_criteria(testing::repo_library(), mixed());
  Recipe r = resolve(testing::repo_library(), d.query);
  std::map<std::string, std::string> running = running_components(r, mixed());
  // kube-prometheus-stack runs as someone else's release; cert-manager's release is where
  // the bundle installs it (the bundle's own, upgraded in place).
  ASSERT_EQ(running.size(), 1u);
  EXPECT_THAT(running.at("kube-prometheus-stack"), HasSubstr("observability/prom"));

  Query q = d.query;
  q.external = running;
  Recipe ext = resolve(testing::repo_library(), q);
  EXPECT_NE(ext.digest, r.digest);
  auto kps = std::find_if(ext.components.begin(), ext.components.end(),
                          [](const Component& c) { return c.name == "kube-prometheus-stack"; });
  ASSERT_NE(kps, ext.components.end());
  EXPECT_TRUE(kps->external);
  for (const HealthCheck& h : ext.health) EXPECT_NE(h.component, "kube-prometheus-stack");
  // It survives the document round trip, and bundles do not install it.
  Recipe back = recipe_from_yaml(recipe_to_yaml(ext), "r.yaml");
  EXPECT_EQ(recipe_to_yaml(back), recipe_to_yaml(ext));
  Bundle b = render_bundle(ext, Deployer::Helm, {});
  EXPECT_EQ(b.count("components/kube-prometheus-stack/install.sh"), 0u);
  EXPECT_EQ(b.count("components/cert-manager/install.sh"), 1u);
  EXPECT_THAT(b.at("recipe.yaml").content, HasSubstr("externalReason:"));
  // diff reports it neither missing nor extra.
  for (const Drift& dr : diff_recipe(ext, mixed())) {
    EXPECT_NE(dr.subject, "observability/prom") << dr.kind;
    EXPECT_NE(dr.subject, "monitoring/kube-prometheus-stack") << dr.kind;
  }
  q.external["no-such"] = "x";
  EXPECT_THAT(error_of([&] { resolve(testing::repo_library(), q); }),
              HasSubstr("external: 'no-such' is not a component of this recipe"));
}

TEST(InputsTest, CriteriaFileStrictWithLineAndColumn) {
  CriteriaInput in = criteria_file_from_text(
      "apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  service: eks\n"
      "  pools:\n  - {name: train, accelerator: gb200, nodes: 18}\n  external: [kueue]\n",
      "c.yaml");
  EXPECT_EQ(in.values[kService], "eks");
  ASSERT_TRUE(in.pools);
  EXPECT_EQ((*in.pools)[0].node_count, 18);
  EXPECT_EQ(in.external.count("kueue"), 1u);
  EXPECT_THAT(error_of([] {
                criteria_file_from_text(
                    "apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  servce: eks\n",
                    "c.yaml");
              }),
              HasSubstr("c.yaml:4:3: spec.servce: is not a known field (did you mean \"service\""));
  EXPECT_THAT(error_of([] {
                criteria_file_from_text(
                    "apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  nodes: -3\n",
                    "c.yaml");
              }),
              HasSubstr("spec.nodes"));
  // Values are checked against the library, naming where they came from.
  CriteriaInput bad = criteria_file_from_text(
      "apiVersion: gpufleet.io/v1alpha1\nkind: Criteria\nspec:\n  os: windows\n", "c.yaml");
  EXPECT_THAT(error_of([&] { check_criteria_values(testing::repo_library(), bad); }),
              HasSubstr("c.yaml:4:3: spec.os: 'windows' is not a known os; valid values are"));
}

TEST(InputsTest, ConfigPathsRelativeToTheFile) {
  RecipeConfig c = config_from_text(
      "apiVersion: gpufleet.io/v1alpha1\nkind: RecipeConfig\nspec:\n"
      "  criteria: {service: gke, intent: training}\n  recipe: out/recipe.yaml\n"
      "  data: [site]\n  bundle: {deployer: helm, output: out/bundle}\n"
      "  validate: {phases: [readiness, deployment], output: ctrf}\n",
      "cfg.yaml", "conf");
  EXPECT_EQ(c.criteria.values[kService], "gke");
  EXPECT_EQ(c.recipe, "conf/out/recipe.yaml");
  EXPECT_EQ(c.data, std::vector<std::string>{"conf/site"});
  EXPECT_EQ(c.bundle.deployer, "helm");
  EXPECT_EQ(c.bundle.output, "conf/out/bundle");
  EXPECT_EQ(c.validate.output, "ctrf");
  EXPECT_THAT(error_of([] {
                config_from_text(
                    "apiVersion: gpufleet.io/v1alpha1\nkind: RecipeConfig\nspec:\n"
                    "  validate: {phases: [speed]}\n",
                    "cfg.yaml", "");
              }),
              HasSubstr("spec.validate.phases[0]: 'speed' is not a phase"));
}

TEST(InputsTest, FlagsWinAndHardwareIsOneChoice) {
  CriteriaInput base =
      input_from_detected(detect_criteria(testing::repo_library(), mixed()), "--snapshot m.yaml");
  CriteriaInput file;
  file.origin = "c.yaml";
  file.values[kIntent] = "training";
  file.values[kService] = "eks";
  layer_criteria(base, file);
  CriteriaInput flags;
  flags.origin = "the flags";
  flags.values[kService] = "gke";
  layer_criteria(base, flags);
  Query q = query_from_input(base);
  EXPECT_EQ(q.criteria[kService], "gke");
  EXPECT_EQ(q.criteria[kIntent], "training");
  EXPECT_EQ(q.pools.size(), 2u);
  // A node count alone cannot apply to detected pools.
  CriteriaInput nodes;
  nodes.origin = "the flags";
  nodes.nodes = 4;
  EXPECT_THAT(error_of([&] { layer_criteria(base, nodes); }),
              HasSubstr("--snapshot m.yaml describes node pools with different GPUs"));
  // An accelerator replaces the detected pools.
  CriteriaInput acc;
  acc.origin = "the flags";
  acc.values[kAccelerator] = "h200";
  layer_criteria(base, acc);
  q = query_from_input(base);
  EXPECT_TRUE(q.pools.empty());
  EXPECT_EQ(q.criteria[kAccelerator], "h200");
  EXPECT_FALSE(q.node_count);
}

TEST(QueryTest, SelectorsByNameIndexAndDottedKeys) {
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "training", "kubeflow"};
  Recipe r = resolve(testing::repo_library(), q);
  const Component* op = nullptr;
  for (const Component& c : r.components) {
    if (c.name == "gpu-operator") op = &c;
  }
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(query_result_text(query_recipe(r, "components.gpu-operator.chart.version")),
            op->chart.version + "\n");
  EXPECT_EQ(query_result_text(query_recipe(r, "spec.components.gpu-operator.namespace")),
            "gpu-operator\n");
  EXPECT_EQ(query_result_text(query_recipe(r, "metadata.name")), r.name + "\n");
  EXPECT_EQ(
      query_result_text(query_recipe(r, "nodePools.default.nodeSelector.nvidia.com/gpu.present")),
      "true\n");
  EXPECT_EQ(query_result_text(query_recipe(r, "deployment.levels.0.0")), r.levels[0][0] + "\n");
  EXPECT_THAT(error_of([&] { query_recipe(r, "components.gpu-operator.values.drivr"); }),
              HasSubstr("components.gpu-operator.values has no 'drivr' (keys here:"));
  EXPECT_THAT(error_of([&] { query_recipe(r, "components..x"); }),
              HasSubstr("write a dotted path"));
}

Recipe op_recipe() {
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "training", "kubeflow"};
  return resolve(testing::repo_library(), q);
}

const CheckResult* find(const ValidationReport& r, std::string_view name) {
  for (const CheckResult& c : r.results) {
    if (c.name.find(name) != std::string::npos) return &c;
  }
  return nullptr;
}

TEST(PhaseTest, DeploymentChecksReleasesAndOperatorResources) {
  Recipe r = op_recipe();
  Snapshot s;
  for (const Component& c : r.components) {
    s.components.push_back({c.name, c.namespace_, c.chart.name, c.chart.version, "", "deployed", 1,
                            core::Value::map()});
  }
  s.components[0].version = "0.0.1";
  s.custom_resources.push_back({"ClusterPolicy", "", "cluster-policy", "notReady"});
  ValidationReport rep = validate_phases(r, s, {Phase::Deployment});
  const CheckResult* wrong = find(rep, "release " + r.components[0].name);
  ASSERT_NE(wrong, nullptr);
  EXPECT_FALSE(wrong->passed);
  EXPECT_EQ(wrong->phase, "deployment");
  const CheckResult* right = find(rep, "release gpu-operator");
  ASSERT_NE(right, nullptr);
  EXPECT_TRUE(right->passed);
  const CheckResult* cp = find(rep, "ClusterPolicy ready");
  ASSERT_NE(cp, nullptr);
  EXPECT_FALSE(cp->passed);
  EXPECT_EQ(cp->actual, "notReady");
  s.custom_resources[0].state = "ready";
  s.components[0].version = r.components[0].chart.version;
  rep = validate_phases(r, s, {Phase::Deployment});
  EXPECT_TRUE(find(rep, "ClusterPolicy ready")->passed);
  EXPECT_TRUE(find(rep, "release " + r.components[0].name)->passed);
  // Readiness only holds constraints; performance needs the live cluster.
  for (const CheckResult& c : validate_phases(r, s, {Phase::Readiness}).results) {
    EXPECT_EQ(c.category, "constraint");
  }
  EXPECT_THAT(error_of([&] { validate_phases(r, s, {Phase::Performance}); }),
              HasSubstr("certify Certification"));
  EXPECT_THAT(error_of([] { parse_phase("speed"); }), HasSubstr("use readiness, deployment"));
}

TEST(PhaseTest, ConformanceChecks) {
  Recipe r = op_recipe();
  Snapshot s;
  s.nodes = {gpu_node("g1", "NVIDIA-H100-80GB-HBM3")};
  s.workloads.push_back({"DaemonSet", "gpu-operator", "nvidia-dcgm-exporter", 1, 0, 1, false});
  s.host_path_devices.push_back({"team-a", "trainer-0", "dev", "/dev/nvidia0"});
  s.host_path_devices.push_back({"gpu-operator", "nvidia-driver", "dev", "/dev"});
  ValidationReport rep = validate_phases(r, s, {Phase::Conformance});
  const CheckResult* dra = find(rep, "DRA allocation");
  ASSERT_NE(dra, nullptr);
  EXPECT_TRUE(dra->skipped);  // this recipe does not enable the DRA driver
  EXPECT_FALSE(find(rep, "gang scheduling")->passed);
  EXPECT_FALSE(find(rep, "accelerator metrics")->passed);
  const CheckResult* hp = find(rep, "no hostPath GPU device access");
  EXPECT_FALSE(hp->passed);
  EXPECT_THAT(hp->actual, HasSubstr("team-a/trainer-0"));
  EXPECT_THAT(hp->actual, ::testing::Not(HasSubstr("nvidia-driver")));
  EXPECT_EQ(rep.failures(), 3u);

  s.workloads[0].ready = 1;
  s.workloads.push_back(
      {"CustomResourceDefinition", "", "podgroups.scheduling.run.ai", 0, 0, 0, true});
  s.host_path_devices.erase(s.host_path_devices.begin());
  s.resource_slices.push_back({"g1", "gpu.nvidia.com", 8});
  rep = validate_phases(r, s, {Phase::Conformance});
  EXPECT_EQ(rep.failures(), 1u);  // DRA now applies (slices exist) and the DeviceClass is absent
  EXPECT_FALSE(find(rep, "DRA allocation: DeviceClass")->passed);
  EXPECT_TRUE(find(rep, "DRA allocation: ResourceSlices")->passed);

  core::Value ctrf = report_to_ctrf(rep, "0.1.0", 1000, 2000);
  EXPECT_EQ(ctrf.get_string({"reportFormat"}), "CTRF");
  const core::Value& sum = *ctrf.get({"results", "summary"});
  EXPECT_EQ(sum.find("tests")->as_int(), static_cast<std::int64_t>(rep.results.size()));
  EXPECT_EQ(sum.find("failed")->as_int(), 1);
  EXPECT_EQ(sum.find("stop")->as_int(), 2000);
  const core::Value& first = ctrf.get({"results", "tests"})->as_list()[0];
  EXPECT_EQ(first.get_string({"status"}), "failed");
  EXPECT_EQ(first.find("suite")->as_list()[0].as_string(), "conformance");
}

TEST(SnapshotInputsTest, NewSectionsRoundTrip) {
  Snapshot s = mixed();
  EXPECT_EQ(s.nodes[0].provider_id, "gce://proj/us-central1-a/gke-a3-0");
  EXPECT_EQ(s.nodes[0].instance_type, "a3-highgpu-8g");
  s.custom_resources.push_back({"ClusterPolicy", "", "cluster-policy", "ready"});
  s.host_path_devices.push_back({"a", "p", "v", "/dev/nvidia0"});
  s.device_classes.push_back("gpu.nvidia.com");
  s.resource_slices.push_back({"n", "gpu.nvidia.com", 8});
  std::string yaml = snapshot_to_yaml(s);
  EXPECT_EQ(snapshot_to_yaml(snapshot_from_text(yaml, "s.yaml")), yaml);
}

}  // namespace
}  // namespace gpufleet::recipe
