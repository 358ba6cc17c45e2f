// The recipe's host driver pin as HostPackageSets (recipe/host_driver.h): which pools qualify,
// the object's fields, and the errors for bad flags and for recipes whose driver someone else
// installs.
#include "recipe/host_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "recipe/resolver.h"
#include "test_library.h"

namespace gpufleet::recipe {
namespace {

using ::testing::HasSubstr;

// Service, accelerator, OS, intent; any platform.
Recipe resolve_for(const std::string& service, const std::string& accelerator,
                   const std::string& os, const std::string& intent) {
  Query q;
  q.criteria = {service, accelerator, os, intent, std::string(kAny)};
  return resolve(testing::repo_library(), q);
}

std::string error_of(const Recipe& r, const DriverSetOptions& o) {
  try {
    driver_package_sets(r, o);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(HostDriver, OracleLinuxPoolRendersARebootingValidatedDriverSet) {
  Recipe r = resolve_for("oke", "h100", "oracle-linux", "training");
  ASSERT_FALSE(r.pools.empty());
  DriverSetOptions o;
  o.image = "registry.example/host/nvidia-driver";
  o.deployment_policy = "rack-safe";
  std::vector<core::Value> sets = driver_package_sets(r, o);
  ASSERT_EQ(sets.size(), r.pools.size());
  const core::Value& s = sets[0];
  EXPECT_EQ(s.get_string({"kind"}), "HostPackageSet");
  EXPECT_EQ(s.get_string({"metadata", "name"}), "gpu-driver-" + r.pools[0].name);
  EXPECT_EQ(s.get_string({"metadata", "annotations", "recipe.gpufleet.io/digest"}), r.digest);
  const core::Value* pkg = s.get({"spec", "packages", "nvidia-driver"});
  ASSERT_NE(pkg, nullptr);
  // The pin of the recipe (base overlay), whatever it is today.
  EXPECT_EQ(pkg->get_string({"version"}), r.pools[0].settings.get_string({"driver", "version"}));
  EXPECT_EQ(pkg->get_string({"image"}), "registry.example/host/nvidia-driver");
  EXPECT_EQ(pkg->get_string({"interrupt", "type"}), "reboot");
  EXPECT_EQ(s.get_string({"spec", "validation", "when"}), "Always");
  EXPECT_EQ(s.get({"spec", "validation", "categories"})->as_list().front().as_string(),
            "diagnostics/dcgm-r2");
  EXPECT_EQ(s.get_string({"spec", "deploymentPolicy"}), "rack-safe");
  EXPECT_EQ(
      s.get({"spec", "nodeSelector", "matchExpressions"})->as_list().front().get_string({"key"}),
      "nvidia.com/gpu.present");
}

TEST(HostDriver, OperatorOrCloudManagedDriversAreRefusedWithTheReason) {
  DriverSetOptions o;
  o.image = "registry.example/host/nvidia-driver";
  std::string e = error_of(resolve_for("eks", "h100", "ubuntu", "training"), o);
  EXPECT_THAT(e, HasSubstr("no node pool's host owns the GPU driver"));
  EXPECT_THAT(e, HasSubstr("(gpu-operator)"));
  EXPECT_THAT(error_of(resolve_for("gke", "h100", "cos", "training"), o), HasSubstr("(gke)"));
}

TEST(HostDriver, BadFlagsAndPinsAreNamed) {
  Recipe r = resolve_for("oke", "h100", "oracle-linux", "training");
  DriverSetOptions o;
  EXPECT_THAT(error_of(r, o), HasSubstr("--image: required"));
  o.image = "registry.example/driver:580";
  EXPECT_THAT(error_of(r, o), HasSubstr("without a tag or digest"));
  o.image = "registry.example:5000/driver";  // a registry port is not a tag
  EXPECT_NO_THROW(driver_package_sets(r, o));
  o.categories.clear();
  EXPECT_THAT(error_of(r, o), HasSubstr("--validate"));
  o.categories = {"diagnostics/dcgm-r2"};
  o.deployment_policy = "Rack_Safe";
  EXPECT_THAT(error_of(r, o), HasSubstr("--deployment-policy Rack_Safe"));
  o.deployment_policy.clear();
  r.pools[0].settings["driver"]["version"] = "580";
  EXPECT_THAT(error_of(r, o), HasSubstr(".driver.version \"580\""));
}

}  // namespace
}  // namespace gpufleet::recipe
