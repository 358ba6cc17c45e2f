// `gpufleet hostpkg driver-set -r recipe.yaml --image REPO`: the HostPackageSets that roll the
// recipe's host driver pin out (recipe/host_driver.h), printed for `kubectl apply -f -` or a
// GitOps repository. Re-render after the recipe's pin moves; hostpkg rolls the change.
#include "cli/hostpkg_driver_set.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/yaml.h"
#include "recipe/host_driver.h"
#include "recipe/recipe.h"

namespace gpufleet::cli {
namespace {

struct DriverSetFlags {
  std::string recipe_file;
  std::string output = "yaml";
  recipe::DriverSetOptions options;
  std::vector<std::string> categories;
};

void run_driver_set(DriverSetFlags& f) {
  if (f.output != "yaml" && f.output != "json")
    throw core::InvalidInput("-o " + f.output + ": use yaml or json");
  if (!f.categories.empty()) f.options.categories = f.categories;
  std::string text;
  try {
    text = core::read_file(f.recipe_file);
  } catch (const core::InvalidInput& e) {
    throw core::InvalidInput(std::string("-r: ") + e.what());
  }
  recipe::Recipe r = recipe::recipe_from_yaml(text, f.recipe_file);
  std::vector<core::Value> sets = recipe::driver_package_sets(r, f.options);
  if (f.output == "json") {
    core::Value list = core::Value::map();
    list["apiVersion"] = "v1";
    list["kind"] = "List";
    list["items"] = core::Value::list();
    for (core::Value& s : sets) list["items"].push_back(std::move(s));
    std::cout << core::to_json(list, core::JsonStyle::Pretty) << "\n";
    return;
  }
  for (std::size_t i = 0; i < sets.size(); ++i) {
    if (i > 0) std::cout << "---\n";
    std::cout << core::to_yaml(sets[i]);
  }
}

}  // namespace

void add_hostpkg_driver_set(CLI::App& hostpkg) {
  auto flags = std::make_shared<DriverSetFlags>();
  auto* cmd = hostpkg.add_subcommand(
      "driver-set",
      "HostPackageSets that roll a recipe's host GPU driver pin out (pools whose host image "
      "owns the driver)");
  cmd->add_option("-r,--recipe", flags->recipe_file, "recipe document (gpufleet recipe -o FILE)")
      ->required();
  cmd->add_option("--image", flags->options.image,
                  "repository of the site's driver package image; the tag is the pinned version")
      ->required();
  cmd->add_option("--validate", flags->categories,
                  "certify category each rebooted node must pass before its uncordon "
                  "(repeatable; default diagnostics/dcgm-r2)");
  cmd->add_option("--deployment-policy", flags->options.deployment_policy,
                  "DeploymentPolicy of the rollout (default: hostpkg's conservative policy)");
  cmd->add_option("--priority", flags->options.priority,
                  "set priority; lower runs first (default 20)");
  cmd->add_option("-o,--output", flags->output, "yaml | json");
  cmd->callback([flags] { run_driver_set(*flags); });
}

}  // namespace gpufleet::cli
