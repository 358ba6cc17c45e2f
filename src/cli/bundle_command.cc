// `gpufleet bundle`: render a recipe for a deployment tool into a directory, with value
// overrides on top, optionally signed.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/subprocess.h"
#include "recipe/bundle.h"
#include "recipe/inputs.h"
#include "recipe/overrides.h"
#include "recipe/recipe.h"
#include "recipe/sshsig.h"
#include "recipe/vendor.h"

namespace gpufleet::cli {
namespace {

struct BundleFlags {
  std::string recipe_file;
  std::string deployer;
  std::string output;
  std::vector<std::string> values_files, set, set_json, set_file;
  std::string sign_key;
  std::string system_node_selector, accelerated_node_selector, storage_class;
  std::vector<std::string> system_tolerations, accelerated_tolerations;
  recipe::BundleOptions options;
  std::string config_file;
  bool vendor_charts = false;
  bool images = false;
  recipe::HelmToolOptions helm;
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

// Helm's precedence: values files first, then --set-json, --set, --set-file; within one
// flag, the order given. Later wins.
std::vector<recipe::Override> collect_overrides(const BundleFlags& f) {
  std::vector<recipe::Override> out;
  for (const std::string& file : f.values_files) {
    std::string text;
    try {
      text = core::read_file(file);
    } catch (const std::exception& e) {
      throw core::InvalidInput("-f " + file + ": " + e.what());
    }
    for (recipe::Override& o : recipe::parse_overrides_file(text, file))
      out.push_back(std::move(o));
  }
  for (const std::string& s : f.set_json) out.push_back(recipe::parse_set_json(s));
  for (const std::string& s : f.set) out.push_back(recipe::parse_set(s));
  for (const std::string& s : f.set_file) out.push_back(recipe::parse_set_file(s));
  return out;
}

// `ssh-keygen -Y sign` writes checksums.txt.sig beside checksums.txt. ssh-keygen, not
// gpufleet, reads the private key: it handles passphrases, agents and hardware keys.
void sign_bundle(const std::string& dir, const std::string& key) {
  std::string checksums = (std::filesystem::path(dir) / "checksums.txt").string();
  std::vector<std::string> args = {
      "ssh-keygen", "-q", "-Y", "sign",
      "-f",         key,  "-n", std::string(recipe::kBundleSignatureNamespace),
      checksums};
  // At the terminal: ssh-keygen may ask for the key's passphrase.
  core::SubprocessOptions o;
  o.timeout = std::chrono::minutes(10);
  o.capture_stdout = false;
  o.stderr_to = core::StderrTo::Inherit;
  o.own_process_group = false;
  core::SubprocessResult r = core::run_subprocess(args, o);
  if (!r.started) {
    throw std::runtime_error("--sign-key: " + r.error +
                             "; install openssh-client, or sign later with: ssh-keygen -Y sign "
                             "-f KEY -n gpufleet-bundle " +
                             checksums);
  }
  if (!r.ok()) {
    throw std::runtime_error("--sign-key " + key +
                             ": ssh-keygen -Y sign failed (see its message above); the bundle "
                             "in " +
                             dir + " is written but not signed");
  }
}

void run_bundle(const BundleFlags& f) {
  recipe::Deployer deployer = recipe::parse_deployer(f.deployer);
  recipe::Recipe r = recipe::recipe_from_yaml(read_recipe(f.recipe_file), f.recipe_file);
  recipe::BundleOptions options = f.options;
  options.overrides = collect_overrides(f);
  recipe::SchedulingShortcuts& s = options.scheduling;
  if (!f.system_node_selector.empty())
    s.system_node_selector =
        recipe::parse_node_selector("--system-node-selector", f.system_node_selector);
  if (!f.accelerated_node_selector.empty())
    s.accelerated_node_selector =
        recipe::parse_node_selector("--accelerated-node-selector", f.accelerated_node_selector);
  auto tolerations = [](std::string_view flag, const std::vector<std::string>& given) {
    core::Value list = given.empty() ? core::Value() : core::Value::list();
    for (const std::string& t : given) list.push_back(recipe::parse_toleration(flag, t));
    return list;
  };
  s.system_tolerations = tolerations("--system-toleration", f.system_tolerations);
  s.accelerated_tolerations = tolerations("--accelerated-toleration", f.accelerated_tolerations);
  s.storage_class = f.storage_class;
  if (f.vendor_charts)
    options.vendored = recipe::fetch_charts(recipe::bundled_recipe(r, options), f.helm);
  recipe::Bundle bundle = recipe::render_bundle(r, deployer, options);
  std::size_t images = 0;
  if (f.images) {
    // For mirroring: one image per line, covered by the checksums like every other file.
    std::string text;
    for (const std::string& image : recipe::bundle_images(r, bundle, options, f.helm)) {
      text += image + "\n";
      ++images;
    }
    bundle["images.txt"] = {text, false};
    bundle["checksums.txt"] = {recipe::checksums_of(bundle), false};
  }
  recipe::write_bundle(bundle, f.output);
  if (!f.sign_key.empty()) sign_bundle(f.output, f.sign_key);
  std::cout << "wrote " << bundle.size() << " files for " << f.deployer << " to " << f.output;
  if (!options.overrides.empty()) std::cout << " with " << options.overrides.size() << " overrides";
  if (!options.vendored.empty())
    std::cout << ", " << options.vendored.size() << " charts vendored (vendor/provenance.yaml)";
  if (f.images) std::cout << ", " << images << " images listed in images.txt";
  if (f.sign_key.empty()) {
    std::cout << " (verify with: cd " << f.output << " && sha256sum -c checksums.txt)\n";
  } else {
    std::cout << ", signed (verify with: gpufleet verify " << f.output << " --key " << f.sign_key
              << ".pub)\n";
  }
}

void setup_bundle(CLI::App& root) {
  auto flags = std::make_shared<BundleFlags>();
  auto* cmd = root.add_subcommand(
      "bundle",
      "Render a recipe for a deployment tool: helm (scripts), argocd (app of apps), argocd-helm\n"
      "(Applications as a Helm chart), flux (HelmRepository/HelmRelease), helmfile.\n"
      "Bundles are byte-identical for the same recipe and overrides and carry recipe.yaml and\n"
      "checksums.txt (and overrides.yaml when values were overridden).");
  cmd->add_option("-r,--recipe", flags->recipe_file, "recipe file written by `gpufleet recipe`")
      ->check(CLI::ExistingFile);
  // Required, from the flags or from --config (checked when the command runs).
  cmd->add_option("--deployer", flags->deployer, "helm, argocd, argocd-helm, flux or helmfile");
  cmd->add_option("-o,--output", flags->output, "new or empty directory to write the bundle to");
  auto* config = cmd->add_option("--config", flags->config_file,
                                 "config file (kind RecipeConfig): spec.recipe and spec.bundle "
                                 "fill in what the flags do not give")
                     ->check(CLI::ExistingFile);

  cmd->add_option("-f,--values", flags->values_files,
                  "overrides file {COMPONENT: {enabled: BOOL, values: {...}}} (repeatable)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", flags->set,
                  "COMPONENT:PATH=VALUE, PATH like a.b[0].c (repeatable; COMPONENT:enabled=false\n"
                  "leaves a component out, its dependents treat it as installed)");
  cmd->add_option("--set-json", flags->set_json, "COMPONENT:PATH=JSON (repeatable)");
  cmd->add_option("--set-file", flags->set_file,
                  "COMPONENT:PATH=FILE: the file's text as the value (repeatable)");
  cmd->add_option("--system-node-selector", flags->system_node_selector,
                  "LABEL=VALUE[,...]: where operators and controllers run (value paths per "
                  "component\nfrom the registry's `scheduling`)");
  cmd->add_option("--system-toleration", flags->system_tolerations,
                  "KEY[=VALUE][:EFFECT] tolerated by operators and controllers (repeatable)");
  cmd->add_option("--accelerated-node-selector", flags->accelerated_node_selector,
                  "LABEL=VALUE[,...]: where GPU node agents run (default: the labels every node "
                  "pool's\nnodeSelector shares)");
  cmd->add_option("--accelerated-toleration", flags->accelerated_tolerations,
                  "KEY[=VALUE][:EFFECT] tolerated by GPU node agents (repeatable)");
  cmd->add_option("--storage-class", flags->storage_class, "StorageClass of persistent volumes");
  cmd->add_flag("--vendor-charts", flags->vendor_charts,
                "pull every chart from its repository into the bundle (vendor/, with "
                "provenance); the scripts install from there (helm, helmfile deployers)");
  cmd->add_flag("--images", flags->images,
                "list every container image the bundle runs in images.txt (helm template with "
                "the bundle's values), for mirroring");
  cmd->add_option("--helm", flags->helm.helm, "helm binary for --vendor-charts and --images")
      ->capture_default_str();
  cmd->add_option("--chart-ca-file", flags->helm.ca_file,
                  "CA certificate (PEM) of chart repositories, for --vendor-charts and --images");
  cmd->add_flag("--plain-http", flags->helm.plain_http,
                "reach OCI chart registries over plain HTTP (--vendor-charts, --images)");
  cmd->add_option("--sign-key", flags->sign_key,
                  "sign checksums.txt with this SSH Ed25519 private key (ssh-keygen -Y sign);\n"
                  "writes checksums.txt.sig");
  cmd->add_option("--repo-url", flags->options.repo_url,
                  "argocd (and argocd-helm, flux when the bundle carries a chart): Git repository "
                  "the\nbundle is pushed to");
  cmd->add_option("--repo-path", flags->options.repo_path,
                  "argocd, argocd-helm, flux: bundle folder inside that repository")
      ->capture_default_str();
  cmd->add_option("--revision", flags->options.revision,
                  "argocd, argocd-helm, flux: Git revision (branch) to follow")
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
