// `gpufleet recipe`: resolve criteria against the recipe library into a Recipe document;
// `gpufleet recipe list`: what the library offers; `gpufleet recipe query`: one value of a
// recipe. Criteria come from the cluster (--snapshot, --from-cluster), a criteria file
// (--criteria), a config file (--config) and the flags, in that order of precedence, flags
// last (see src/recipe/inputs.h). The logic lives in src/recipe.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "recipe/detect.h"
#include "recipe/inputs.h"
#include "recipe/library.h"
#include "recipe/live/live_cluster.h"
#include "recipe/query.h"
#include "recipe/recipe.h"
#include "recipe/resolver.h"
#include "recipe/snapshot.h"

namespace gpufleet::cli {
namespace {

struct RecipeFlags {
  recipe::CriteriaValues criteria = recipe::any_criteria();
  std::array<CLI::Option*, recipe::kDimensions> criteria_opts{};
  std::int64_t nodes = 0;
  CLI::Option* nodes_opt = nullptr;
  std::vector<std::string> pools;
  std::vector<std::string> mixins;
  CLI::Option* mixins_opt = nullptr;
  std::vector<std::string> external;
  std::vector<std::string> data_dirs;
  std::string output;
  std::string snapshot;
  bool from_cluster = false;
  recipe::LiveClusterOptions cluster;
  std::string criteria_file;
  std::string config_file;
  // recipe query
  std::string selector;
  std::string query_recipe_file;
};

void write_text(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  core::write_file_atomic(path, text);
}

recipe::CriteriaInput flag_input(const RecipeFlags& f) {
  recipe::CriteriaInput in;
  in.origin = "the flags";
  for (std::size_t d = 0; d < recipe::kDimensions; ++d) {
    if (f.criteria_opts[d]->count() == 0) continue;
    in.values[d] = f.criteria[d];
    in.where[d] = "--" + std::string(recipe::kDimensionNames[d]);
  }
  if (f.nodes_opt->count() > 0) in.nodes = f.nodes;
  if (!f.pools.empty()) {
    std::vector<recipe::PoolQuery> pools;
    for (const std::string& p : f.pools) pools.push_back(recipe::parse_pool_flag(p));
    in.pools = std::move(pools);
    in.pools_origin = "--pool";
  }
  if (f.mixins_opt->count() > 0) in.mixins = f.mixins;
  for (const std::string& e : f.external) in.external[e] = "named external with --external";
  return in;
}

// Resolves the recipe the flags, files and cluster describe. Detection notes go to stderr so
// that the recipe on stdout stays a clean document.
recipe::Recipe build_recipe(const RecipeFlags& f, const recipe::RecipeConfig& config) {
  const std::vector<std::string>& data = f.data_dirs.empty() ? config.data : f.data_dirs;
  recipe::Library lib = recipe::load_library_with(data);

  recipe::CriteriaInput in;
  in.origin = "the criteria";
  std::optional<recipe::Snapshot> snapshot;
  std::string snapshot_origin;
  if (f.from_cluster) {
    snapshot = recipe::snapshot_from_live_cluster(f.cluster);
    snapshot_origin = "the cluster";
  } else if (const std::string& path = f.snapshot.empty() ? config.snapshot : f.snapshot;
             !path.empty()) {
    std::string text;
    try {
      text = core::read_file(path);
    } catch (const core::InvalidInput& e) {
      throw core::InvalidInput("--snapshot: " + std::string(e.what()));
    }
    snapshot = recipe::snapshot_from_text(text, path);
    snapshot_origin = "--snapshot " + path;
  }
  if (snapshot) {
    recipe::DetectedCriteria d = recipe::detect_criteria(lib, *snapshot);
    for (const std::string& note : d.notes) std::cerr << "detected " << note << "\n";
    recipe::layer_criteria(in, recipe::input_from_detected(d, snapshot_origin));
  }
  if (!f.config_file.empty()) recipe::layer_criteria(in, config.criteria);
  if (!f.criteria_file.empty())
    recipe::layer_criteria(in, recipe::load_criteria_file(f.criteria_file));
  recipe::layer_criteria(in, flag_input(f));
  recipe::check_criteria_values(lib, in);
  recipe::Query q = recipe::query_from_input(in);
  recipe::Recipe r = recipe::resolve(lib, q);
  if (snapshot) {
    // Components the cluster already runs (installed by someone else) are marked external;
    // the second resolution records them in the criteria and so in the digest.
    std::map<std::string, std::string> running = recipe::running_components(r, *snapshot);
    std::size_t before = q.external.size();
    for (const auto& [name, why] : running) {
      q.external.emplace(name, why);
      std::cerr << "detected external " << name << ": " << why << "\n";
    }
    if (q.external.size() != before) r = recipe::resolve(lib, q);
  }
  return r;
}

void run_recipe(const RecipeFlags& f) {
  recipe::RecipeConfig config;
  if (!f.config_file.empty()) config = recipe::load_config(f.config_file);
  recipe::Recipe r = build_recipe(f, config);
  write_text(recipe::recipe_to_yaml(r), f.output.empty() ? config.recipe : f.output);
}

void run_query(const RecipeFlags& f) {
  recipe::Recipe r;
  if (!f.query_recipe_file.empty()) {
    std::string text;
    try {
      text = core::read_file(f.query_recipe_file);
    } catch (const core::InvalidInput& e) {
      throw core::InvalidInput("-r: " + std::string(e.what()));
    }
    r = recipe::recipe_from_yaml(text, f.query_recipe_file);
  } else {
    recipe::RecipeConfig config;
    if (!f.config_file.empty()) config = recipe::load_config(f.config_file);
    r = build_recipe(f, config);
  }
  std::cout << recipe::query_result_text(recipe::query_recipe(r, f.selector));
}

void run_list(const std::vector<std::string>& data_dirs) {
  recipe::Library lib = recipe::load_library_with(data_dirs);
  std::string out;
  for (std::size_t d = 0; d < recipe::kDimensions; ++d) {
    out += std::string(recipe::kDimensionNames[d]) + ":";
    for (const std::string& v : lib.valid[d]) out += " " + v;
    out += "\n";
  }
  out += "mixins:";
  for (const auto& [name, _] : lib.mixins) out += " " + name;
  out += "\nunsupported:\n";
  for (const recipe::Unsupported& u : lib.unsupported) {
    out += " ";
    for (const auto& [dim, vals] : u.when) {
      out += " " + dim + "=";
      for (std::size_t i = 0; i < vals.size(); ++i) out += (i ? "," : "") + vals[i];
    }
    out += ": " + u.reason + "\n";
  }
  out += "components:\n";
  for (const auto& e : lib.components.as_map()) {
    // A manifests component names its kind and library directory instead of a repository.
    const bool local = e.value.find("manifests") != nullptr;
    const char* block = local ? "manifests" : "chart";
    out += "  " + e.key + " " + std::string(e.value.get_string({block, "version"})) + " (" +
           (local ? std::string(e.value.get_string({"manifests", "kind"})) + " " +
                        std::string(e.value.get_string({"manifests", "path"}))
                  : std::string(e.value.get_string({"chart", "repository"}))) +
           ")\n";
  }
  std::cout << out;
}

void setup_recipe(CLI::App& root) {
  auto flags = std::make_shared<RecipeFlags>();
  auto* cmd = root.add_subcommand(
      "recipe",
      "Resolve a version-pinned software recipe for a GPU cluster from the recipe library.\n"
      "Each criterion defaults to 'any', which selects only generic overlays. Criteria can be\n"
      "detected from a cluster (--snapshot, --from-cluster) or read from a file (--criteria,\n"
      "--config); flags win over files, files over the cluster.");
  const char* dims_help[] = {"Kubernetes service: eks, gke, aks, oke, kind (self-managed)",
                             "GPU: h100, h200, b200, gb200 (use --pool for mixed clusters)",
                             "node OS: ubuntu, rhel, cos", "intent: training, inference",
                             "platform: dynamo, kubeflow, nim, slurm"};
  for (std::size_t d = 0; d < recipe::kDimensions; ++d) {
    flags->criteria_opts[d] = cmd->add_option("--" + std::string(recipe::kDimensionNames[d]),
                                              flags->criteria[d], dims_help[d]);
  }
  flags->nodes_opt = cmd->add_option("--nodes", flags->nodes,
                                     "GPU node count (selects overlays with a nodeCount criterion)")
                         ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}));
  cmd->add_option(
      "--pool", flags->pools,
      "node pool NAME=ACCELERATOR[:NODES], repeatable, for clusters with several pools");
  flags->mixins_opt =
      cmd->add_option("--mixin", flags->mixins, "opt-in library fragment to apply, repeatable");
  cmd->add_option("--external", flags->external,
                  "component someone else installs and runs (not installed by bundles), "
                  "repeatable");
  cmd->add_option("--data", flags->data_dirs,
                  "directory whose library files add to or replace the built-in ones, repeatable");
  cmd->add_option("-o,--output", flags->output, "write the recipe here (default: standard output)");
  auto* snapshot =
      cmd->add_option("--snapshot", flags->snapshot,
                      "detect criteria, node pools and external components from this Snapshot "
                      "(gpufleet snapshot)")
          ->check(CLI::ExistingFile);
  auto* from_cluster =
      cmd->add_flag("--from-cluster", flags->from_cluster,
                    "detect criteria, node pools and external components from the live cluster");
  from_cluster->excludes(snapshot);
  auto* kubeconfig = cmd->add_option(
      "--kubeconfig", flags->cluster.kubeconfig,
      "with --from-cluster: kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)");
  auto* context = cmd->add_option("--context", flags->cluster.context,
                                  "with --from-cluster: kubeconfig context");
  kubeconfig->needs(from_cluster);
  context->needs(from_cluster);
  cmd->add_option("--criteria", flags->criteria_file, "criteria file (kind Criteria)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--config", flags->config_file,
                  "config file (kind RecipeConfig) that also drives bundle and validate")
      ->check(CLI::ExistingFile);
  auto* list =
      cmd->add_subcommand("list", "List criteria values, mixins and components of the library");
  list->fallthrough();  // `recipe list --data DIR` reads the parent's --data
  list->callback([flags] { run_list(flags->data_dirs); });
  auto* query = cmd->add_subcommand(
      "query",
      "Print one value of the recipe the criteria resolve to (or of -r FILE), e.g.\n"
      "--selector components.gpu-operator.values.driver.version");
  query->fallthrough();  // the parent's criteria flags
  query
      ->add_option("--selector", flags->selector,
                   "dotted path: components.NAME.chart.version, nodePools.NAME.settings, ...")
      ->required();
  query
      ->add_option("-r,--recipe", flags->query_recipe_file,
                   "query this recipe file instead of resolving one")
      ->check(CLI::ExistingFile);
  query->callback([flags] { run_query(*flags); });
  cmd->require_subcommand(0, 1);
  cmd->callback([flags, list, query] {
    if (list->parsed() || query->parsed()) return;
    run_recipe(*flags);
  });
}

const CommandRegistration kRecipe(setup_recipe);

}  // namespace
}  // namespace gpufleet::cli
