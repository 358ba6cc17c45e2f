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

TEST_P(BundleGoldenTest, MatchesGoldenFiles) {
  Bundle b = render_bundle(golden_recipe(), GetParam(), golden_options());
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
        path.rfind("templates/", 0) != 0) {
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
  for (const Component& c : r.components) {
    const std::string& install = b.at("components/" + c.name + "/install.sh").content;
    EXPECT_THAT(install, HasSubstr("--version '" + c.chart.version + "'"));
    EXPECT_THAT(install, HasSubstr("--wait"));
    EXPECT_EQ(core::parse_yaml(b.at("components/" + c.name + "/values.yaml").content), c.values);
  }
}

TEST(BundleTest, FluxDependsOnAndHelmfileNeedsMirrorTheGraph) {
  const Recipe& r = golden_recipe();
  Bundle flux = render_bundle(r, Deployer::Flux, {});
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
    EXPECT_EQ(app.get_string({"spec", "source", "targetRevision"}), c.chart.version);
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

}  // namespace
}  // namespace gpufleet::recipe
