// --vendor-charts and --images without helm: what the bundle does with pulled archives, and
// which images a rendered stream runs. (tests/integration/recipe/vendor_verify.sh pulls from a
// loopback HTTPS chart repository with the real helm.)
#include "recipe/vendor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/resolver.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const Recipe& recipe_under_test() {
  static const Recipe r = [] {
    Query q;
    q.criteria = {"eks", "h100", "ubuntu", "inference", "dynamo"};
    return resolve(testing::repo_library(), q);
  }();
  return r;
}

// An archive per component whose chart comes from a repository, as fetch_charts makes them.
std::vector<VendoredChart> fake_archives(const Recipe& r) {
  std::vector<VendoredChart> out;
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
    out.push_back(std::move(v));
  }
  return out;
}

TEST(VendorTest, HelmInstallsFromTheArchiveWithProvenanceAndChecksums) {
  const Recipe& r = recipe_under_test();
  BundleOptions o;
  o.vendored = fake_archives(r);
  ASSERT_GE(o.vendored.size(), 2u);
  const Bundle b = render_bundle(r, Deployer::Helm, o);
  for (const VendoredChart& v : o.vendored) {
    const std::string path = "vendor/" + v.file;
    ASSERT_TRUE(b.contains(path)) << path;
    EXPECT_EQ(b.at(path).content, v.content);
    const std::string& install = b.at("components/" + v.component + "/install.sh").content;
    EXPECT_THAT(install,
                HasSubstr("helm upgrade --install '" + v.component + "' '../../" + path + "'"));
    EXPECT_THAT(install, Not(HasSubstr("--repo")));
    EXPECT_THAT(install, Not(HasSubstr("--version")));
    EXPECT_THAT(b.at("checksums.txt").content, HasSubstr(v.sha256 + "  " + path + "\n"));
  }
  const core::Value prov = core::parse_yaml(b.at("vendor/provenance.yaml").content);
  EXPECT_EQ(prov.get_string({"kind"}), "VendoredCharts");
  ASSERT_EQ(prov.get({"charts"})->size(), o.vendored.size());
  const core::Value& first = prov.get({"charts"})->as_list()[0];
  EXPECT_EQ(first.get_string({"component"}), o.vendored[0].component);
  EXPECT_EQ(first.get_string({"repository"}), o.vendored[0].repository);
  EXPECT_EQ(first.get_string({"sha256"}), o.vendored[0].sha256);
  EXPECT_EQ(first.get_string({"file"}), "vendor/" + o.vendored[0].file);
  // The recipe is recorded as given: its charts still name their repositories.
  EXPECT_THAT(b.at("recipe.yaml").content, HasSubstr(o.vendored[0].repository));
}

TEST(VendorTest, HelmfileReleasesUseTheArchiveAndNoRepository) {
  const Recipe& r = recipe_under_test();
  BundleOptions o;
  o.vendored = fake_archives(r);
  const Bundle b = render_bundle(r, Deployer::Helmfile, o);
  const core::Value doc = core::parse_yaml(b.at("helmfile.yaml").content);
  EXPECT_EQ(doc.get({"repositories"})->size(), 0u) << b.at("helmfile.yaml").content;
  for (const core::Value& rel : doc.get({"releases"})->as_list()) {
    const std::string name(rel.get_string({"name"}));
    for (const VendoredChart& v : o.vendored) {
      if (v.component != name) continue;
      EXPECT_EQ(rel.get_string({"chart"}), "./vendor/" + v.file);
      EXPECT_EQ(rel.find("version"), nullptr);
    }
  }
}

TEST(VendorTest, OnlyHelmAndHelmfileAndOnlyPlainFileNames) {
  const Recipe& r = recipe_under_test();
  BundleOptions o = {};
  o.repo_url = "https://git.example.com/platform/gpu-cluster.git";
  o.vendored = fake_archives(r);
  for (Deployer d : {Deployer::ArgoCd, Deployer::ArgoCdHelm, Deployer::Flux}) {
    try {
      (void)render_bundle(r, d, o);
      ADD_FAILURE() << "vendored charts accepted for " << deployer_name(d);
    } catch (const core::InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr("--vendor-charts works with the helm and helmfile"));
      EXPECT_THAT(e.what(), HasSubstr(std::string(deployer_name(d))));
    }
  }
  o.vendored[0].file = "../escape.tgz";
  EXPECT_THROW((void)render_bundle(r, Deployer::Helm, o), core::InvalidInput);
}

TEST(VendorTest, ADisabledComponentsArchiveIsLeftOut) {
  const Recipe& r = recipe_under_test();
  BundleOptions o;
  o.vendored = fake_archives(r);
  const std::string off = o.vendored[0].component;
  o.overrides.push_back(parse_set(off + ":enabled=false"));
  const Bundle b = render_bundle(r, Deployer::Helm, o);
  EXPECT_FALSE(b.contains("vendor/" + o.vendored[0].file));
  EXPECT_TRUE(b.contains("vendor/" + o.vendored[1].file));
  EXPECT_THAT(b.at("vendor/provenance.yaml").content, Not(HasSubstr("component: " + off + "\n")));
}

TEST(VendorTest, ImagesOfEveryPodTemplateInTheStream) {
  const std::string rendered = R"(---
# Source: chart/templates/deploy.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {name: op}
spec:
  template:
    spec:
      initContainers: [{name: init, image: "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0"}]
      containers:
      - {name: op, image: "nvcr.io/nvidia/gpu-operator:v25.10.0"}
      - {name: sidecar, image: "registry.k8s.io/kube-rbac-proxy:v0.18.0"}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cleanup}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: c, image: "nvcr.io/nvidia/gpu-operator:v25.10.0"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-pod}
data: {image: "not/an-image:1"}
---
)";
  EXPECT_EQ(images_in_manifests(rendered, "t"),
            (std::set<std::string>{"nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0",
                                   "nvcr.io/nvidia/gpu-operator:v25.10.0",
                                   "registry.k8s.io/kube-rbac-proxy:v0.18.0"}));
  EXPECT_TRUE(images_in_manifests("", "t").empty());
  try {
    (void)images_in_manifests("a: [unclosed", "helm template of x");
    FAIL() << "bad YAML accepted";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("helm template of x"));
  }
}

TEST(VendorTest, AMissingHelmIsNamedWithTheFix) {
  const Recipe& r = recipe_under_test();
  HelmToolOptions h;
  h.helm = "/nonexistent/helm";
  try {
    (void)fetch_charts(r, h);
    FAIL() << "fetched without helm";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("--vendor-charts: pulling"));
    EXPECT_THAT(e.what(), HasSubstr("install helm 3"));
  }
}

}  // namespace
}  // namespace gpufleet::recipe
