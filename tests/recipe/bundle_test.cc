// Bundles per deployer: golden files (UPDATE_GOLDEN=1 regenerates them), determinism,
// checksums, and the structure each deployer promises.
#include "recipe/bundle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/bundle/render.h"
#include "recipe/resolver.h"
#include "support/source_paths.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The golden recipe: the example, on the repository library.
const Recipe& golden_recipe() {
  static const Recipe r = [] {
    Query q;
    q.criteria = {"eks", "h100", "ubuntu", "inference", "dynamo"};
    return resolve(testing::repo_library(), q);
  }();
  return r;
}

BundleOptions golden_options() {
  BundleOptions o;
  o.repo_url = "https://git.example.com/platform/gpu-cluster.git";
  o.repo_path = "clusters/prod";
  return o;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path golden_dir(Deployer d) {
  return fs::path(GPUFLEET_SOURCE_DIR) / "tests/recipe/golden" / std::string(deployer_name(d));
}

class BundleGoldenTest : public ::testing::TestWithParam<Deployer> {};

// Built-in charts (local-charts/) are deploy/chart's own files, checked against it below
// (BuiltinChartTravelsWithEveryDeployer); golden files would only duplicate them and break
// on every chart edit, so they are left out, with their lines in checksums.txt.
bool is_local_chart(const std::string& path) { return path.rfind("local-charts/", 0) == 0; }

Bundle without_local_charts(Bundle b) {
  std::erase_if(b, [](const auto& e) { return is_local_chart(e.first); });
  std::istringstream lines(b.at("checksums.txt").content);
  std::string line, kept;
  while (std::getline(lines, line)) {
    if (!is_local_chart(line.substr(66))) kept += line + "\n";
  }
  b["checksums.txt"].content = kept;
  return b;
}

TEST_P(BundleGoldenTest, MatchesGoldenFiles) {
  Bundle b = without_local_charts(render_bundle(golden_recipe(), GetParam(), golden_options()));
  fs::path dir = golden_dir(GetParam());
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    fs::remove_all(dir);
    write_bundle(b, dir.string());
    GTEST_SKIP() << "regenerated " << dir;
  }
  std::set<std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) on_disk.insert(fs::relative(e.path(), dir).generic_string());
  }
  std::set<std::string> rendered;
  for (const auto& [path, _] : b) rendered.insert(path);
  EXPECT_EQ(rendered, on_disk) << "run with UPDATE_GOLDEN=1 after an intended change";
  for (const auto& [path, file] : b) {
    if (!on_disk.count(path)) continue;
    EXPECT_EQ(file.content, read(dir / path)) << path << " differs; UPDATE_GOLDEN=1 regenerates";
  }
}

TEST_P(BundleGoldenTest, ByteIdenticalAcrossRunsAndChecksumsHold) {
  Bundle a = render_bundle(golden_recipe(), GetParam(), golden_options());
  // A fresh resolution and a recipe read back from its own YAML give the same bytes.
  Query q;
  q.criteria = {"eks", "h100", "ubuntu", "inference", "dynamo"};
  Recipe again =
      recipe_from_yaml(recipe_to_yaml(resolve(testing::repo_library(), q)), "recipe.yaml");
  Bundle b = render_bundle(again, GetParam(), golden_options());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [path, file] : a) {
    ASSERT_TRUE(b.count(path)) << path;
    EXPECT_EQ(file.content, b.at(path).content) << path;
    EXPECT_EQ(file.executable, b.at(path).executable) << path;
  }
  ASSERT_TRUE(a.count("recipe.yaml"));
  std::istringstream lines(a.at("checksums.txt").content);
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    std::string hash = line.substr(0, 64), path = line.substr(66);
    ASSERT_TRUE(a.count(path)) << path;
    EXPECT_EQ(hash, core::sha256_hex(a.at(path).content)) << path;
    ++n;
  }
  EXPECT_EQ(n, a.size() - 1);
  // Every YAML file parses (Go templates excepted).
  for (const auto& [path, file] : a) {
    if (path.size() > 5 && path.substr(path.size() - 5) == ".yaml" &&
        path.find("templates/") == std::string::npos) {
      EXPECT_NO_THROW(core::parse_yaml_documents(file.content, path)) << path;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Deployers, BundleGoldenTest,
                         ::testing::Values(Deployer::Helm, Deployer::ArgoCd, Deployer::ArgoCdHelm,
                                           Deployer::Flux, Deployer::Helmfile),
                         [](const auto& info) {
                           std::string n(deployer_name(info.param));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(BundleTest, HelmDeployScriptInstallsLevelByLevelAndUninstallsInReverse) {
  const Recipe& r = golden_recipe();
  Bundle b = render_bundle(r, Deployer::Helm, {});
  const std::string& deploy = b.at("deploy.sh").content;
  const std::string& uninstall = b.at("uninstall.sh").content;
  EXPECT_TRUE(b.at("deploy.sh").executable);
  std::size_t prev = 0;
  for (std::size_t i = 0; i < r.levels.size(); ++i) {
    std::string call = "\nlevel " + std::to_string(i) + " ";
    std::size_t at = deploy.find(call);
    ASSERT_NE(at, std::string::npos) << call;
    EXPECT_GT(at, prev);
    prev = at;
  }
  EXPECT_LT(uninstall.find("\nlevel " + std::to_string(r.levels.size() - 1) + " "),
            uninstall.find("\nlevel 0 "));
  EXPECT_THAT(deploy, HasSubstr("sleep \"$delay\""));
  EXPECT_THAT(deploy, HasSubstr("\"$here/preflight.sh\""));
  EXPECT_TRUE(b.at("preflight.sh").executable);
  // The values written are the recipe's, with the pools' node selector fed in.
  const Recipe fed = apply_overrides(r, pool_selector_overrides(r, {}));
  for (const Component& c : fed.components) {
    const std::string& install = b.at("components/" + c.name + "/install.sh").content;
    if (c.chart.is_builtin()) {
      EXPECT_THAT(install, HasSubstr("'../../local-charts/" + c.name + "'"));
    } else {
      EXPECT_THAT(install, HasSubstr("--version '" + c.chart.version + "'"));
    }
    EXPECT_THAT(install, HasSubstr("--wait"));
    EXPECT_EQ(core::parse_yaml(b.at("components/" + c.name + "/values.yaml").content), c.values);
  }
}

TEST(BundleTest, FluxDependsOnAndHelmfileNeedsMirrorTheGraph) {
  const Recipe& r = golden_recipe();
  Bundle flux = render_bundle(r, Deployer::Flux, golden_options());
  Bundle helmfile = render_bundle(r, Deployer::Helmfile, {});
  core::Value hf = core::parse_yaml(helmfile.at("helmfile.yaml").content);
  for (const Component& c : r.components) {
    core::Value rel = core::parse_yaml(flux.at("releases/" + c.name + ".yaml").content);
    std::vector<std::string> deps;
    if (const core::Value* d = rel.get({"spec", "dependsOn"})) {
      for (const core::Value& e : d->as_list()) deps.emplace_back(e.get_string({"name"}));
    }
    EXPECT_EQ(deps, c.dependencies) << c.name;
    EXPECT_EQ(rel.get_string({"spec", "chart", "spec", "version"}), c.chart.version);
    if (c.chart.is_builtin()) {
      EXPECT_EQ(rel.get_string({"spec", "chart", "spec", "sourceRef", "kind"}), "GitRepository");
      EXPECT_EQ(rel.get_string({"spec", "chart", "spec", "chart"}),
                "./clusters/prod/local-charts/" + c.name);
    }
    for (const core::Value& e : hf.find("releases")->as_list()) {
      if (e.get_string({"name"}) != c.name) continue;
      std::size_t needs = e.find("needs") ? e.find("needs")->size() : 0;
      EXPECT_EQ(needs, c.dependencies.size()) << c.name;
    }
  }
}

TEST(BundleTest, ArgoCdSyncWavesFollowLevelsAndNeedARepoUrl) {
  const Recipe& r = golden_recipe();
  Bundle b = render_bundle(r, Deployer::ArgoCd, golden_options());
  for (const Component& c : r.components) {
    core::Value app = core::parse_yaml(b.at("applications/" + c.name + ".yaml").content);
    EXPECT_EQ(app.get_string({"metadata", "annotations", "argocd.argoproj.io/sync-wave"}),
              std::to_string(c.level));
    EXPECT_EQ(app.get_string({"spec", "source", "targetRevision"}),
              c.chart.is_builtin() ? std::string("HEAD") : c.chart.version);
  }
  EXPECT_THROW(render_bundle(r, Deployer::ArgoCd, {}), core::InvalidInput);
}

TEST(BundleTest, UnknownDeployerListsTheValidOnes) {
  try {
    parse_deployer("kustomize");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("helm, argocd, argocd-helm, flux, helmfile"));
  }
}

TEST(BundleTest, WriteRefusesANonEmptyDirectory) {
  fs::path dir = fs::temp_directory_path() / ("gpufleet-bundle-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Bundle b = render_bundle(golden_recipe(), Deployer::Helm, {});
  write_bundle(b, dir.string());
  EXPECT_EQ(read(dir / "recipe.yaml"), b.at("recipe.yaml").content);
  EXPECT_NE(fs::status(dir / "deploy.sh").permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_THROW(write_bundle(b, dir.string()), core::InvalidInput);
  fs::remove_all(dir);
}

TEST(BundleTest, RepositoryNamesAreDnsLabels) {
  EXPECT_EQ(detail::repository_name("https://helm.ngc.nvidia.com/nvidia"),
            "helm-ngc-nvidia-com-nvidia");
  EXPECT_EQ(detail::repository_name("oci://ghcr.io/kai-scheduler/kai-scheduler"),
            "ghcr-io-kai-scheduler-kai-scheduler");
  std::string long_url = "https://" + std::string(100, 'a') + ".example.com/charts";
  std::string name = detail::repository_name(long_url);
  EXPECT_LE(name.size(), 63u);
  EXPECT_NE(name, detail::repository_name(long_url + "2"));
}

// Every recipe installs gpufleet's own chart; until it is published, the chart travels in
// the bundle, byte for byte deploy/chart/gpufleet, and every deployer installs from there.
TEST(BundleTest, BuiltinChartTravelsWithEveryDeployer) {
  const Recipe& r = golden_recipe();
  const Component* gpufleet = nullptr;
  for (const Component& c : r.components) {
    if (c.name == "gpufleet") gpufleet = &c;
  }
  ASSERT_NE(gpufleet, nullptr);
  ASSERT_TRUE(gpufleet->chart.is_builtin());
  fs::path chart = fs::path(GPUFLEET_SOURCE_DIR) / "deploy/chart/gpufleet";
  for (Deployer d : {Deployer::Helm, Deployer::ArgoCd, Deployer::ArgoCdHelm, Deployer::Flux,
                     Deployer::Helmfile}) {
    Bundle b = render_bundle(r, d, golden_options());
    std::size_t files = 0;
    for (const auto& e : fs::recursive_directory_iterator(chart)) {
      if (!e.is_regular_file()) continue;
      std::string rel = "local-charts/gpufleet/" + fs::relative(e.path(), chart).generic_string();
      ASSERT_TRUE(b.count(rel)) << deployer_name(d) << ": " << rel;
      EXPECT_EQ(b.at(rel).content, read(e.path())) << rel << ": rebuild to embed the chart";
      EXPECT_THAT(b.at("checksums.txt").content, HasSubstr("  " + rel + "\n"));
      ++files;
    }
    EXPECT_GT(files, 5u);
  }
  Bundle helmfile = render_bundle(r, Deployer::Helmfile, {});
  EXPECT_THAT(helmfile.at("helmfile.yaml").content, HasSubstr("chart: ./local-charts/gpufleet"));
  EXPECT_THAT(helmfile.at("helmfile.yaml").content, ::testing::Not(HasSubstr("ghcr-io-gpufleet")));
  // argocd-helm reads the chart from the Git repository the bundle is pushed to; Flux from
  // the flux-system GitRepository the bundle is synced from (as for manifest components).
  EXPECT_THAT(render_bundle(r, Deployer::Flux, {}).at("releases/gpufleet.yaml").content,
              HasSubstr("name: flux-system"));
  EXPECT_THROW(render_bundle(r, Deployer::ArgoCdHelm, {}), core::InvalidInput);
}

TEST(BundleTest, BuiltinChartVersionMustMatchThePin) {
  Recipe r = golden_recipe();
  for (Component& c : r.components) {
    if (c.name == "gpufleet") c.chart.version = "9.9.9";
  }
  try {
    render_bundle(r, Deployer::Helm, {});
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("the recipe pins '9.9.9'"));
  }
  for (Component& c : r.components) {
    if (c.name == "gpufleet") c.chart = {"builtin", "nosuchchart", "1.0.0", {}};
  }
  EXPECT_THROW(render_bundle(r, Deployer::Helm, {}), core::InvalidInput);
}

TEST(OverridesTest, ValuePathsWithIndexesAndEscapedDots) {
  auto p = parse_value_path("a.b[0].c\\.d[12]", "--set", "x");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(std::get<std::string>(p[0]), "a");
  EXPECT_EQ(std::get<std::size_t>(p[2]), 0u);
  EXPECT_EQ(std::get<std::string>(p[3]), "c.d");
  EXPECT_EQ(std::get<std::size_t>(p[4]), 12u);
  EXPECT_EQ(value_path_text(p), "a.b[0].c\\.d[12]");
  for (const char* bad : {"a..b", "a[x]", "a[1", "a[0]b", ".a", "a."}) {
    EXPECT_THROW(parse_value_path(bad, "--set", bad), core::InvalidInput) << bad;
  }
}

TEST(OverridesTest, SetTypesLikeHelmAndAppliesAtThePath) {
  const Recipe& r = golden_recipe();
  std::vector<Override> o = {
      parse_set("gpu-operator:driver.version=580.105.08"),
      parse_set("gpu-operator:driver.enabled=false"),
      parse_set("gpu-operator:operator.replicas=3"),
      parse_set("gpu-operator:toolkit.env[0].name=CONTAINERD_CONFIG"),
      parse_set_json(
          "node-feature-discovery:worker.tolerations[1]={\"key\":\"x\",\"operator\":\"Exists\"}"),
  };
  Recipe out = apply_overrides(r, o);
  const Component* op = nullptr;
  const Component* nfd = nullptr;
  for (const Component& c : out.components) {
    if (c.name == "gpu-operator") op = &c;
    if (c.name == "node-feature-discovery") nfd = &c;
  }
  ASSERT_TRUE(op && nfd);
  EXPECT_EQ(op->values.get_string({"driver", "version"}), "580.105.08");
  EXPECT_EQ(*op->values.get({"driver", "enabled"}), core::Value(false));
  EXPECT_EQ(*op->values.get({"operator", "replicas"}), core::Value(3));
  EXPECT_EQ(op->values.get({"toolkit", "env"})->as_list().at(0).get_string({"name"}),
            "CONTAINERD_CONFIG");
  const core::List& tol = nfd->values.get({"worker", "tolerations"})->as_list();
  ASSERT_EQ(tol.size(), 2u);  // the registry's toleration kept, one appended
  EXPECT_EQ(tol[1].get_string({"key"}), "x");
  EXPECT_NE(out.digest, r.digest);
  // The same overrides give the same digest; different ones a different digest.
  EXPECT_EQ(apply_overrides(r, o).digest, out.digest);
  o.pop_back();
  EXPECT_NE(apply_overrides(r, o).digest, out.digest);
}

TEST(OverridesTest, DisabledComponentLeavesAndDependentsTreatItAsExternal) {
  const Recipe& r = golden_recipe();
  Recipe out = apply_overrides(r, {parse_set("cert-manager:enabled=false")});
  for (const Component& c : out.components) {
    EXPECT_NE(c.name, "cert-manager");
    for (const std::string& d : c.dependencies) EXPECT_NE(d, "cert-manager") << c.name;
  }
  EXPECT_EQ(out.components.size() + 1, r.components.size());
  Bundle b = render_bundle(r, Deployer::Helm, [] {
    BundleOptions o;
    o.overrides = {parse_set("cert-manager:enabled=false")};
    return o;
  }());
  EXPECT_FALSE(b.count("components/cert-manager/install.sh"));
  EXPECT_THAT(b.at("deploy.sh").content, ::testing::Not(HasSubstr("cert-manager")));
  // The bundle carries the recipe as given, and the overrides with the combined digest.
  EXPECT_EQ(b.at("recipe.yaml").content, recipe_to_yaml(r));
  core::Value rec = core::parse_yaml(b.at("overrides.yaml").content);
  EXPECT_EQ(rec.get_string({"recipe"}), r.digest);
  EXPECT_EQ(rec.get_string({"digest"}), out.digest);
  EXPECT_THAT(b.at("deploy.sh").content, HasSubstr(out.digest));
}

TEST(OverridesTest, ValuesFileBecomesLeafOverrides) {
  auto o = parse_overrides_file(
      "gpu-operator:\n  values:\n    driver: {version: 580.105.08}\n    devicePlugin:\n"
      "      env: [{name: A, value: b}]\ngatekeeper:\n  enabled: false\n",
      "site.yaml");
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o[0].flag, "-f site.yaml");
  EXPECT_TRUE(o[0].enabled_flag);  // gatekeeper: components in name order
  EXPECT_EQ(value_path_text(o[1].path), "devicePlugin.env");  // lists replace as a whole
  EXPECT_EQ(value_path_text(o[2].path), "driver.version");
  try {
    parse_overrides_file("gpu-operator:\n  valeus: {}\n", "site.yaml");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("-f site.yaml: gpu-operator.valeus: is not a known field"));
  }
}

TEST(OverridesTest, BadOverridesNameTheFlagTheValueAndTheFix) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([] { parse_set("gpu-operator.driver.version=1"); }),
              HasSubstr("--set 'gpu-operator.driver.version=1': expected COMPONENT:PATH=VALUE"));
  EXPECT_THAT(message([] { parse_set_json("gpu-operator:a={bad"); }),
              HasSubstr("--set-json 'gpu-operator:a={bad': the value is not JSON"));
  EXPECT_THAT(message([] { parse_set_file("gpu-operator:a=/nonexistent/file"); }),
              HasSubstr("--set-file 'gpu-operator:a=/nonexistent/file': cannot read the file"));
  EXPECT_THAT(message([] { parse_set("gpu-operator:enabled=maybe"); }),
              HasSubstr("enabled takes true or false"));
  const Recipe& r = golden_recipe();
  EXPECT_THAT(message([&] { apply_overrides(r, {parse_set("gpu-operatr:a=1")}); }),
              HasSubstr("--set 'gpu-operatr:a=1': component 'gpu-operatr' is not in recipe"));
  EXPECT_THAT(message([&] {
                apply_overrides(r, {parse_set("node-feature-discovery:worker.tolerations[5]=x")});
              }),
              HasSubstr("index 5 of worker.tolerations[5] is out of range: the list has 1 items"));
  EXPECT_THAT(
      message([&] {
        apply_overrides(r, {parse_set("gpu-operator:a=1"), parse_set("gpu-operator:a.b=2")});
      }),
      HasSubstr("'a' of gpu-operator is a int in the recipe, not a map"));
}

TEST(SchedulingTest, ShortcutsWriteTheRegistryPathsAndAnExplicitSetWins) {
  const Recipe& r = golden_recipe();
  BundleOptions o;
  o.scheduling.system_node_selector =
      parse_node_selector("--system-node-selector", "role=system,zone=a");
  o.scheduling.system_tolerations = core::Value::list();
  o.scheduling.system_tolerations.push_back(
      parse_toleration("--system-toleration", "dedicated=infra:NoSchedule"));
  o.scheduling.storage_class = "fast";
  o.overrides = {parse_set("cert-manager:webhook.nodeSelector.role=webhook")};
  Bundle b = render_bundle(r, Deployer::Helm, o);
  core::Value cm = core::parse_yaml(b.at("components/cert-manager/values.yaml").content);
  EXPECT_EQ(cm.get_string({"nodeSelector", "role"}), "system");
  EXPECT_EQ(cm.get_string({"nodeSelector", "zone"}), "a");
  EXPECT_EQ(cm.get_string({"cainjector", "nodeSelector", "role"}), "system");
  EXPECT_EQ(cm.get_string({"webhook", "nodeSelector", "role"}), "webhook");  // --set wins
  const core::List& tol = cm.get({"tolerations"})->as_list();
  ASSERT_EQ(tol.size(), 1u);
  EXPECT_EQ(tol[0].get_string({"key"}), "dedicated");
  EXPECT_EQ(tol[0].get_string({"operator"}), "Equal");
  EXPECT_EQ(tol[0].get_string({"value"}), "infra");
  EXPECT_EQ(tol[0].get_string({"effect"}), "NoSchedule");
  core::Value kps = core::parse_yaml(b.at("components/kube-prometheus-stack/values.yaml").content);
  EXPECT_EQ(kps.get_string({"grafana", "persistence", "storageClassName"}), "fast");
  EXPECT_EQ(kps.get_string({"prometheus", "prometheusSpec", "retention"}), "15d");  // kept
  core::Value gf = core::parse_yaml(b.at("components/gpufleet/values.yaml").content);
  EXPECT_EQ(gf.get_string({"controller", "nodeSelector", "role"}), "system");
  EXPECT_THAT(b.at("overrides.yaml").content, HasSubstr("flag: --system-node-selector"));
  EXPECT_THAT(b.at("overrides.yaml").content, HasSubstr("flag: --storage-class"));
}

TEST(SchedulingTest, PoolSelectorFeedsAcceleratedComponentsWithoutAnOverride) {
  const Recipe& r = golden_recipe();
  ASSERT_EQ(r.pools.size(), 1u);
  Bundle b = render_bundle(r, Deployer::Helm, {});
  core::Value gf = core::parse_yaml(b.at("components/gpufleet/values.yaml").content);
  EXPECT_EQ(*gf.get({"agent", "nodeSelector"}), r.pools[0].node_selector);
  EXPECT_FALSE(b.count("overrides.yaml"));  // derived from the recipe: its digest covers it
  // Two pools: only the labels both selectors share.
  Recipe two = r;
  two.pools.push_back(two.pools[0]);
  two.pools[0].node_selector = core::parse_yaml("{a: '1', gpufleet.io/node-pool: train}");
  two.pools[1].node_selector = core::parse_yaml("{a: '1', gpufleet.io/node-pool: serve}");
  auto fed = pool_selector_overrides(two, {});
  ASSERT_FALSE(fed.empty());
  EXPECT_EQ(fed[0].value, core::parse_yaml("{a: '1'}"));
  EXPECT_EQ(fed[0].flag, "nodePools");
  // An explicit accelerated selector replaces it.
  SchedulingShortcuts s;
  s.accelerated_node_selector = parse_node_selector("--accelerated-node-selector", "gpu=yes");
  EXPECT_TRUE(pool_selector_overrides(two, s).empty());
  EXPECT_EQ(scheduling_overrides(two, s).at(0).value, core::parse_yaml("{gpu: 'yes'}"));
}

TEST(SchedulingTest, BadShortcutsNameTheFlag) {
  EXPECT_EQ(parse_toleration("--t", "nvidia.com/gpu"),
            core::parse_yaml("{key: nvidia.com/gpu, operator: Exists}"));
  EXPECT_EQ(parse_toleration("--t", "k:NoExecute"),
            core::parse_yaml("{key: k, operator: Exists, effect: NoExecute}"));
  try {
    parse_toleration("--system-toleration", "k=v:NoSchedul");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("--system-toleration 'k=v:NoSchedul': effect 'NoSchedul'"));
  }
  EXPECT_THROW(parse_node_selector("--system-node-selector", "role"), core::InvalidInput);
  EXPECT_THROW(parse_node_selector("--system-node-selector", "a=b,"), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::recipe
