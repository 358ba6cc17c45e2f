// `gpufleet recipe`: resolve criteria against the recipe library into a Recipe document;
// `gpufleet recipe list`: what the library offers. The logic lives in src/recipe.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "recipe/library.h"
#include "recipe/recipe.h"
#include "recipe/resolver.h"

namespace gpufleet::cli {
namespace {

struct RecipeFlags {
  recipe::CriteriaValues criteria = recipe::any_criteria();
  std::int64_t nodes = 0;
  std::vector<std::string> pools;
  std::vector<std::string> mixins;
  std::vector<std::string> data_dirs;
  std::string output;
};

void write_text(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  core::write_file_atomic(path, text);
}

void run_recipe(const RecipeFlags& f) {
  recipe::Library lib = recipe::load_library_with(f.data_dirs);
  recipe::Query q;
  q.criteria = f.criteria;
  if (f.nodes > 0) q.node_count = f.nodes;
  for (const std::string& p : f.pools) q.pools.push_back(recipe::parse_pool_flag(p));
  q.mixins = f.mixins;
  write_text(recipe::recipe_to_yaml(recipe::resolve(lib, q)), f.output);
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
      "Each criterion defaults to 'any', which selects only generic overlays.");
  const char* dims_help[] = {"Kubernetes service: eks, gke, aks, oke, kind (self-managed)",
                             "GPU: h100, h200, b200, gb200 (use --pool for mixed clusters)",
                             "node OS: ubuntu, rhel, cos", "intent: training, inference",
                             "platform: dynamo, kubeflow, nim, slurm"};
  for (std::size_t d = 0; d < recipe::kDimensions; ++d) {
    cmd->add_option("--" + std::string(recipe::kDimensionNames[d]), flags->criteria[d],
                    dims_help[d]);
  }
  cmd->add_option("--nodes", flags->nodes,
                  "GPU node count (selects overlays with a nodeCount criterion)")
      ->check(CLI::PositiveNumber);
  cmd->add_option(
      "--pool", flags->pools,
      "node pool NAME=ACCELERATOR[:NODES], repeatable, for clusters with several pools");
  cmd->add_option("--mixin", flags->mixins, "opt-in library fragment to apply, repeatable");
  cmd->add_option("--data", flags->data_dirs,
                  "directory whose library files add to or replace the built-in ones, repeatable");
  cmd->add_option("-o,--output", flags->output, "write the recipe here (default: standard output)");
  auto* list =
      cmd->add_subcommand("list", "List criteria values, mixins and components of the library");
  list->fallthrough();  // `recipe list --data DIR` reads the parent's --data
  list->callback([flags] { run_list(flags->data_dirs); });
  cmd->require_subcommand(0, 1);
  cmd->callback([flags, list] {
    if (list->parsed()) return;
    run_recipe(*flags);
  });
}

const CommandRegistration kRecipe(setup_recipe);

}  // namespace
}  // namespace gpufleet::cli
