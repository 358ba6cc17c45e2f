// `gpufleet validate -r recipe.yaml [--snapshot FILE]`: constraints and health assertions of a
// recipe against a cluster snapshot, recorded now from the live cluster unless --snapshot is
// given. Exit 4 when a check fails.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "cli/snapshot_cluster_flags.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "recipe/live/live_cluster.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"
#include "recipe/validate.h"

namespace gpufleet::cli {
namespace {

std::string read_input(const std::string& flag, const std::string& path) {
  try {
    return core::read_file(path);
  } catch (const core::InvalidInput& e) {
    throw core::InvalidInput(flag + ": " + e.what());
  }
}

struct ValidateFlags {
  std::string recipe_file;
  std::string snapshot_file;
  std::string output = "table";
  recipe::LiveClusterOptions cluster;
};

void run_validate(const ValidateFlags& f) {
  recipe::Recipe r = recipe::recipe_from_yaml(read_input("-r", f.recipe_file), f.recipe_file);
  recipe::Snapshot s =
      f.snapshot_file.empty()
          ? recipe::snapshot_from_live_cluster(f.cluster)
          : recipe::snapshot_from_text(read_input("--snapshot", f.snapshot_file), f.snapshot_file);
  recipe::ValidationReport report = recipe::validate(r, s);
  if (f.output == "json") {
    std::cout << core::to_json(recipe::report_to_value(report), core::JsonStyle::Pretty) << "\n";
  } else {
    std::cout << recipe::report_table(report);
  }
  if (!report.passed()) set_exit_code(kExitInvalid);
}

void setup_validate(CLI::App& root) {
  auto flags = std::make_shared<ValidateFlags>();
  auto* cmd = root.add_subcommand(
      "validate",
      "Check the live cluster (or a --snapshot) against a recipe: constraints (Kubernetes version, "
      "OS, kernel,\n"
      "driver, GPU model; version-aware) and health (CRDs Established, Deployments available,\n"
      "DaemonSets fully ready, no container waiting in CrashLoopBackOff, ImagePullBackOff,\n"
      "ErrImagePull or CreateContainerConfigError). Exit 0 when all pass, 4 when one fails.");
  cmd->add_option("-r,--recipe", flags->recipe_file, "recipe file written by `gpufleet recipe`")
      ->required()
      ->check(CLI::ExistingFile);
  auto* snapshot =
      cmd->add_option("--snapshot", flags->snapshot_file,
                      "Snapshot document (YAML or JSON) of the cluster (default: the live cluster)")
          ->check(CLI::ExistingFile);
  add_cluster_flags(*cmd, flags->cluster, snapshot);
  cmd->add_option("-o,--output", flags->output, "table or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  cmd->callback([flags] { run_validate(*flags); });
}

const CommandRegistration kValidate(setup_validate);

}  // namespace
}  // namespace gpufleet::cli
