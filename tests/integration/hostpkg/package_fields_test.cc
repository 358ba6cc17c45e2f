// A package's fields on the pods that run it, and what a deleted set leaves behind: every stage
// pod (apply, config, interrupt, post-interrupt, upgrade, and the uninstall of a package that
// already left the set) carries the package's resources, env and image; a deleted set's metric
// series leave /metrics.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "core/json.h"
#include "core/metrics.h"
#include "hostpkg_env.h"
#include "kube/errors.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;

std::string one_node_set(const std::string& name, const std::string& node,
                         const std::string& packages) {
  return "apiVersion: gpufleet.io/v1alpha1\nkind: HostPackageSet\nmetadata: {name: " + name +
         "}\nspec:\n  nodeSelector:\n    matchExpressions:\n    - {key: kubernetes.io/hostname, "
         "operator: In, values: [" +
         node + "]}\n  packages:\n" + packages;
}

// Every stage pod of one set seen while it existed, by "<stage>/<package>" (the first copy).
class StagePodRecorder {
 public:
  StagePodRecorder(HostPkgEnv& env, std::string set) : env_(env), set_(std::move(set)) {
    thread_ = std::thread([this] {
      kube::ListOptions o;
      o.label_selector = "hostpkg.gpufleet.io/set=" + set_;
      while (!stop_) {
        try {
          for (auto& pod :
               env_.client().list(kube::resources::pods(), env_.stage_namespace(), o).items) {
            const core::Value* l = pod.get({"metadata", "labels"});
            std::string key = std::string(l->get_string({"hostpkg.gpufleet.io/stage"})) + "/" +
                              std::string(l->get_string({"hostpkg.gpufleet.io/package"}));
            std::lock_guard lock(mu_);
            pods_.try_emplace(key, std::move(pod));
          }
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(40ms);
      }
    });
  }
  ~StagePodRecorder() {
    stop_ = true;
    thread_.join();
  }
  std::optional<core::Value> get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = pods_.find(key);
    return it == pods_.end() ? std::nullopt : std::optional<core::Value>(it->second);
  }
  std::string keys() {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& [k, _] : pods_) out += k + " ";
    return out;
  }

 private:
  HostPkgEnv& env_;
  std::string set_;
  std::mutex mu_;
  std::map<std::string, core::Value> pods_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

const core::Value& step_container(const core::Value& pod) {
  for (const auto& c : pod.get({"spec", "containers"})->as_list())
    if (c.get_string({"name"}) == "step") return c;
  throw std::runtime_error("no step container");
}

bool has_env_arg(const core::Value& container, const std::string& kv) {
  const auto& args = container.get({"args"})->as_list();
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i].as_string() == "--env" && args[i + 1].as_string() == kv) return true;
  return false;
}

std::string package_image(const core::Value& pod) {
  const core::Value* init = pod.get({"spec", "initContainers"});
  if (init == nullptr || !init->is_list() || init->size() == 0) return "";
  return std::string(init->as_list().front().get_string({"image"}));
}

constexpr const char* kTuning =
    "    tuning:\n      version: VERSION\n      image: example.com/tuning\n"
    "      env: {LEVEL: \"3\"}\n"
    "      resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 200m, memory: 128Mi}}\n"
    "      configMap: {a.conf: \"x = 1\\n\"}\n"
    "      interrupt: {type: restartServices, services: [a.service]}\n"
    "      uninstall: {supported: true}\n";
constexpr const char* kBase = "    base:\n      version: 1.0.0\n      image: example.com/base\n";

std::string tuning(const std::string& version) {
  std::string s = kTuning;
  s.replace(s.find("VERSION"), 7, version);
  return s;
}

// Install, upgrade, then remove the package from the set (so its uninstall is built from the
// node's record): every one of its stage pods carries its resources, env and image.
TEST(HostPkgPackage, FieldsOnEveryStagePod) {
  HostPkgEnv env(1);
  const std::string node = env.node(0);
  StagePodRecorder seen(env, "fields");
  auto complete_after = [&](const std::string& key) {
    return HostPkgEnv::eventually(
        [&] {
          return seen.get(key) &&
                 env.get_set("fields").get_string({"status", "phase"}) == "Complete";
        },
        90s);
  };
  env.apply(one_node_set("fields", node, tuning("1.0.0") + kBase));
  ASSERT_TRUE(complete_after("post-interrupt/tuning")) << seen.keys();
  env.apply(one_node_set("fields", node, tuning("1.1.0") + kBase));
  ASSERT_TRUE(complete_after("upgrade/tuning")) << seen.keys();
  env.apply(one_node_set("fields", node, kBase));
  ASSERT_TRUE(complete_after("uninstall/tuning")) << seen.keys();

  const core::Value want = core::parse_json(
      R"({"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"200m","memory":"128Mi"}})");
  struct Case {
    std::string key, image;
  };
  const std::vector<Case> cases = {
      {"apply/tuning", "example.com/tuning:1.0.0"},
      {"config/tuning", "example.com/tuning:1.0.0"},
      {"post-interrupt/tuning", "example.com/tuning:1.0.0"},
      {"upgrade/tuning", "example.com/tuning:1.1.0"},
      {"uninstall/tuning", "example.com/tuning:1.1.0"},
      // The coalesced interrupt runs no package script (no package image): it carries the
      // largest resources and the env of the set's packages.
      {"interrupt/", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    auto pod = seen.get(c.key);
    ASSERT_TRUE(pod) << "no stage pod " << c.key << " seen; seen: " << seen.keys();
    const core::Value& step = step_container(*pod);
    const core::Value* res = step.get({"resources"});
    EXPECT_TRUE(res != nullptr && *res == want)
        << "resources: " << (res ? core::to_json(*res) : std::string("none"));
    EXPECT_TRUE(has_env_arg(step, "LEVEL=3")) << core::to_json(*step.get({"args"}));
    EXPECT_EQ(package_image(*pod), c.image);
  }
  // The other package asked for nothing: its pods carry no resources (the API server's {}).
  auto base = seen.get("apply/base");
  ASSERT_TRUE(base);
  const core::Value* none = step_container(*base).get({"resources"});
  EXPECT_TRUE(none == nullptr || (none->is_map() && none->size() == 0)) << core::to_json(*none);
  env.remove_set("fields");
}

// A set's series (nodes by state, rollout_stopped, stage results, interrupts) leave the
// registry served on /metrics once the set is deleted; other sets' series stay.
TEST(HostPkgPackage, DeletedSetLeavesNoMetricSeries) {
  HostPkgEnv env(2);
  env.apply(one_node_set("metrics-gone", env.node(0), tuning("1.0.0")));
  env.apply(one_node_set("metrics-kept", env.node(1), kBase));
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        return env.get_set("metrics-gone").get_string({"status", "phase"}) == "Complete" &&
               env.get_set("metrics-kept").get_string({"status", "phase"}) == "Complete";
      },
      90s));
  auto series_of = [](const std::string& set) {
    std::string text = core::metrics::default_registry().render();
    std::string out;
    const std::string label = "set=\"" + set + "\"";
    for (std::size_t pos = text.find(label); pos != std::string::npos;
         pos = text.find(label, pos + 1)) {
      std::size_t start = text.rfind('\n', pos) + 1;
      out += text.substr(start, text.find('\n', pos) - start) + "\n";
    }
    return out;
  };
  ASSERT_NE(series_of("metrics-gone"), "");
  env.remove_set("metrics-gone");
  ASSERT_TRUE(HostPkgEnv::eventually(
      [&] {
        try {
          env.get_set("metrics-gone");
          return false;
        } catch (const kube::ApiError& e) {
          return e.is(kube::Reason::NotFound);
        }
      },
      60s));
  // The finalizer goes in the pass that removes the series; give the worker a moment.
  EXPECT_TRUE(HostPkgEnv::eventually([&] { return series_of("metrics-gone").empty(); }, 5s))
      << "series of the deleted set left on /metrics:\n"
      << series_of("metrics-gone");
  EXPECT_NE(series_of("metrics-kept"), "");
  env.remove_set("metrics-kept");
}

}  // namespace
}  // namespace gpufleet::hostpkg::testing
