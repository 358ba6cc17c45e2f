// `gpufleet diff`: a recipe against the live cluster or a snapshot (missing, extra, wrong
// version, values drift), or one snapshot against another (the live cluster against a later
// one when --snapshot is not given). --fail-on-drift exits 3 on any difference.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "cli/snapshot_cluster_flags.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "recipe/drift.h"
#include "recipe/live/live_cluster.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"

namespace gpufleet::cli {
namespace {

std::string read_input(const std::string& flag, const std::string& path) {
  try {
    return core::read_file(path);
  } catch (const core::InvalidInput& e) {
    throw core::InvalidInput(flag + ": " + e.what());
  }
}

struct DiffFlags {
  std::string recipe_file;
  std::string snapshot_file;
  std::string against_file;
  std::string output = "table";
  bool fail_on_drift = false;
  recipe::LiveClusterOptions cluster;
};

void run_diff(const DiffFlags& f) {
  recipe::Snapshot s =
      f.snapshot_file.empty()
          ? recipe::snapshot_from_live_cluster(f.cluster)
          : recipe::snapshot_from_text(read_input("--snapshot", f.snapshot_file), f.snapshot_file);
  std::vector<recipe::Drift> drift;
  if (!f.recipe_file.empty()) {
    recipe::Recipe r = recipe::recipe_from_yaml(read_input("-r", f.recipe_file), f.recipe_file);
    drift = recipe::diff_recipe(r, s);
  } else {
    recipe::Snapshot after =
        recipe::snapshot_from_text(read_input("--against", f.against_file), f.against_file);
    drift = recipe::diff_snapshots(s, after);
  }
  if (f.output == "json") {
    std::cout << core::to_json(recipe::drift_to_value(drift), core::JsonStyle::Pretty) << "\n";
  } else {
    std::cout << recipe::drift_table(drift);
  }
  if (f.fail_on_drift && !drift.empty()) set_exit_code(kExitDrift);
}

void setup_diff(CLI::App& root) {
  auto flags = std::make_shared<DiffFlags>();
  auto* cmd = root.add_subcommand(
      "diff",
      "Compare a recipe with the live cluster or a --snapshot (missing, extra, wrong version, "
      "values drift),\n"
      "or a snapshot with a later one (--against). With --fail-on-drift, exit 3 on drift.");
  // Exactly one of: a recipe (recipe against snapshot) or a later snapshot.
  auto* compare = cmd->add_option_group("compare with", "give exactly one of -r or --against");
  compare->add_option("-r,--recipe", flags->recipe_file, "recipe file written by `gpufleet recipe`")
      ->check(CLI::ExistingFile);
  compare
      ->add_option("--against", flags->against_file, "a later Snapshot to compare --snapshot with")
      ->check(CLI::ExistingFile);
  compare->require_option(1);
  auto* snapshot = cmd->add_option("--snapshot", flags->snapshot_file,
                                   "Snapshot document of the cluster (the 'before' one with "
                                   "--against; default: the live cluster)")
                       ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", flags->output, "table or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  cmd->add_flag("--fail-on-drift", flags->fail_on_drift, "exit 3 when anything differs");
  add_cluster_flags(*cmd, flags->cluster, snapshot);
  cmd->callback([flags] { run_diff(*flags); });
}

const CommandRegistration kDiff(setup_diff);

}  // namespace
}  // namespace gpufleet::cli
