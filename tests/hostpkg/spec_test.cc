#include <gtest/gtest.h>

#include "core/errors.h"
#include "hostpkg/selector.h"
#include "hostpkg/spec.h"
#include "test_util.h"

namespace gpufleet::hostpkg {
namespace {

using testing::policy_from_yaml;
using testing::set_from_yaml;

// Expects parsing to fail with a message containing every fragment.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const core::InvalidInput& e) {
    for (const std::string& frag : fragments) {
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << frag;
    }
  }
}

TEST(Spec, FullSetParses) {
  HostPackageSet s = set_from_yaml(R"(
  nodeSelector: {matchLabels: {gpu: h100}}
  priority: 10
  sequencing: all
  runtimeRequired: true
  autoTaintNewNodes: true
  deploymentPolicy: racks
  protectedPods: {selector: {matchLabels: {app: train}}, waitTimeout: 30m}
  additionalTolerations: [{key: x, operator: Exists}]
  packages:
    tuning:
      version: 1.2.0
      image: registry.example/tuning
      dependsOn: [base]
      configMap: {net.conf: "a=1", vm.conf: "b=2"}
      configInterrupts:
        "net.*": {type: restartServices, services: [b.service, a.service, a.service]}
        "vm.conf": {type: reboot}
      interrupt: {type: none}
      env: {LEVEL: "3"}
      timeouts: {apply: 90s, interrupt: 1h}
      uninstall: {supported: true}
    base:
      version: v2.0.0
      image: registry.example/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      downgrade: inPlace
)");
  EXPECT_EQ(s.name, "test");
  ASSERT_EQ(s.packages.size(), 2u);
  EXPECT_EQ(s.packages[0].name, "base");  // dependsOn order
  EXPECT_EQ(s.packages[1].name, "tuning");
  EXPECT_EQ(s.packages[0].version_text, "2.0.0");
  EXPECT_EQ(s.packages[0].downgrade, DowngradeRule::InPlace);
  const Package& t = s.packages[1];
  EXPECT_EQ(t.image, "registry.example/tuning:1.2.0");
  EXPECT_EQ(t.timeout(Stage::Apply).count(), 90);
  EXPECT_EQ(t.timeout(Stage::Interrupt).count(), 3600);
  EXPECT_EQ(t.timeout(Stage::Config).count(), 300);
  EXPECT_EQ(t.downgrade, DowngradeRule::UninstallFirst);
  EXPECT_EQ(t.interrupt_for_key("net.conf").kind, InterruptKind::RestartServices);
  EXPECT_EQ(t.interrupt_for_key("net.conf").services,
            (std::vector<std::string>{"a.service", "b.service"}));
  EXPECT_EQ(t.interrupt_for_key("vm.conf").kind, InterruptKind::Reboot);
  EXPECT_EQ(t.env.at("LEVEL"), "3");
  EXPECT_EQ(s.sequencing, Sequencing::All);
  EXPECT_TRUE(s.has_protected_pods);
  EXPECT_EQ(s.protected_pod_wait.count(), 1800);
  EXPECT_TRUE(s.node_selector.matches({{"gpu", "h100"}}));
  EXPECT_FALSE(s.node_selector.matches({{"gpu", "a100"}}));
}

TEST(Spec, DependsOnCycleIsNamed) {
  expect_error(
      [] {
        set_from_yaml(R"(
  packages:
    a: {version: 1.0.0, image: r/a, dependsOn: [b]}
    b: {version: 1.0.0, image: r/b, dependsOn: [c]}
    c: {version: 1.0.0, image: r/c, dependsOn: [a]}
)");
      },
      {"dependsOn cycle", "a -> b -> c -> a", "remove one"});
  expect_error(
      [] { set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a, dependsOn: [a]}\n"); },
      {"a -> a"});
  expect_error(
      [] { set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a, dependsOn: [zz]}\n"); },
      {"spec.packages.a.dependsOn", "\"zz\"", "not a package of this set"});
}

TEST(Spec, BadFieldsNameFieldValueAndFix) {
  expect_error([] { set_from_yaml("  packages:\n    a: {version: 1.x, image: r/a}\n"); },
               {"spec.packages.a.version", "\"1.x\"", "MAJOR.MINOR.PATCH"});
  expect_error([] { set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a:2.0.0}\n"); },
               {"spec.packages.a.image", "tag \"2.0.0\"", "drop the tag"});
  expect_error(
      [] { set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a@sha256:abc}\n"); },
      {"malformed digest"});
  expect_error(
      [] { set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a, verison: 1}\n"); },
      {"spec.packages.a.verison", "unknown field"});
  expect_error([] { set_from_yaml("  packages:\n    Bad_Name: {version: 1.0.0, image: r/a}\n"); },
               {"Bad_Name", "DNS label"});
  expect_error(
      [] {
        set_from_yaml(
            "  packages:\n    a: {version: 1.0.0, image: r/a, interrupt: {type: kexec}}\n");
      },
      {"spec.packages.a.interrupt.type", "\"kexec\"", "reboot"});
  expect_error(
      [] {
        set_from_yaml(
            "  packages:\n    a: {version: 1.0.0, image: r/a, interrupt: {type: "
            "restartServices}}\n");
      },
      {"services", "restartServices needs"});
  expect_error(
      [] {
        set_from_yaml(
            "  packages:\n    a: {version: 1.0.0, image: r/a, interrupt: {type: reboot, services: "
            "[x]}}\n");
      },
      {"only restartServices"});
  expect_error(
      [] {
        set_from_yaml(
            "  packages:\n    a: {version: 1.0.0, image: r/a, configMap: {x.conf: a}, "
            "configInterrupts: {\"y*\": {type: reboot}}}\n");
      },
      {"configInterrupts.y*", "matches no configMap key"});
  expect_error(
      [] {
        set_from_yaml(
            "  packages:\n    a: {version: 1.0.0, image: r/a, timeouts: {apply: forever}}\n");
      },
      {"spec.packages.a.timeouts.apply", "\"forever\"", "10m"});
  expect_error(
      [] {
        set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a, env: {GPUFLEET_X: a}}\n");
      },
      {"GPUFLEET_ is reserved"});
  expect_error(
      [] {
        set_from_yaml(
            "  packages:\n    a: {version: 1.0.0, image: r/a, downgrade: uninstallFirst}\n");
      },
      {"uninstall.supported"});
  expect_error(
      [] {
        set_from_yaml("  packages:\n    a: {version: 1.0.0, image: r/a, configMap: {../x: a}}\n");
      },
      {"not a file name"});
  expect_error([] { set_from_yaml("  packages: {}\n"); }, {"spec.packages", "at least one"});
  expect_error(
      [] {
        set_from_yaml(
            "  sequencing: sometimes\n  packages:\n    a: {version: 1.0.0, image: r/a}\n");
      },
      {"spec.sequencing", "node or all"});
  expect_error(
      [] {
        set_from_yaml(
            "  autoTaintNewNodes: true\n  packages:\n    a: {version: 1.0.0, image: r/a}\n");
      },
      {"runtimeRequired"});
  expect_error(
      [] { set_from_yaml("  priority: -1\n  packages:\n    a: {version: 1.0.0, image: r/a}\n"); },
      {"spec.priority", "out of range"});
  expect_error(
      [] {
        set_from_yaml(
            "  nodeSelector: {matchExpressions: [{key: a, operator: Near, values: [x]}]}\n  "
            "packages:\n    a: {version: 1.0.0, image: r/a}\n");
      },
      {"spec.nodeSelector.matchExpressions[0].operator", "\"Near\"", "NotIn"});
  expect_error(
      [] {
        parse_host_package_set(core::parse_yaml(
            "apiVersion: v1\nkind: HostPackageSet\nmetadata: {name: a}\nspec: {}\n"));
      },
      {"apiVersion", "gpufleet.io/v1alpha1"});
}

TEST(Spec, InterruptsCoalesce) {
  Interrupt none, reboot{InterruptKind::Reboot, {}}, all{InterruptKind::RestartAllServices, {}};
  Interrupt a{InterruptKind::RestartServices, {"a"}}, b{InterruptKind::RestartServices, {"b", "c"}};
  EXPECT_EQ(coalesce(a, b).services, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(coalesce(a, reboot), reboot);
  EXPECT_EQ(coalesce(all, a), all);
  EXPECT_EQ(coalesce(none, a), a);
  EXPECT_EQ(coalesce(none, none), none);
}

TEST(Selector, ExpressionsAndString) {
  LabelSelector s = LabelSelector::parse(core::parse_yaml(R"(
matchLabels: {zone: a}
matchExpressions:
  - {key: rack, operator: In, values: [r2, r1]}
  - {key: bad, operator: DoesNotExist}
  - {key: gpu, operator: Exists}
  - {key: tier, operator: NotIn, values: [canary]}
)"),
                                         "sel");
  EXPECT_TRUE(s.matches({{"zone", "a"}, {"rack", "r1"}, {"gpu", "x"}}));
  EXPECT_TRUE(s.matches({{"zone", "a"}, {"rack", "r2"}, {"gpu", "x"}, {"tier", "prod"}}));
  EXPECT_FALSE(s.matches({{"zone", "a"}, {"rack", "r3"}, {"gpu", "x"}}));
  EXPECT_FALSE(s.matches({{"zone", "a"}, {"rack", "r1"}, {"gpu", "x"}, {"bad", ""}}));
  EXPECT_FALSE(s.matches({{"zone", "a"}, {"rack", "r1"}}));
  EXPECT_FALSE(s.matches({{"zone", "a"}, {"rack", "r1"}, {"gpu", "x"}, {"tier", "canary"}}));
  EXPECT_EQ(s.to_string(), "zone=a,rack in (r1,r2),!bad,gpu,tier notin (canary)");
  EXPECT_TRUE(LabelSelector().matches({}));
  expect_error([] { LabelSelector::parse(core::parse_yaml("matchLabels: {a: 1}"), "sel"); },
               {"sel.matchLabels.a", "as a string"});
  expect_error(
      [] {
        LabelSelector::parse(core::parse_yaml("matchExpressions: [{key: a, operator: In}]"), "sel");
      },
      {"needs at least one value"});
}

TEST(Policy, ParsesAndValidates) {
  DeploymentPolicy p = policy_from_yaml(R"(
  default: {budget: {percent: 10}, strategy: {exponential: {initialBatch: 2, growthFactor: 3, batchThreshold: 90, failureThreshold: 2, safetyLimit: 20}}}
  compartments:
    - name: canary
      selector: {matchLabels: {tier: canary}}
      budget: {count: 1}
      strategy: {fixed: {initialBatch: 1}}
    - name: racks
      selector: {matchExpressions: [{key: rack, operator: Exists}]}
      budget: {count: 8}
      strategy: {linear: {initialBatch: 2, step: 3}}
)");
  EXPECT_EQ(p.fallback.strategy.kind, StrategyKind::Exponential);
  EXPECT_EQ(p.fallback.strategy.batch_size(0), 2);
  EXPECT_EQ(p.fallback.strategy.batch_size(2), 18);
  EXPECT_EQ(p.fallback.budget.resolve(55), 5);
  EXPECT_EQ(p.fallback.budget.resolve(3), 1);  // never 0 for a non-empty compartment
  ASSERT_EQ(p.compartments.size(), 2u);
  EXPECT_EQ(p.compartments[1].strategy.batch_size(0), 2);
  EXPECT_EQ(p.compartments[1].strategy.batch_size(3), 11);
  EXPECT_EQ(p.compartments[0].strategy.batch_size(7), 1);
  expect_error(
      [] {
        policy_from_yaml("  default: {budget: {count: 1, percent: 2}, strategy: {fixed: {}}}\n");
      },
      {"spec.default.budget", "exactly one of count or percent"});
  expect_error(
      [] { policy_from_yaml("  default: {budget: {percent: 120}, strategy: {fixed: {}}}\n"); },
      {"spec.default.budget.percent", "out of range"});
  expect_error(
      [] {
        policy_from_yaml("  default: {budget: {count: 1}, strategy: {fixed: {}, linear: {}}}\n");
      },
      {"exactly one of fixed, linear or exponential"});
  expect_error(
      [] { policy_from_yaml("  default: {budget: {count: 1}, strategy: {fixed: {step: 2}}}\n"); },
      {"spec.default.strategy.fixed.step", "unknown field"});
  expect_error(
      [] {
        policy_from_yaml(
            "  default: {budget: {count: 1}, strategy: {exponential: {growthFactor: 1}}}\n");
      },
      {"growthFactor", "out of range"});
  expect_error(
      [] {
        policy_from_yaml(
            "  default: {budget: {count: 1}, strategy: {fixed: {}}}\n  compartments: [{name: a, "
            "selector: {matchLabels: {x: y}}, budget: {count: 1}, strategy: {fixed: {}}}, {name: "
            "a, selector: {matchLabels: {x: z}}, budget: {count: 1}, strategy: {fixed: {}}}]\n");
      },
      {"spec.compartments[1].name", "used twice"});
  expect_error(
      [] {
        policy_from_yaml(
            "  default: {budget: {count: 1}, strategy: {fixed: {}}}\n  compartments: [{name: a, "
            "selector: {}, budget: {count: 1}, strategy: {fixed: {}}}]\n");
      },
      {"spec.compartments[0].selector", "every node"});
  expect_error([] { policy_from_yaml("  compartments: []\n"); }, {"spec.default", "required"});
}

TEST(Policy, ClusterBudget) {
  ClusterBudget b = parse_cluster_budget(
      core::parse_yaml(
          "{topologyKey: rack, maxUnavailablePerDomain: 2, maxUnavailable: {count: 7}}"),
      "budget");
  EXPECT_EQ(b.topology_key, "rack");
  EXPECT_EQ(b.max_per_domain, 2);
  EXPECT_EQ(b.max_total.resolve(1000), 7);
  expect_error(
      [] { parse_cluster_budget(core::parse_yaml("{maxUnavailablePerDomain: 0}"), "budget"); },
      {"budget.maxUnavailablePerDomain", "out of range"});
}

}  // namespace
}  // namespace gpufleet::hostpkg
