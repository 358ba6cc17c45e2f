// The real library: loads, references resolve, every claimed combination resolves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "core/errors.h"
#include "recipe/pin.h"
#include "recipe/requirement.h"
#include "recipe/resolver.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using testing::file;
using ::testing::HasSubstr;
using testing::repo_library;
using testing::small_library;

TEST(LibraryTest, RepositoryLibraryLoadsWithEveryRequiredCriterion) {
  const Library& lib = repo_library();
  auto has = [&](Dimension d, const char* v) {
    return std::find(lib.valid[d].begin(), lib.valid[d].end(), v) != lib.valid[d].end();
  };
  for (const char* s : {"eks", "gke", "aks", "oke", "kind"}) EXPECT_TRUE(has(kService, s)) << s;
  for (const char* a : {"h100", "h200", "b200", "gb200"}) EXPECT_TRUE(has(kAccelerator, a)) << a;
  for (const char* o : {"ubuntu", "rhel", "cos"}) EXPECT_TRUE(has(kOs, o)) << o;
  for (const char* i : {"training", "inference"}) EXPECT_TRUE(has(kIntent, i)) << i;
  for (const char* p : {"dynamo", "kubeflow"}) EXPECT_TRUE(has(kPlatform, p)) << p;
  EXPECT_NE(lib.components.find("gpufleet"), nullptr);
  EXPECT_GE(lib.overlays.size(), 20u);
}

TEST(LibraryTest, EveryRegistryChartIsPinnedAndEveryComponentIsReachable) {
  const Library& lib = repo_library();
  std::set<std::string> enabled_somewhere;
  auto collect = [&](const core::Value& content) {
    if (const core::Value* comps = content.find("components")) {
      for (const auto& e : comps->as_map()) {
        if (const core::Value* on = e.value.find("enabled"); on && on->as_bool()) {
          enabled_somewhere.insert(e.key);
        }
      }
    }
  };
  for (const auto& [_, o] : lib.overlays) collect(o.content);
  for (const auto& [_, m] : lib.mixins) collect(m.content);
  for (const auto& e : lib.components.as_map()) {
    std::string_view pin = e.value.find("manifests") ? e.value.get_string({"manifests", "version"})
                                                     : e.value.get_string({"chart", "version"});
    EXPECT_TRUE(is_exact_pin(pin)) << e.key;
    EXPECT_TRUE(enabled_somewhere.count(e.key)) << e.key << " is never enabled";
  }
}

TEST(LibraryTest, EverySupportedCombinationResolves) {
  const Library& lib = repo_library();
  std::vector<CriteriaValues> combos = lib.supported_combinations();
  EXPECT_GE(combos.size(), 100u);
  for (const CriteriaValues& c : combos) {
    Query q;
    q.criteria = c;
    std::string label = c[0] + "/" + c[1] + "/" + c[2] + "/" + c[3] + "/" + c[4];
    try {
      Recipe r = resolve(lib, q);
      EXPECT_FALSE(r.components.empty()) << label;
      EXPECT_EQ(r.components.front().level, 0) << label;
      ASSERT_EQ(r.pools.size(), 1u) << label;
      EXPECT_FALSE(r.pools[0].constraints.empty()) << label;
      // The driver every pool states satisfies that pool's driver floor.
      std::string driver(r.pools[0].settings.get_string({"driver", "version"}));
      for (const Constraint& k : r.pools[0].constraints) {
        if (k.fact != "gpu.driver") continue;
        EXPECT_TRUE(satisfies(parse_requirement(k.requirement, k.name), driver)) << label;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << label << ": " << e.what();
    }
  }
}

TEST(LibraryTest, UnsupportedCombinationGivesTheReason) {
  Query q;
  q.criteria = {"eks", "h100", "cos", "training", "dynamo"};
  try {
    resolve(repo_library(), q);
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("Container-Optimized OS"));
  }
}

TEST(LibraryTest, FloatingVersionInRegistryIsRejected) {
  std::vector<LibraryFile> files = small_library({});
  for (LibraryFile& f : files) {
    if (f.path == "registry.yaml") {
      f.content.replace(f.content.find("version: 1.0.0"), 14, "version: latest");
    }
  }
  try {
    load_library(files);
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("test:registry.yaml"));
    EXPECT_THAT(e.what(), HasSubstr("components.a.chart.version"));
    EXPECT_THAT(e.what(), HasSubstr("'latest'"));
  }
}

TEST(LibraryTest, RangeVersionInOverlayIsRejected) {
  auto files = small_library({file("overlays/o.yaml", R"(apiVersion: gpufleet.io/v1alpha1
kind: Overlay
components:
  a: {chart: {version: ^1.2.0}}
)")});
  EXPECT_THROW(load_library(files), core::InvalidInput);
}

TEST(LibraryTest, BrokenReferencesAreNamed) {
  auto expect_error = [](std::vector<LibraryFile> extra, const char* needle) {
    try {
      load_library(small_library(std::move(extra)));
      ADD_FAILURE() << "no error for " << needle;
    } catch (const core::InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  const char* head = "apiVersion: gpufleet.io/v1alpha1\nkind: Overlay\n";
  expect_error({file("overlays/o.yaml", std::string(head) + "parent: nope\n")},
               "no overlay named 'nope'");
  expect_error({file("overlays/o.yaml", std::string(head) + "mixins: [nope]\n")},
               "no mixin named 'nope'");
  expect_error({file("overlays/o.yaml", std::string(head) + "components: {zz: {enabled: true}}\n")},
               "components.zz: unknown component");
  expect_error(
      {file("overlays/o.yaml", std::string(head) + "components: {a: {dependencies: [zz]}}\n")},
      "'zz' is not a component");
  expect_error({file("overlays/o.yaml", std::string(head) + "criteria: {service: aws}\n")},
               "'aws' is not a known service; valid values are eks, gke");
  expect_error({file("overlays/o.yaml", std::string(head) + "criteria: {gpu: h100}\n")},
               "o.yaml:3:12: criteria.gpu: is not a known field");
  expect_error({file("overlays/p.yaml", std::string(head) + "parent: q\n"),
                file("overlays/q.yaml", std::string(head) + "parent: p\n")},
               "inheritance cycle");
  expect_error(
      {file("overlays/p.yaml", std::string(head) + "criteria: {service: eks}\n"),
       file("overlays/q.yaml", std::string(head) + "parent: p\ncriteria: {service: gke}\n")},
      "contradicts 'eks'");
  expect_error(
      {file("overlays/o.yaml",
            std::string(head) + "constraints: {k: {fact: gpu.product, requirement: '== x'}}\n")},
      "'gpu.product' is not a cluster fact");
  expect_error({file("stray.yaml", "a: 1\n")}, "not a library file");
}

TEST(LibraryTest, DataDirectoryAddsAndReplacesFiles) {
  std::vector<LibraryFile> base = small_library({});
  auto merged = overlay_files(base, {file("registry.yaml", "x"), file("overlays/new.yaml", "y")});
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[1].path, "overlays/new.yaml");
  EXPECT_EQ(merged[2].content, "x");
}

TEST(LibraryTest, BuiltinLibraryMatchesTheRepositoryFiles) {
  std::vector<LibraryFile> builtin = builtin_library_files();
  std::vector<LibraryFile> disk = testing::repo_library_files();
  ASSERT_EQ(builtin.size(), disk.size());
  for (std::size_t i = 0; i < disk.size(); ++i) {
    EXPECT_EQ(builtin[i].path, disk[i].path);
    EXPECT_EQ(builtin[i].content, disk[i].content) << disk[i].path << ": rebuild to re-embed";
  }
}

}  // namespace
}  // namespace gpufleet::recipe
