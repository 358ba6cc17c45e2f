// `gpufleet validate -r recipe.yaml [--snapshot FILE] [--phase P,...]`: the recipe's checks
// against a cluster snapshot, recorded now from the live cluster unless --snapshot is given.
// Phases: readiness, deployment, conformance, performance (a certify Certification per node
// pool, waited for). Reports as a table, JSON or CTRF. Exit 4 when a check fails.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>

#include "cli/command.h"
#include "cli/snapshot_cluster_flags.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/time.h"
#include "recipe/inputs.h"
#include "recipe/live/live_cluster.h"
#include "recipe/live/performance_run.h"
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

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct ValidateFlags {
  std::string recipe_file;
  std::string snapshot_file;
  std::string output;
  std::vector<std::string> phases;
  std::string config_file;
  recipe::LiveClusterOptions cluster;
  int level = -1;                       // --level: health of that level's components only
  std::vector<std::string> components;  // --components: health of those components only
  std::string performance_timeout;      // --performance-timeout (Go duration)
  std::string performance_namespace;    // --performance-namespace
};

// The performance phase's flags; they make sense only with it.
recipe::PerformanceOptions performance_options(const ValidateFlags& f, const recipe::Recipe& r,
                                               bool performance) {
  recipe::PerformanceOptions o;
  if (!performance && (!f.performance_timeout.empty() || !f.performance_namespace.empty())) {
    throw core::InvalidInput(
        std::string(f.performance_timeout.empty() ? "--performance-namespace"
                                                  : "--performance-timeout") +
        " applies to --phase performance only; add --phase performance or drop the flag");
  }
  if (!f.performance_timeout.empty()) {
    auto d = core::try_parse_duration(f.performance_timeout);
    if (!d || *d < std::chrono::seconds(1) || *d > std::chrono::hours(24)) {
      throw core::InvalidInput("--performance-timeout '" + f.performance_timeout +
                               "' is not a duration from 1s to 24h; give a Go duration such as "
                               "30m or 1h30m");
    }
    o.timeout = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  // The Certification lives where gpufleet runs (its certify controller's namespace).
  for (const recipe::Component& c : r.components) {
    if (c.name == "gpufleet" && !c.namespace_.empty()) o.namespace_ = c.namespace_;
  }
  if (!f.performance_namespace.empty()) o.namespace_ = f.performance_namespace;
  return o;
}

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

void run_validate(ValidateFlags f) {
  // A config file fills in what the flags leave out.
  if (!f.config_file.empty()) {
    recipe::RecipeConfig c = recipe::load_config(f.config_file);
    if (f.recipe_file.empty()) f.recipe_file = c.recipe;
    if (f.phases.empty()) f.phases = c.validate.phases;
    if (f.output.empty()) f.output = c.validate.output;
    bool live_flags = !f.cluster.kubeconfig.empty() || !f.cluster.context.empty();
    if (f.snapshot_file.empty() && !live_flags) {
      f.snapshot_file = c.snapshot;
      f.cluster.kubeconfig = c.validate.kubeconfig;
      f.cluster.context = c.validate.context;
    }
  }
  if (f.recipe_file.empty()) {
    throw core::InvalidInput(
        "no recipe: give -r RECIPE (a file written by `gpufleet recipe -o`), or --config FILE "
        "with spec.recipe");
  }
  if (f.output.empty()) f.output = "table";
  std::vector<recipe::Phase> phases;
  for (const std::string& p : f.phases) phases.push_back(recipe::parse_phase(p));
  recipe::Recipe r = recipe::recipe_from_yaml(read_input("-r", f.recipe_file), f.recipe_file);
  keep_gate_checks(r, f);
  bool performance =
      std::find(phases.begin(), phases.end(), recipe::Phase::Performance) != phases.end();
  recipe::PerformanceOptions perf = performance_options(f, r, performance);
  if (performance && !f.snapshot_file.empty()) {
    throw core::InvalidInput(
        "--phase performance measures NCCL bus bandwidth on the live cluster (a certify "
        "Certification); it cannot be judged from --snapshot: drop --snapshot and give "
        "--kubeconfig/--context");
  }
  const std::int64_t start = now_ms();
  recipe::Snapshot s =
      f.snapshot_file.empty()
          ? recipe::snapshot_from_live_cluster(f.cluster)
          : recipe::snapshot_from_text(read_input("--snapshot", f.snapshot_file), f.snapshot_file);
  recipe::PerformancePhase run_performance;
  if (performance) {
    run_performance = [&](recipe::ValidationReport& out) {
      recipe::run_performance_phase(out, r, s, f.cluster, perf, std::cerr);
    };
  }
  recipe::ValidationReport report = phases.empty()
                                        ? recipe::validate(r, s)
                                        : recipe::validate_phases(r, s, phases, run_performance);
  if (f.output == "json") {
    std::cout << core::to_json(recipe::report_to_value(report), core::JsonStyle::Pretty) << "\n";
  } else if (f.output == "ctrf") {
    std::cout << core::to_json(recipe::report_to_ctrf(report, GPUFLEET_VERSION, start, now_ms()),
                               core::JsonStyle::Pretty)
              << "\n";
  } else {
    std::cout << recipe::report_table(report);
  }
  if (!report.passed()) set_exit_code(kExitInvalid);
}

void setup_validate(CLI::App& root) {
  auto flags = std::make_shared<ValidateFlags>();
  auto* cmd = root.add_subcommand(
      "validate",
      "Check the live cluster (or a --snapshot) against a recipe. Phases (--phase, default:\n"
      "constraints and health checks): readiness (constraints: Kubernetes version, OS, kernel,\n"
      "driver, GPU model; version-aware), deployment (health checks, Helm releases at their\n"
      "pins, operator resources ready), conformance (DRA, gang scheduling, accelerator\n"
      "metrics, no hostPath GPU devices), performance (a certify Certification per node pool:\n"
      "NCCL bus bandwidth against the library's floors; names the faulty nodes). Exit 0 when\n"
      "all pass, 4 when one fails.");
  cmd->add_option("-r,--recipe", flags->recipe_file, "recipe file written by `gpufleet recipe`")
      ->check(CLI::ExistingFile);
  auto* snapshot =
      cmd->add_option("--snapshot", flags->snapshot_file,
                      "Snapshot document (YAML or JSON) of the cluster (default: the live cluster)")
          ->check(CLI::ExistingFile);
  add_cluster_flags(*cmd, flags->cluster, snapshot);
  cmd->add_option("--phase", flags->phases,
                  "readiness, deployment, performance or conformance; repeatable or "
                  "comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"readiness", "deployment", "performance", "conformance"}));
  cmd->add_option("-o,--output", flags->output, "table, json or ctrf (default: table)")
      ->check(CLI::IsMember({"table", "json", "ctrf"}));
  cmd->add_option("--config", flags->config_file,
                  "config file (kind RecipeConfig): spec.recipe, spec.snapshot and spec.validate "
                  "fill in what the flags do not give")
      ->check(CLI::ExistingFile);
  cmd->add_option("--performance-timeout", flags->performance_timeout,
                  "--phase performance: how long to wait for the Certifications (Go duration, "
                  "default 30m); they keep running after it, and validate run again waits for "
                  "them");
  cmd->add_option("--performance-namespace", flags->performance_namespace,
                  "--phase performance: namespace of the Certifications (default: the recipe's "
                  "gpufleet namespace, gpufleet-system)");
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
