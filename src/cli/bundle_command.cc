// `gpufleet bundle`: render a recipe for a deployment tool into a directory.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "recipe/bundle.h"
#include "recipe/inputs.h"
#include "recipe/recipe.h"

namespace gpufleet::cli {
namespace {

struct BundleFlags {
  std::string recipe_file;
  std::string deployer;
  std::string output;
  recipe::BundleOptions options;
  std::string config_file;
};

// A config file fills in what the flags leave out (flags win).
void apply_config(BundleFlags& f, const CLI::App& cmd) {
  recipe::RecipeConfig c = recipe::load_config(f.config_file);
  auto fill = [&](const char* flag, std::string& value, const std::string& from_file) {
    if (cmd.get_option(flag)->count() == 0 && !from_file.empty()) value = from_file;
  };
  fill("-r", f.recipe_file, c.recipe);
  fill("--deployer", f.deployer, c.bundle.deployer);
  fill("-o", f.output, c.bundle.output);
  fill("--repo-url", f.options.repo_url, c.bundle.repo_url);
  fill("--repo-path", f.options.repo_path, c.bundle.repo_path);
  fill("--revision", f.options.revision, c.bundle.revision);
  fill("--argocd-namespace", f.options.argocd_namespace, c.bundle.argocd_namespace);
  fill("--flux-namespace", f.options.flux_namespace, c.bundle.flux_namespace);
}

std::string read_recipe(const std::string& path) {
  try {
    return core::read_file(path);
  } catch (const core::InvalidInput& e) {
    throw core::InvalidInput(std::string("-r: ") + e.what() +
                             " (-r takes a recipe written by `gpufleet recipe -o`)");
  }
}

void run_bundle(const BundleFlags& f) {
  recipe::Deployer deployer = recipe::parse_deployer(f.deployer);
  recipe::Recipe r = recipe::recipe_from_yaml(read_recipe(f.recipe_file), f.recipe_file);
  recipe::Bundle bundle = recipe::render_bundle(r, deployer, f.options);
  recipe::write_bundle(bundle, f.output);
  std::cout << "wrote " << bundle.size() << " files for " << f.deployer << " to " << f.output
            << " (verify with: cd " << f.output << " && sha256sum -c checksums.txt)\n";
}

void setup_bundle(CLI::App& root) {
  auto flags = std::make_shared<BundleFlags>();
  auto* cmd = root.add_subcommand(
      "bundle",
      "Render a recipe for a deployment tool: helm (scripts), argocd (app of apps), argocd-helm\n"
      "(Applications as a Helm chart), flux (HelmRepository/HelmRelease), helmfile.\n"
      "Bundles are byte-identical for the same recipe and carry recipe.yaml and checksums.txt.");
  cmd->add_option("-r,--recipe", flags->recipe_file, "recipe file written by `gpufleet recipe`")
      ->check(CLI::ExistingFile);
  // Required, from the flags or from --config (checked when the command runs).
  cmd->add_option("--deployer", flags->deployer, "helm, argocd, argocd-helm, flux or helmfile");
  cmd->add_option("-o,--output", flags->output, "new or empty directory to write the bundle to");
  auto* config = cmd->add_option("--config", flags->config_file,
                                 "config file (kind RecipeConfig): spec.recipe and spec.bundle "
                                 "fill in what the flags do not give")
                     ->check(CLI::ExistingFile);

  cmd->add_option("--repo-url", flags->options.repo_url,
                  "argocd: Git repository the bundle is pushed to (the app of apps syncs from it)");
  cmd->add_option("--repo-path", flags->options.repo_path,
                  "argocd: bundle folder inside that repository")
      ->capture_default_str();
  cmd->add_option("--revision", flags->options.revision, "argocd: Git revision to follow")
      ->capture_default_str();
  cmd->add_option("--argocd-namespace", flags->options.argocd_namespace,
                  "argocd, argocd-helm: Argo CD's namespace")
      ->capture_default_str();
  cmd->add_option("--flux-namespace", flags->options.flux_namespace,
                  "flux: namespace of sources and releases")
      ->capture_default_str();
  cmd->callback([flags, cmd, config] {
    if (config->count() > 0) apply_config(*flags, *cmd);
    BundleFlags& f = *flags;
    if (f.recipe_file.empty() || f.deployer.empty() || f.output.empty()) {
      throw core::InvalidInput(
          "bundle needs -r RECIPE, --deployer and -o DIR, as flags or from --config FILE "
          "(spec.recipe, spec.bundle.deployer, spec.bundle.output)");
    }
    run_bundle(f);
  });
}

const CommandRegistration kBundle(setup_bundle);

}  // namespace
}  // namespace gpufleet::cli
