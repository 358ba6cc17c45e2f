// Operator images (registry `operatorImages`, `bundle --images`): the registry's declarations
// checked at load, carried by the recipe, resolved against values documents in the charts'
// real formats (excerpts of the GPU Operator's and the Network Operator's values.yaml), the
// node OS tags of the driver, and --charts-from reading a vendored bundle back. The same with
// helm and a chart pushed to a loopback registry: tests/integration/recipe/airgap_deploy.sh.
#include "recipe/operator_images.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/errors.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/bundle.h"
#include "recipe/resolver.h"
#include "recipe/vendor.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The GPU Operator chart's values.yaml, in its own layout (operands abridged).
constexpr const char* kGpuOperatorValues = R"(
sandboxWorkloads:
  enabled: false
validator:
  repository: nvcr.io/nvidia/cloud-native
  image: gpu-operator-validator
  # If version is not specified, then default is to use chart.AppVersion
  #version: ""
  imagePullPolicy: IfNotPresent
driver:
  enabled: true
  repository: nvcr.io/nvidia
  image: driver
  version: "550.90.07"
  manager:
    image: k8s-driver-manager
    repository: nvcr.io/nvidia/cloud-native
    version: v0.6.10
toolkit:
  enabled: true
  repository: nvcr.io/nvidia/k8s
  image: container-toolkit
  version: v1.16.1-ubuntu20.04
devicePlugin:
  enabled: true
  repository: nvcr.io/nvidia
  image: k8s-device-plugin
  version: v0.16.1-ubi8
dcgm:
  enabled: false
  repository: nvcr.io/nvidia/cloud-native
  image: dcgm
  version: 3.3.7-1-ubuntu22.04
vgpuManager:
  enabled: false
  repository: ""
  image: vgpu-manager
  version: ""
)";

std::vector<OperatorImage> gpu_operator_declared() {
  return operator_images_from_value(core::parse_yaml(R"(
driver: {repository: driver.repository, image: driver.image, version: driver.version, enabled: [driver.enabled], osTag: true}
driver-manager: {repository: driver.manager.repository, image: driver.manager.image, version: driver.manager.version, enabled: [driver.enabled]}
toolkit: {repository: toolkit.repository, image: toolkit.image, version: toolkit.version, enabled: [toolkit.enabled]}
device-plugin: {repository: devicePlugin.repository, image: devicePlugin.image, version: devicePlugin.version, enabled: [devicePlugin.enabled]}
dcgm: {repository: dcgm.repository, image: dcgm.image, version: dcgm.version, enabled: [dcgm.enabled]}
validator: {repository: validator.repository, image: validator.image, version: validator.version, defaultVersion: appVersion}
vgpu-manager: {repository: vgpuManager.repository, image: vgpuManager.image, version: vgpuManager.version, enabled: [sandboxWorkloads.enabled, vgpuManager.enabled]}
)"),
                                    "test");
}

NodeOsTags ubuntu() {
  NodeOsTags os;
  os.tags = {"ubuntu22.04", "ubuntu24.04"};
  return os;
}

TEST(OperatorImagesTest, ChartDefaultsUnderTheBundlesValuesWithOverridesApplied) {
  const core::Value defaults = core::parse_yaml(kGpuOperatorValues);
  // The recipe's values plus --set overrides: a newer driver, the toolkit by digest, the
  // device plugin off, DCGM on.
  const core::Value given = core::parse_yaml(R"(
driver: {version: 580.126.20}
toolkit: {version: "sha256:3f1c0e6b9d2a4e8c7b5a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c"}
devicePlugin: {enabled: false}
dcgm: {enabled: true}
)");
  const OperatorImagesResult r =
      resolve_operator_images("gpu-operator", gpu_operator_declared(),
                              merge_chart_values(defaults, given), "v26.3.2", ubuntu());
  EXPECT_THAT(r.images,
              ElementsAre("nvcr.io/nvidia/cloud-native/dcgm:3.3.7-1-ubuntu22.04",
                          "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.3.2",
                          "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.6.10",
                          "nvcr.io/nvidia/driver:580.126.20-ubuntu22.04",
                          "nvcr.io/nvidia/driver:580.126.20-ubuntu24.04",
                          "nvcr.io/nvidia/k8s/container-toolkit@sha256:"
                          "3f1c0e6b9d2a4e8c7b5a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c"));
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_THAT(r.notes[0], HasSubstr("gpu-operator operatorImages.validator: validator.version is "
                                    "unset; the operator uses the chart's appVersion, v26.3.2"));
}

TEST(OperatorImagesTest, DisabledOperandsAndAMissingVersionAreSaid) {
  const core::Value values = merge_chart_values(core::parse_yaml(kGpuOperatorValues),
                                                core::parse_yaml("{driver: {enabled: false}}"));
  // No appVersion known: the validator is left to the operator, and a note says how to pin it.
  const OperatorImagesResult r =
      resolve_operator_images("gpu-operator", gpu_operator_declared(), values, "", ubuntu());
  for (const std::string& image : r.images) {
    EXPECT_THAT(image, ::testing::Not(HasSubstr("/driver:"))) << "driver is disabled";
    EXPECT_THAT(image, ::testing::Not(HasSubstr("k8s-driver-manager")));
  }
  EXPECT_EQ(r.images.count("nvcr.io/nvidia/k8s-device-plugin:v0.16.1-ubi8"), 1u);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_THAT(r.notes[0],
              HasSubstr("nvcr.io/nvidia/cloud-native/gpu-operator-validator with the operator's "
                        "default version (validator.version is unset); set "
                        "gpu-operator:validator.version to pin and list it"));
}

TEST(OperatorImagesTest, DriverTagsFollowTheNodeOsOrSayWhatIsMissing) {
  const core::Value values = core::parse_yaml(kGpuOperatorValues);
  NodeOsTags rhel;
  rhel.unknown = {"node.os == rhel, node.osVersion matches 9.*"};
  OperatorImagesResult r =
      resolve_operator_images("gpu-operator", gpu_operator_declared(), values, "v26.3.2", rhel);
  for (const std::string& image : r.images)
    EXPECT_THAT(image, ::testing::Not(HasSubstr("/driver:")));
  bool said = false;
  for (const std::string& n : r.notes) {
    said = said || n.find(
                       "nvcr.io/nvidia/driver:550.90.07-<os><version> for the nodes' OS, which "
                       "the recipe does not pin (node.os == rhel, node.osVersion matches "
                       "9.*); give it with --node-os") != std::string::npos;
  }
  EXPECT_TRUE(said) << ::testing::PrintToString(r.notes);
  // A digest names one image whatever the OS.
  r = resolve_operator_images(
      "gpu-operator", gpu_operator_declared(),
      merge_chart_values(values, core::parse_yaml("{driver: {version: 'sha256:abc'}}")), "v26.3.2",
      rhel);
  EXPECT_EQ(r.images.count("nvcr.io/nvidia/driver@sha256:abc"), 1u);
}

TEST(OperatorImagesTest, WholeReferencesOfTheNetworkOperatorsSriovDaemons) {
  // The Network Operator chart's values.yaml layout.
  const core::Value defaults = core::parse_yaml(R"(
sriovNetworkOperator:
  enabled: false
sriov-network-operator:
  images:
    sriovConfigDaemon: nvcr.io/nvidia/mellanox/sriov-network-operator-config-daemon:network-operator-v26.1.1
operator:
  ofedDriver:
    initContainer:
      enable: true
      repository: nvcr.io/nvidia/mellanox
      image: network-operator-init-container
      version: network-operator-v26.1.1
)");
  const auto declared = operator_images_from_value(core::parse_yaml(R"(
ofed-init-container: {repository: operator.ofedDriver.initContainer.repository, image: operator.ofedDriver.initContainer.image, version: operator.ofedDriver.initContainer.version, enabled: [operator.ofedDriver.initContainer.enable]}
sriov-config-daemon: {reference: sriov-network-operator.images.sriovConfigDaemon, enabled: [sriovNetworkOperator.enabled]}
)"),
                                                   "test");
  OperatorImagesResult r = resolve_operator_images("network-operator", declared, defaults, "", {});
  EXPECT_THAT(r.images, ElementsAre("nvcr.io/nvidia/mellanox/"
                                    "network-operator-init-container:network-operator-v26.1.1"));
  r = resolve_operator_images(
      "network-operator", declared,
      merge_chart_values(defaults, core::parse_yaml("{sriovNetworkOperator: {enabled: true}}")), "",
      {});
  EXPECT_EQ(r.images.count("nvcr.io/nvidia/mellanox/"
                           "sriov-network-operator-config-daemon:network-operator-v26.1.1"),
            1u);
}

TEST(OperatorImagesTest, StalePathsAndWrongKindsInTheValuesAreErrors) {
  const auto declared = gpu_operator_declared();
  auto expect_error = [&](const std::string& values, const std::string& needle) {
    try {
      (void)resolve_operator_images("gpu-operator", declared, core::parse_yaml(values), "v1",
                                    ubuntu());
      ADD_FAILURE() << "no error for " << values;
    } catch (const core::InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  // A chart whose values lack the declared paths (a renamed operand): the registry is stale.
  expect_error("{validator: {repository: r, image: v, version: '1'}}",
               "gpu-operator operatorImages.dcgm: dcgm.repository is in neither the chart's "
               "values nor the bundle's; the registry's path is stale for this chart version: "
               "fix operatorImages.dcgm of gpu-operator in registry.yaml");
  std::string values = kGpuOperatorValues;
  values.replace(values.find("version: \"550.90.07\""), 20, "version: {major: 550}");
  expect_error(values,
               "gpu-operator operatorImages.driver: driver.version is a map in the "
               "values, not text; quote it");
  expect_error(
      core::to_yaml(merge_chart_values(core::parse_yaml(kGpuOperatorValues),
                                       core::parse_yaml("{driver: {enabled: yes-please}}"))),
      "driver.enabled is a string in the values, not true or false");
}

TEST(OperatorImagesTest, HelmMergeOfDefaultsAndGivenValues) {
  const core::Value merged =
      merge_chart_values(core::parse_yaml("{a: {b: 1, c: 2}, l: [1, 2], gone: {x: 1}}"),
                         core::parse_yaml("{a: {c: 3, d: 4}, l: [9], gone: null}"));
  EXPECT_EQ(merged, core::parse_yaml("{a: {b: 1, c: 3, d: 4}, l: [9]}"));
}

// The registry's declarations are checked when the library loads: the message names the
// file, the component and the field.
TEST(OperatorImagesTest, RegistryDeclarationsAreCheckedAtLoad) {
  auto registry = [](const std::string& operator_images) {
    return testing::file("registry.yaml", R"(apiVersion: gpufleet.io/v1alpha1
kind: ComponentRegistry
components:
  a:
    chart: {repository: https://charts.example.com, name: a, version: 1.0.0}
    namespace: ns-a
    values: {driver: {version: 1.0.0, enabled: true}, flat: text}
    operatorImages:
)" + operator_images);
  };
  auto expect_error = [&](const std::string& operator_images, const std::string& needle) {
    try {
      (void)load_library(testing::small_library({registry(operator_images)}));
      ADD_FAILURE() << "no error for " << operator_images;
    } catch (const core::InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error("      driver: {repository: r, image: i, versoin: v}\n", "test:registry.yaml");
  expect_error("      driver: {repository: r, image: i, versoin: v}\n",
               "components.a.operatorImages.driver.versoin: is not a known field (did you mean "
               "\"version\"?");
  expect_error("      driver: {repository: r, version: v}\n",
               "components.a.operatorImages.driver.image: missing; give the value paths of "
               "repository, image and version");
  expect_error("      driver: {image: i, enabled: driver.enabled}\n",
               "components.a.operatorImages.driver.enabled");
  expect_error("      driver: {image: 'images[0].name'}\n",
               "components.a.operatorImages.driver.image: 'images[0].name' has a list index");
  expect_error("      driver: {image: i, reference: r}\n",
               "components.a.operatorImages.driver: has reference and repository/image/version");
  expect_error("      driver: {image: i, version: v, defaultVersion: latest}\n",
               "components.a.operatorImages.driver.defaultVersion: 'latest' is not a default; "
               "use appVersion");
  expect_error("      driver: {image: i, osTag: true}\n",
               "components.a.operatorImages.driver.osTag: needs version");
  // Paths that contradict the component's own values: through a scalar, or at a map.
  expect_error("      driver: {image: flat.image}\n",
               "components.a.operatorImages.driver.image: 'flat' is a string in the values, not "
               "a map");
  expect_error("      driver: {image: driver}\n",
               "components.a.operatorImages.driver.image: driver is a map in the values, not "
               "text");
  expect_error("      driver: {image: i, enabled: [driver.version]}\n",
               "components.a.operatorImages.driver.enabled: driver.version is a string in the "
               "values, not true or false");
  // And a good declaration loads.
  EXPECT_NO_THROW((void)load_library(testing::small_library(
      {registry("      driver: {repository: driver.repository, image: driver.image, version: "
                "driver.version, enabled: [driver.enabled], osTag: true}\n")})));
}

// The repository's registry declares the GPU Operator's operands, and resolved recipes carry
// them (recipe.yaml round trip), so `bundle` needs no library.
TEST(OperatorImagesTest, RecipesCarryTheRegistrysDeclarations) {
  Query q;
  q.criteria = {"aks", "h100", "ubuntu", "training", "kubeflow"};
  const Recipe r = resolve(testing::repo_library(), q);
  const Component* gpu = nullptr;
  const Component* net = nullptr;
  for (const Component& c : r.components) {
    if (c.name == "gpu-operator") gpu = &c;
    if (c.name == "network-operator") net = &c;
  }
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(net, nullptr);
  ASSERT_GE(gpu->operator_images.size(), 10u);
  const auto driver = std::find_if(gpu->operator_images.begin(), gpu->operator_images.end(),
                                   [](const OperatorImage& i) { return i.name == "driver"; });
  ASSERT_NE(driver, gpu->operator_images.end());
  EXPECT_EQ(driver->version, "driver.version");
  EXPECT_TRUE(driver->os_tag);
  EXPECT_THAT(driver->enabled, ElementsAre("driver.enabled"));
  EXPECT_FALSE(net->operator_images.empty());
  const Recipe back = recipe_from_yaml(recipe_to_yaml(r), "round trip");
  for (const Component& c : back.components) {
    if (c.name != "gpu-operator") continue;
    EXPECT_EQ(operator_images_to_value(c.operator_images),
              operator_images_to_value(gpu->operator_images));
  }
  // The recipe's node OS constraints give the driver's tags.
  const NodeOsTags os = node_os_tags(r, {});
  EXPECT_THAT(os.tags, ElementsAre("ubuntu22.04", "ubuntu24.04"));
  EXPECT_THAT(os.unknown, IsEmpty());
}

TEST(OperatorImagesTest, NodeOsTagsOfRhelNeedTheFlag) {
  Query q;
  q.criteria = {"kind", "h100", "rhel", "training", "kubeflow"};
  const Recipe r = resolve(testing::repo_library(), q);
  NodeOsTags os = node_os_tags(r, {});
  EXPECT_THAT(os.tags, IsEmpty());
  ASSERT_EQ(os.unknown.size(), 1u);
  EXPECT_THAT(os.unknown[0], HasSubstr("node.os == rhel, node.osVersion matches 9.*"));
  os = node_os_tags(r, {"rhel9.6", "rhel9.4"});
  EXPECT_THAT(os.tags, ElementsAre("rhel9.4", "rhel9.6"));
  try {
    (void)node_os_tags(r, {"RHEL 9"});
    ADD_FAILURE() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("--node-os \"RHEL 9\": not a node OS tag; give the os_release "
                                    "ID and VERSION_ID joined"));
  }
}

// --charts-from: the archives of a vendored bundle on disk, checked against its provenance.
TEST(OperatorImagesTest, ChartsFromAVendoredBundle) {
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "inference", "dynamo"};
  const Recipe r = resolve(testing::repo_library(), q);
  BundleOptions o;
  for (const Component& c : r.components) {
    if (c.chart.in_bundle()) continue;
    VendoredChart v;
    v.component = c.name;
    v.repository = c.chart.repository;
    v.chart = c.chart.name;
    v.version = c.chart.version;
    v.file = c.chart.name + "-" + c.chart.version + ".tgz";
    v.content = "archive of " + c.chart.name;
    v.sha256 = core::sha256_hex(v.content);
    o.vendored.push_back(std::move(v));
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("charts-from-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write_bundle(render_bundle(r, Deployer::Helm, o), dir.string());
  const std::vector<VendoredChart> back = charts_from_bundle(r, dir.string());
  ASSERT_EQ(back.size(), o.vendored.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].component, o.vendored[i].component);
    EXPECT_EQ(back[i].content, o.vendored[i].content);
    EXPECT_EQ(back[i].file, o.vendored[i].file);
    EXPECT_EQ(back[i].repository, o.vendored[i].repository);
  }
  // A changed archive is refused, naming it.
  const fs::path tampered = dir / "vendor" / o.vendored[0].file;
  fs::permissions(tampered, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(tampered, std::ios::trunc) << "something else";
  try {
    (void)charts_from_bundle(r, dir.string());
    ADD_FAILURE() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("vendor/" + o.vendored[0].file +
                                    " changed since it was bundled: its SHA-256 is " +
                                    core::sha256_hex("something else")));
  }
  // A bundle without vendored charts.
  fs::remove_all(dir / "vendor");
  try {
    (void)charts_from_bundle(r, dir.string());
    ADD_FAILURE() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("no vendor/provenance.yaml; give the directory of a bundle "
                                    "written with --vendor-charts"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::recipe
