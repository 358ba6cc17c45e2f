// The library's fabric (network operator, RDMA, EFA, GPUDirect-TCPXO, GDRCopy), pin hygiene,
// coverage of the newer criteria (one golden recipe per new leaf overlay), constraints with
// severity and remediation, and components kept as raw manifests or kustomize directories.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/bundle.h"
#include "recipe/manifests.h"
#include "recipe/requirement.h"
#include "recipe/resolver.h"
#include "recipe/validate.h"
#include "support/source_paths.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

namespace fs = std::filesystem;
using testing::file;
using ::testing::HasSubstr;
using testing::repo_library;

Recipe resolve_of(const CriteriaValues& c, std::vector<std::string> mixins = {}) {
  Query q;
  q.criteria = c;
  q.mixins = std::move(mixins);
  return resolve(repo_library(), q);
}

const Component* component(const Recipe& r, const std::string& name) {
  for (const Component& c : r.components) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool depends_on(const Component& c, const std::string& dep) {
  return std::find(c.dependencies.begin(), c.dependencies.end(), dep) != c.dependencies.end();
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// --- fabric ---------------------------------------------------------------------------------

TEST(FabricTest, AksTrainingGetsTheNetworkOperatorAndRdmaInTheGpuOperator) {
  Recipe r = resolve_of({"aks", "h100", "ubuntu", "training", "kubeflow"});
  ASSERT_NE(component(r, "network-operator"), nullptr);
  const Component* gpu = component(r, "gpu-operator");
  ASSERT_NE(gpu, nullptr);
  EXPECT_TRUE(gpu->values.get({"driver", "rdma", "enabled"})->as_bool());
  EXPECT_FALSE(gpu->values.get({"driver", "rdma", "useHostMofed"})->as_bool());
  EXPECT_TRUE(gpu->values.get({"gdrcopy", "enabled"})->as_bool());
  // The driver (with nvidia-peermem) waits for the Network Operator's OFED stack.
  EXPECT_TRUE(depends_on(*gpu, "network-operator"));
  EXPECT_EQ(r.pools[0].settings.get_string({"fabric", "rdma"}), "infiniband");
  // Inference on AKS stays without the fabric operators.
  Recipe inf = resolve_of({"aks", "h100", "ubuntu", "inference", "dynamo"});
  EXPECT_EQ(component(inf, "network-operator"), nullptr);
  EXPECT_FALSE(component(inf, "gpu-operator")->values.get({"gdrcopy", "enabled"})->as_bool());
}

TEST(FabricTest, EveryEksRecipeGetsTheEfaDevicePluginAndTrainingGdrcopy) {
  for (const char* intent : {"training", "inference"}) {
    for (const char* platform : {"dynamo", "kubeflow", "nim", "slurm"}) {
      Recipe r = resolve_of({"eks", "h100", "ubuntu", intent, platform});
      EXPECT_NE(component(r, "aws-efa-k8s-device-plugin"), nullptr) << intent << platform;
      EXPECT_EQ(r.pools[0].settings.get_string({"fabric", "rdma"}), "efa");
    }
  }
  EXPECT_TRUE(
      component(resolve_of({"eks", "b200", "ubuntu", "training", "kubeflow"}), "gpu-operator")
          ->values.get({"gdrcopy", "enabled"})
          ->as_bool());
}

TEST(FabricTest, GkeH100CosTrainingGetsTheTcpxoInstallerAsALocalChart) {
  Recipe r = resolve_of({"gke", "h100", "cos", "training", "kubeflow"});
  const Component* tcpxo = component(r, "gke-nccl-tcpxo");
  ASSERT_NE(tcpxo, nullptr);
  ASSERT_TRUE(tcpxo->manifests.has_value());
  EXPECT_TRUE(tcpxo->chart.is_local());
  EXPECT_EQ(tcpxo->chart.version, "1.0.15");
  EXPECT_EQ(tcpxo->manifests->kind, "manifests");
  EXPECT_THAT(tcpxo->manifests->content, HasSubstr("name: nccl-tcpxo-installer"));
  EXPECT_THAT(tcpxo->manifests->content, HasSubstr("nccl-plugin-gpudirecttcpx-dev:v1.0.15"));
  EXPECT_EQ(tcpxo->manifests->sha256, core::sha256_hex(tcpxo->manifests->content));
  // Only A3 Mega (H100) nodes run TCPXO; other GKE GPUs and inference do not get it.
  EXPECT_EQ(component(resolve_of({"gke", "a100", "cos", "training", "kubeflow"}), "gke-nccl-tcpxo"),
            nullptr);
  EXPECT_EQ(component(resolve_of({"gke", "h100", "cos", "inference", "nim"}), "gke-nccl-tcpxo"),
            nullptr);
  EXPECT_EQ(
      component(resolve_of({"gke", "h100", "ubuntu", "training", "kubeflow"}), "gke-nccl-tcpxo"),
      nullptr);
  // GKE owns the COS driver: no GDRCopy sidecar there.
  EXPECT_FALSE(component(r, "gpu-operator")->values.get({"gdrcopy", "enabled"})->as_bool());
}

// Where the host image owns the driver (Oracle Linux), it owns peermem and GDRCopy too.
TEST(FabricTest, HostDriverFabricsLeaveRdmaToTheHostImage) {
  for (const char* service : {"oke", "kind", "bare-metal"}) {
    Recipe r = resolve_of({service, "h100", "oracle-linux", "training", "kubeflow"});
    const Component* gpu = component(r, "gpu-operator");
    EXPECT_FALSE(gpu->values.get({"driver", "enabled"})->as_bool()) << service;
    EXPECT_FALSE(gpu->values.get({"gdrcopy", "enabled"})->as_bool()) << service;
    EXPECT_FALSE(gpu->values.get({"driver", "rdma", "enabled"})->as_bool()) << service;
    EXPECT_EQ(r.pools[0].settings.get_string({"fabric", "gdrcopy"}), "host-image") << service;
    EXPECT_NE(component(r, "network-operator"), nullptr) << service;
  }
}

TEST(FabricTest, RdmaFabricsGetGdrcopy) {
  for (const char* service : {"aks", "oke", "kind", "bare-metal", "eks"}) {
    Recipe r = resolve_of({service, "h100", "ubuntu", "training", "kubeflow"});
    EXPECT_TRUE(component(r, "gpu-operator")->values.get({"gdrcopy", "enabled"})->as_bool())
        << service;
    EXPECT_TRUE(r.pools[0].settings.get({"fabric", "gdrcopy"})->as_bool()) << service;
  }
}

// --- pins -----------------------------------------------------------------------------------

// Overlay and mixin pins that differ from the registry's without a pinExemption reason, as
// "<origin>: components.<name> pins <v>, the registry <w>".
std::vector<std::string> unexplained_pins(const Library& lib) {
  std::vector<std::string> out;
  auto check = [&](const core::Value& content, const std::string& origin) {
    const core::Value* comps = content.find("components");
    if (comps == nullptr) return;
    for (const auto& e : comps->as_map()) {
      for (const char* block : {"chart", "manifests"}) {
        std::string_view pin = e.value.get_string({block, "version"});
        std::string_view registry = lib.components.find(e.key)->get_string({block, "version"});
        if (pin.empty() || pin == registry || !e.value.get_string({"pinExemption"}).empty())
          continue;
        out.push_back(origin + ": components." + e.key + " pins " + std::string(pin) +
                      ", the registry " + std::string(registry));
      }
    }
  };
  for (const auto& [_, o] : lib.overlays) check(o.content, o.origin);
  for (const auto& [_, m] : lib.mixins) check(m.content, m.origin);
  return out;
}

// Overlay and mixin pins equal the registry's unless the overlay says why they differ.
TEST(PinHygieneTest, OverlayPinsEqualRegistryPinsUnlessExempted) {
  EXPECT_THAT(unexplained_pins(repo_library()), ::testing::IsEmpty())
      << "align the pins with registry.yaml or give pinExemption: <reason>";
  // The rule catches a differing pin and accepts one with a reason.
  Library small = load_library(
      testing::small_library({file("overlays/o.yaml", R"yaml(apiVersion: gpufleet.io/v1alpha1
kind: Overlay
components:
  a: {chart: {version: 1.0.1}, pinExemption: "1.0.0 breaks upgrades from 0.9 (upstream issue 42)"}
  b: {chart: {version: v2.0.1}}
  c: {chart: {version: 3.0.0}}
)yaml")}));
  EXPECT_EQ(unexplained_pins(small),
            std::vector<std::string>{
                "test:overlays/o.yaml: components.b pins v2.0.1, the registry v2.0.0"});
  EXPECT_THROW(load_library(testing::small_library({file("overlays/o.yaml",
                                                         "apiVersion: gpufleet.io/v1alpha1\n"
                                                         "kind: Overlay\ncomponents:\n"
                                                         "  a: {pinExemption: '  '}\n")})),
               core::InvalidInput);
}

// The driver the GPU Operator installs is the one every pool states, and it satisfies the
// library's own driver floor in every supported combination.
TEST(PinHygieneTest, DriverPinSatisfiesItsOwnConstraint) {
  const Library& lib = repo_library();
  std::string pin(lib.components.find("gpu-operator")->get_string({"values", "driver", "version"}));
  ASSERT_FALSE(pin.empty());
  std::string base_pin(
      lib.overlays.at("base").content.get_string({"nodePool", "driver", "version"}));
  EXPECT_EQ(base_pin, pin) << "overlays/base.yaml nodePool.driver.version";
  EXPECT_NE(pin, "580.95.05") << "older than what the current GPU Operator ships";
  // Every overlay and mixin that states a driver version states the pin, and every driver
  // floor anywhere in the library admits it: whatever combination selects them, the pool's
  // driver satisfies the pool's constraint (the resolved recipes are checked by
  // LibraryTest.EverySupportedCombinationResolves).
  std::size_t floors = 0;
  auto check = [&](const core::Value& content, const std::string& origin) {
    const core::Value* pool = content.find("nodePool");
    if (pool == nullptr) return;
    std::string_view stated = pool->get_string({"driver", "version"});
    if (!stated.empty()) {
      EXPECT_EQ(stated, pin) << origin << " nodePool.driver.version";
    }
    if (const core::Value* cs = pool->find("constraints")) {
      for (const auto& k : cs->as_map()) {
        if (k.value.get_string({"fact"}) != "gpu.driver") continue;
        ++floors;
        std::string req(k.value.get_string({"requirement"}));
        EXPECT_TRUE(satisfies(parse_requirement(req, k.key), pin))
            << origin << ": driver pin " << pin << " fails " << k.key << " " << req;
      }
    }
  };
  for (const auto& [_, o] : lib.overlays) check(o.content, o.origin);
  for (const auto& [_, m] : lib.mixins) check(m.content, m.origin);
  EXPECT_GE(floors, 1u);
  // And in a resolved recipe the pool states the pin and carries the floor.
  Recipe r = resolve_of({"eks", "h100", "ubuntu", "training", "kubeflow"});
  EXPECT_EQ(r.pools[0].settings.get_string({"driver", "version"}), pin);
  bool has_floor = false;
  for (const Constraint& k : r.pools[0].constraints)
    has_floor = has_floor || k.fact == "gpu.driver";
  EXPECT_TRUE(has_floor);
}

// --- coverage -------------------------------------------------------------------------------

TEST(CoverageTest, NewCriteriaValuesAreDeclared) {
  const Library& lib = repo_library();
  auto has = [&](Dimension d, const char* v) {
    return std::find(lib.valid[d].begin(), lib.valid[d].end(), v) != lib.valid[d].end();
  };
  for (const char* a : {"a100", "l40s", "rtx-pro-6000"}) EXPECT_TRUE(has(kAccelerator, a)) << a;
  for (const char* s : {"openshift", "lke", "bare-metal"}) EXPECT_TRUE(has(kService, s)) << s;
  EXPECT_TRUE(has(kOs, "oracle-linux"));
}

// Every declared combination resolves (LibraryTest) or is rejected with the library's reason.
TEST(CoverageTest, EveryUnsupportedCombinationIsRejectedWithItsReason) {
  const Library& lib = repo_library();
  std::size_t rejected = 0;
  CriteriaValues cur;
  auto rec = [&](auto&& self, std::size_t d) -> void {
    if (d == kDimensions) {
      std::optional<std::string> why = lib.unsupported_reason(cur);
      if (!why) return;
      ++rejected;
      try {
        resolve_of(cur);
        ADD_FAILURE() << "resolved an unsupported combination";
      } catch (const core::InvalidInput& e) {
        EXPECT_THAT(e.what(), HasSubstr(*why));
      }
      return;
    }
    for (const std::string& v : lib.valid[d]) {
      cur[d] = v;
      self(self, d + 1);
    }
  };
  rec(rec, 0);
  EXPECT_GT(rejected, 100u);
  try {
    resolve_of({"openshift", "h100", "ubuntu", "training", "kubeflow"});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("use --os rhel"));
  }
}

TEST(CoverageTest, DraDriverBringsAKubernetes134Floor) {
  Recipe r = resolve_of({"eks", "gb200", "ubuntu", "training", "kubeflow"});
  ASSERT_NE(component(r, "dra-driver-nvidia-gpu"), nullptr);
  const Constraint* dra = nullptr;
  for (const Constraint& c : r.constraints) {
    if (c.name == "kubernetes-version-dra") dra = &c;
  }
  ASSERT_NE(dra, nullptr);
  EXPECT_EQ(dra->requirement, ">= 1.34");
  EXPECT_EQ(dra->severity, "error");
  EXPECT_THAT(dra->remediation, HasSubstr("resource.k8s.io/v1"));
  // Without the DRA driver there is no such floor.
  for (const Constraint& c :
       resolve_of({"eks", "h100", "ubuntu", "training", "kubeflow"}).constraints) {
    EXPECT_NE(c.name, "kubernetes-version-dra");
  }
}

// One golden recipe per leaf overlay added for fabric and coverage; UPDATE_GOLDEN=1 rewrites.
struct GoldenCase {
  const char* file;
  CriteriaValues criteria;
};

TEST(CoverageTest, GoldenRecipePerNewLeaf) {
  const GoldenCase cases[] = {
      {"aks-h100-ubuntu-training-kubeflow", {"aks", "h100", "ubuntu", "training", "kubeflow"}},
      {"eks-h200-ubuntu-inference-nim", {"eks", "h200", "ubuntu", "inference", "nim"}},
      {"gke-h100-cos-training-kubeflow", {"gke", "h100", "cos", "training", "kubeflow"}},
      {"bare-metal-b200-ubuntu-training-slurm",
       {"bare-metal", "b200", "ubuntu", "training", "slurm"}},
      {"lke-rtx-pro-6000-ubuntu-inference-dynamo",
       {"lke", "rtx-pro-6000", "ubuntu", "inference", "dynamo"}},
      {"openshift-a100-rhel-training-kubeflow",
       {"openshift", "a100", "rhel", "training", "kubeflow"}},
      {"oke-l40s-oracle-linux-inference-nim", {"oke", "l40s", "oracle-linux", "inference", "nim"}},
      {"oke-h100-oracle-linux-training-kubeflow",
       {"oke", "h100", "oracle-linux", "training", "kubeflow"}},
  };
  fs::path dir = fs::path(GPUFLEET_SOURCE_DIR) / "tests/recipe/golden/recipes";
  const char* update = std::getenv("UPDATE_GOLDEN");
  std::set<std::string> leaves;
  for (const GoldenCase& g : cases) {
    Recipe r = resolve_of(g.criteria);
    EXPECT_EQ(r.name, g.file);
    for (const AppliedOverlay& o : r.overlays) leaves.insert(o.name);
    std::string text = recipe_to_yaml(r);
    fs::path p = dir / (std::string(g.file) + ".yaml");
    if (update != nullptr && std::string(update) == "1") {
      fs::create_directories(dir);
      std::ofstream(p, std::ios::binary) << text;
      continue;
    }
    EXPECT_EQ(read(p), text) << p << " differs; UPDATE_GOLDEN=1 regenerates";
  }
  for (const char* leaf :
       {"aks-training", "eks", "gke-cos-h100-training", "bare-metal-training", "lke",
        "openshift-rhel", "oracle-linux", "a100", "l40s", "rtx-pro-6000", "gdrcopy",
        "network-operator-rdma", "oke-oracle-linux-training", "host-driver-fabric"}) {
    EXPECT_TRUE(leaves.count(leaf)) << leaf << " has no golden recipe";
  }
}

// --- constraints ----------------------------------------------------------------------------

TEST(ConstraintTest, SeverityAndRemediationAreCheckedAndKept) {
  const char* head = "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\n";
  auto load = [&](const std::string& constraints) {
    return load_library(testing::small_library(
        {file("overlays/o.yaml", std::string(head) + "constraints:\n" + constraints)}));
  };
  Library lib = load(
      "  k: {fact: kubernetes.version, requirement: '>= 1.33', severity: warning, "
      "remediation: upgrade}\n");
  const core::Value* k = lib.overlays.at("o").content.get({"constraints", "k"});
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->get_string({"severity"}), "warning");
  EXPECT_EQ(k->get_string({"remediation"}), "upgrade");
  try {
    load("  k: {fact: kubernetes.version, requirement: '>= 1.33', severity: fatal}\n");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("constraints.k.severity: 'fatal' is not a severity; use error or warning"));
  }
  EXPECT_THROW(load("  k: {fact: kubernetes.version, requirement: '>= 1.33', remediation: ''}\n"),
               core::InvalidInput);
}

TEST(ConstraintTest, WarningsAreReportedButDoNotFailValidation) {
  Recipe r;
  r.name = "r";
  Constraint warn;
  warn.name = "k8s-recommended";
  warn.fact = "kubernetes.version";
  warn.requirement = ">= 1.35";
  warn.severity = "warning";
  warn.remediation = "plan the upgrade to 1.35";
  r.constraints.push_back(warn);
  Snapshot s;
  s.kubernetes_version = "v1.33.2";
  ValidationReport rep = validate(r, s);
  ASSERT_EQ(rep.results.size(), 1u);
  EXPECT_FALSE(rep.results[0].passed);
  EXPECT_TRUE(rep.passed());
  EXPECT_EQ(rep.warnings(), 1u);
  std::string table = report_table(rep);
  EXPECT_THAT(table, HasSubstr("WARN"));
  EXPECT_THAT(table, HasSubstr("plan the upgrade to 1.35"));
  EXPECT_THAT(table, HasSubstr("1 warnings"));
  r.constraints[0].severity = "error";
  ValidationReport err = validate(r, s);
  EXPECT_FALSE(err.passed());
  EXPECT_EQ(report_to_value(err).find("results")->as_list()[0].get_string({"remediation"}),
            "plan the upgrade to 1.35");
  // The recipe document keeps both fields.
  Recipe back = recipe_from_yaml(recipe_to_yaml(r), "r.yaml");
  EXPECT_EQ(back.constraints[0].severity, "error");
  EXPECT_EQ(back.constraints[0].remediation, "plan the upgrade to 1.35");
}

// --- manifests and kustomize components -----------------------------------------------------

std::vector<LibraryFile> manifest_library(std::vector<LibraryFile> extra) {
  std::vector<LibraryFile> files = testing::small_library({});
  for (LibraryFile& f : files) {
    if (f.path == "registry.yaml") {
      f.content += R"(  raw:
    manifests: {kind: manifests, path: manifests/raw, version: 1.2.3}
    namespace: ns-raw
    dependencies: [a]
    health: [{kind: DaemonSet, name: ds}]
  kz:
    manifests: {kind: kustomize, path: manifests/kz, version: 0.1.0}
    namespace: ns-kz
)";
    }
  }
  std::vector<LibraryFile> more = {
      file("manifests/raw/b.yaml",
           "# second\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"),
      file("manifests/raw/a.yaml",
           "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: ds\n  namespace: ns-raw\n"
           "spec: {template: {metadata: {annotations: {t: '{{ not a template }}'}}}}\n---\n"),
      file("manifests/kz/kustomization.yaml",
           "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
           "namespace: ns-kz\nresources: [cm.yaml, ../shared]\n"),
      file("manifests/kz/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kz}\n"),
      file("manifests/shared/kustomization.yaml",
           "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
           "resources: [sa.yaml]\n"),
      file("manifests/shared/sa.yaml",
           "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: shared}\n"),
      file("overlays/on.yaml",
           "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n"
           "  a: {enabled: true}\n  raw: {enabled: true}\n"),
  };
  files = overlay_files(std::move(files), more);
  return overlay_files(std::move(files), extra);
}

TEST(ManifestsTest, RawManifestsRenderCanonicallyIntoTheRecipeAndItsDigest) {
  Library lib = load_library(manifest_library({}));
  Query q;
  Recipe r = resolve(lib, q);
  const Component* raw = component(r, "raw");
  ASSERT_NE(raw, nullptr);
  ASSERT_TRUE(raw->manifests);
  EXPECT_EQ(raw->chart.name, "raw");
  EXPECT_EQ(raw->chart.version, "1.2.3");
  EXPECT_EQ(raw->level, 1);  // after a
  std::vector<core::Value> docs = core::parse_yaml_documents(raw->manifests->content);
  ASSERT_EQ(docs.size(), 2u);  // a.yaml before b.yaml, comments and empty documents dropped
  EXPECT_EQ(docs[0].get_string({"kind"}), "DaemonSet");
  EXPECT_EQ(docs[1].get_string({"metadata", "name"}), "b");
  // Round trip through the document; a hand-edited content is refused.
  std::string yaml = recipe_to_yaml(r);
  Recipe back = recipe_from_yaml(yaml, "r.yaml");
  EXPECT_EQ(component(back, "raw")->manifests->content, raw->manifests->content);
  std::string tampered = yaml;
  tampered.replace(tampered.find("name: b"), 7, "name: c");
  try {
    recipe_from_yaml(tampered, "r.yaml");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("components[raw].manifests.content"));
    EXPECT_THAT(e.what(), HasSubstr("resolve the recipe again"));
  }
  // The rendered output is in the digest: another object changes it.
  Library changed = load_library(manifest_library(
      {file("manifests/raw/c.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: c}\n")}));
  EXPECT_NE(resolve(changed, q).digest, r.digest);
}

TEST(ManifestsTest, BrokenManifestComponentsAreNamed) {
  auto expect_error = [](std::vector<LibraryFile> extra, const char* needle) {
    try {
      Library lib = load_library(manifest_library(std::move(extra)));
      resolve(lib, Query{});
      ADD_FAILURE() << "no error for " << needle;
    } catch (const core::InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expect_error({file("manifests/raw/z.yaml", "apiVersion: v1\nmetadata: {name: z}\n")},
               "manifests/raw/z.yaml document 1: kind: missing");
  expect_error({file("manifests/raw/z.yaml", "apiVersion: v1\nkind: ConfigMap\n")},
               "metadata.name: missing");
  expect_error({file("overlays/bad.yaml",
                     "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n"
                     "  kz: {manifests: {kind: kustomize, path: manifests/raw}}\n")},
               "has no kustomization.yaml");
  expect_error({file("overlays/bad.yaml",
                     "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n"
                     "  raw: {manifests: {path: manifests/nothing}}\n")},
               "no *.yaml file under 'manifests/nothing'");
  expect_error({file("overlays/bad.yaml",
                     "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n"
                     "  raw: {manifests: {path: ../etc}}\n")},
               "must name a directory under manifests/");
  expect_error({file("overlays/bad.yaml",
                     "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n"
                     "  raw: {manifests: {kind: helm}}\n")},
               "'helm' is not a manifest kind");
  expect_error({file("overlays/bad.yaml",
                     "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n"
                     "  raw: {chart: {version: 1.0.0}}\n")},
               "a component is one or the other");
}

// kubectl kustomize from kube-local's built-in kubectl (the tool CI builds), else kubectl on
// PATH; without either the test is skipped.
bool use_kustomize_tool() {
  std::string kube_local = GPUFLEET_KUBE_LOCAL_BIN;
  if (::access(kube_local.c_str(), X_OK) == 0) {
    ::setenv("GPUFLEET_KUBECTL", (kube_local + " kubectl").c_str(), 1);
    return true;
  }
  for (const char* dir : {"/usr/local/bin", "/usr/bin"}) {
    if (::access((std::string(dir) + "/kubectl").c_str(), X_OK) == 0) {
      ::setenv("GPUFLEET_KUBECTL", (std::string(dir) + "/kubectl").c_str(), 1);
      return true;
    }
  }
  return false;
}

TEST(ManifestsTest, KustomizeDirectoriesRenderThroughKubectlKustomize) {
  if (!use_kustomize_tool()) GTEST_SKIP() << "no kube-local or kubectl to run kustomize";
  Library lib = load_library(manifest_library({file(
      "overlays/kz.yaml",
      "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n  kz: {enabled: true}\n")}));
  Recipe r = resolve(lib, Query{});
  const Component* kz = component(r, "kz");
  ASSERT_NE(kz, nullptr);
  ASSERT_TRUE(kz->manifests);
  std::vector<core::Value> docs = core::parse_yaml_documents(kz->manifests->content);
  ASSERT_EQ(docs.size(), 2u);  // the ConfigMap and the sibling base's ServiceAccount
  for (const core::Value& d : docs) EXPECT_EQ(d.get_string({"metadata", "namespace"}), "ns-kz");
  // Same library, same text: the digest is stable across runs of the tool.
  EXPECT_EQ(resolve(lib, Query{}).digest, r.digest);
  // A broken kustomization is named with the tool's message.
  Library broken = load_library(manifest_library(
      {file(
           "overlays/kz.yaml",
           "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n  kz: {enabled: true}\n"),
       file("manifests/kz/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources: [missing.yaml]\n")}));
  try {
    resolve(broken, Query{});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("component kz (kustomize manifests/kz)"));
    EXPECT_THAT(e.what(), HasSubstr("missing.yaml"));
  }
  // The library's own kustomize component (opt-in mixin).
  Recipe queues =
      resolve_of({"kind", "h100", "ubuntu", "training", "kubeflow"}, {"kueue-gpu-queues"});
  const Component* q = component(queues, "kueue-gpu-queues");
  ASSERT_NE(q, nullptr);
  EXPECT_THAT(q->manifests->content, HasSubstr("kind: ClusterQueue"));
  EXPECT_TRUE(depends_on(*q, "kueue"));
}

TEST(ManifestsTest, AMissingKustomizeToolSaysHowToGetOne) {
  ::setenv("GPUFLEET_KUBECTL", "/nonexistent/kubectl", 1);
  Library lib = load_library(manifest_library({file(
      "overlays/kz.yaml",
      "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\ncomponents:\n  kz: {enabled: true}\n")}));
  try {
    resolve(lib, Query{});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("GPUFLEET_KUBECTL"));
  }
  ::unsetenv("GPUFLEET_KUBECTL");
  EXPECT_EQ(kustomize_command(), (std::vector<std::string>{"kubectl", "kustomize"}));
}

// Every deployer installs a manifest component from the wrapper chart the bundle carries.
TEST(ManifestsTest, EveryDeployerInstallsTheLocalWrapperChart) {
  Recipe r = resolve_of({"gke", "h100", "cos", "training", "kubeflow"});
  const Component* tcpxo = component(r, "gke-nccl-tcpxo");
  ASSERT_NE(tcpxo, nullptr);
  BundleOptions o;
  o.repo_url = "https://git.example.com/platform/gpu.git";
  o.repo_path = "clusters/prod";
  const std::string dir = "local-charts/gke-nccl-tcpxo/";
  for (Deployer d : {Deployer::Helm, Deployer::ArgoCd, Deployer::ArgoCdHelm, Deployer::Flux,
                     Deployer::Helmfile}) {
    SCOPED_TRACE(std::string(deployer_name(d)));
    Bundle b = render_bundle(r, d, o);
    ASSERT_TRUE(b.count(dir + "Chart.yaml"));
    core::Value chart = core::parse_yaml(b.at(dir + "Chart.yaml").content);
    EXPECT_EQ(chart.get_string({"name"}), "gke-nccl-tcpxo");
    EXPECT_EQ(chart.get_string({"version"}), "1.0.15");
    EXPECT_EQ(b.at(dir + "files/manifests.yaml").content, tcpxo->manifests->content);
    EXPECT_THAT(b.at(dir + "templates/manifests.yaml").content,
                HasSubstr("{{ .Files.Get \"files/manifests.yaml\" }}"));
    EXPECT_THAT(b.at("checksums.txt").content, HasSubstr(dir + "files/manifests.yaml"));
  }
  Bundle helm = render_bundle(r, Deployer::Helm, o);
  const std::string& install = helm.at("components/gke-nccl-tcpxo/install.sh").content;
  EXPECT_THAT(
      install,
      HasSubstr("helm upgrade --install 'gke-nccl-tcpxo' '../../local-charts/gke-nccl-tcpxo'"));
  EXPECT_THAT(install, ::testing::Not(HasSubstr("--repo")));
  core::Value app = core::parse_yaml(
      render_bundle(r, Deployer::ArgoCd, o).at("applications/gke-nccl-tcpxo.yaml").content);
  EXPECT_EQ(app.get_string({"spec", "source", "repoURL"}), o.repo_url);
  EXPECT_EQ(app.get_string({"spec", "source", "path"}),
            "clusters/prod/local-charts/gke-nccl-tcpxo");
  EXPECT_EQ(app.find("spec")->find("source")->find("chart"), nullptr);
  core::Value rel = core::parse_yaml(
      render_bundle(r, Deployer::Flux, o).at("releases/gke-nccl-tcpxo.yaml").content);
  EXPECT_EQ(rel.get_string({"spec", "chart", "spec", "sourceRef", "kind"}), "GitRepository");
  EXPECT_EQ(rel.get_string({"spec", "chart", "spec", "chart"}),
            "./clusters/prod/local-charts/gke-nccl-tcpxo");
  core::Value hf =
      core::parse_yaml(render_bundle(r, Deployer::Helmfile, o).at("helmfile.yaml").content);
  bool found = false;
  for (const core::Value& e : hf.find("releases")->as_list()) {
    if (e.get_string({"name"}) != "gke-nccl-tcpxo") continue;
    found = true;
    EXPECT_EQ(e.get_string({"chart"}), "./local-charts/gke-nccl-tcpxo");
  }
  EXPECT_TRUE(found);
  Bundle ah = render_bundle(r, Deployer::ArgoCdHelm, o);
  EXPECT_THAT(ah.at(".helmignore").content, HasSubstr("local-charts/"));
  EXPECT_THAT(ah.at("values.yaml").content,
              HasSubstr("path: clusters/prod/local-charts/gke-nccl-tcpxo"));
  try {
    render_bundle(r, Deployer::ArgoCdHelm, {});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("--repo-url"));
  }
}

}  // namespace
}  // namespace gpufleet::recipe
