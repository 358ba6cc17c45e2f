// `gpufleet validate -r recipe.yaml [--snapshot FILE]`: constraints and health assertions of a
// recipe against a cluster snapshot, recorded now from the live cluster unless --snapshot is
// given. Exit 4 when a check fails.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <set>

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
  int level = -1;                       // --level: health of that level's components only
  std::vector<std::string> components;  // --components: health of those components only
};

// Readiness gate between deploy levels: only the health checks of the components just
// installed (constraints were checked before the first level).
void keep_gate_checks(recipe::Recipe& r, const ValidateFlags& f) {
  if (f.level < 0 && f.components.empty()) return;
  std::set<std::string> names(f.components.begin(), f.components.end());
  if (f.level >= 0) {
    if (static_cast<std::size_t>(f.level) >= r.levels.size()) {
      throw core::InvalidInput("--level " + std::to_string(f.level) + ": recipe " + r.name +
                               " has levels 0 to " + std::to_string(r.levels.size() - 1));
    }
    names.insert(r.levels[f.level].begin(), r.levels[f.level].end());
  }
  for (const std::string& n : f.components) {
    bool known = std::any_of(r.components.begin(), r.components.end(),
                             [&](const recipe::Component& c) { return c.name == n; });
    if (!known) {
      throw core::InvalidInput("--components: '" + n + "' is not a component of recipe " + r.name);
    }
  }
  r.constraints.clear();
  for (recipe::NodePool& p : r.pools) p.constraints.clear();
  std::erase_if(r.health, [&](const recipe::HealthCheck& h) { return !names.count(h.component); });
}

void run_validate(const ValidateFlags& f) {
  recipe::Recipe r = recipe::recipe_from_yaml(read_input("-r", f.recipe_file), f.recipe_file);
  keep_gate_checks(r, f);
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
  auto* level = cmd->add_option("--level", flags->level,
                                "readiness gate: only the health checks of this deployment "
                                "level's components")
                    ->check(CLI::NonNegativeNumber);
  cmd->add_option("--components", flags->components,
                  "readiness gate: only the health checks of these components (comma-separated)")
      ->delimiter(',')
      ->excludes(level);
  cmd->callback([flags] { run_validate(*flags); });
}

const CommandRegistration kValidate(setup_validate);

}  // namespace
}  // namespace gpufleet::cli
