// `gpufleet bundle`: render a recipe for a deployment tool into a directory (or push it to an
// OCI registry), with value overrides on top, optionally signed; `gpufleet bundle pull`
// fetches a pushed bundle back into a directory.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "cli/command.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/subprocess.h"
#include "core/text.h"
#include "recipe/bundle.h"
#include "recipe/bundle_archive.h"
#include "recipe/inputs.h"
#include "recipe/oci_client.h"
#include "recipe/overrides.h"
#include "recipe/recipe.h"
#include "recipe/sshsig.h"
#include "recipe/tool_process.h"
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
  std::string charts_from;
  bool images = false;
  std::vector<std::string> node_os;
  recipe::HelmToolOptions helm;
  recipe::OciOptions oci;  // -o oci://...
};

struct PullFlags {
  std::string reference;
  std::string dir;
  recipe::OciOptions oci;
};

// The options of the registry a bundle is pushed to or pulled from; separate from the chart
// repositories' --chart-ca-file and --plain-http (a site mirrors charts from one place and
// keeps bundles in another).
void add_registry_options(CLI::App* cmd, recipe::OciOptions& oci) {
  cmd->add_flag("--registry-plain-http", oci.plain_http,
                "reach the bundle's OCI registry over plain HTTP (no TLS)");
  cmd->add_option("--registry-ca-file", oci.ca_file,
                  "CA certificate (PEM) that signed the bundle registry's TLS certificate")
      ->check(CLI::ExistingFile);
  cmd->add_option("--registry-config", oci.registry_config,
                  "docker config.json with the registry's credentials (default: "
                  "$DOCKER_CONFIG/config.json,\nelse ~/.docker/config.json): credHelpers, "
                  "credsStore, auths")
      ->check(CLI::ExistingFile);
}

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
  // Checked before any work: a bad reference exits 2 without rendering or pulling charts.
  std::optional<recipe::OciReference> push;
  if (recipe::is_oci_reference(f.output)) push = recipe::parse_oci_reference(f.output, "-o", false);
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
  if (!f.charts_from.empty())
    options.vendored =
        recipe::charts_from_bundle(recipe::bundled_recipe(r, options), f.charts_from);
  recipe::Bundle bundle = recipe::render_bundle(r, deployer, options);
  std::size_t images = 0;
  if (f.images) {
    // For mirroring: one image per line, covered by the checksums like every other file; the
    // notes (images left to an operator's default) also go to standard error.
    const recipe::BundleImages found = recipe::bundle_images(r, bundle, options, f.helm, f.node_os);
    for (const std::string& note : found.notes)
      std::cerr << "gpufleet bundle: note: " << note << "\n";
    images = found.images.size();
    bundle["images.txt"] = {recipe::images_text(found), false};
    bundle["checksums.txt"] = {recipe::checksums_of(bundle), false};
  }
  // A push writes the bundle as usual into a private folder, signs it there, and pushes
  // that folder as one reproducible tar+gzip layer.
  std::optional<recipe::ToolTempDir> staging;
  std::string dir = f.output;
  if (push) {
    staging.emplace("gpufleet-push");
    dir = staging->path + "/bundle";
  }
  recipe::write_bundle(bundle, dir);
  if (!f.sign_key.empty()) {
    try {
      sign_bundle(dir, f.sign_key);
    } catch (const std::runtime_error& e) {
      if (!push) throw;
      bool missing = std::string_view(e.what()).find("cannot run") != std::string_view::npos;
      throw std::runtime_error("--sign-key " + f.sign_key + ": the bundle could not be signed (" +
                               (missing ? "cannot run ssh-keygen; install openssh-client"
                                        : "see ssh-keygen's message above") +
                               "); nothing was pushed");
    }
  }
  if (push) {
    std::string layer = recipe::pack_bundle_dir(dir);
    std::map<std::string, std::string> annotations = {{"io.gpufleet.bundle.deployer", f.deployer}};
    if (!r.digest.empty()) annotations["io.gpufleet.recipe.digest"] = r.digest;
    std::string digest = recipe::push_bundle(*push, layer, annotations, f.oci);
    std::cout << "Pushed " << push->text() << "@" << digest << " (" << bundle.size() << " files, "
              << layer.size() << " bytes";
    if (!f.sign_key.empty()) std::cout << ", signed";
    std::cout << "; fetch with: gpufleet bundle pull oci://" << push->registry << "/"
              << push->repository << "@" << digest << " DIR)\n";
    return;
  }
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

void run_pull(const PullFlags& f) {
  recipe::OciReference ref = recipe::parse_oci_reference(f.reference, "REFERENCE", true);
  std::error_code ec;
  if (std::filesystem::exists(f.dir, ec) &&
      (!std::filesystem::is_directory(f.dir, ec) || !std::filesystem::is_empty(f.dir, ec))) {
    // Checked again when unpacking; here it saves the download.
    throw core::InvalidInput("DIR " + core::quoted(f.dir) +
                             " exists and is not an empty directory; give a new or empty one");
  }
  recipe::PulledBundle pulled = recipe::pull_bundle(ref, f.oci);
  const std::string at =
      "oci://" + ref.registry + "/" + ref.repository + "@" + pulled.manifest_digest;
  std::size_t files = recipe::unpack_bundle_archive(pulled.layer, f.dir, at);
  std::cout << "pulled " << at << " into " << f.dir << ": " << files << " files";
  if (std::filesystem::exists(std::filesystem::path(f.dir) / "checksums.txt.sig")) {
    std::cout << ", signed (verify with: gpufleet verify " << f.dir << " --key KEY.pub)\n";
  } else {
    std::cout << ", not signed (check with: cd " << f.dir << " && sha256sum -c checksums.txt)\n";
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
  cmd->add_option("-o,--output", flags->output,
                  "new or empty directory to write the bundle to, or oci://HOST[:PORT]/REPO:TAG "
                  "to push\nit to an OCI registry (a reproducible tar+gzip layer)");
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
  auto* vendor = cmd->get_option("--vendor-charts");
  cmd->add_option("--charts-from", flags->charts_from,
                  "DIR: take the chart archives from the bundle in DIR (written with "
                  "--vendor-charts;\nchecked against its vendor/provenance.yaml) instead of "
                  "pulling them: no network")
      ->check(CLI::ExistingDirectory)
      ->excludes(vendor);
  cmd->add_flag("--images", flags->images,
                "list every container image the bundle runs in images.txt (helm template with "
                "the bundle's values,\nand the images operators create from the registry's "
                "operatorImages), for mirroring");
  cmd->add_option("--node-os", flags->node_os,
                  "OS tag of the GPU nodes for operator images tagged per OS (repeatable; "
                  "ubuntu22.04, rhel9.6;\ndefault: what the recipe's node.os and node.osVersion "
                  "constraints enumerate)")
      ->needs(cmd->get_option("--images"));
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
  add_registry_options(cmd, flags->oci);
  cmd->add_option("--registry-chunk-size", flags->oci.chunk_bytes,
                  "push blobs larger than this many bytes in chunks of that size (PATCH with "
                  "Content-Range;\ndefault 8388608); for registries or proxies that cap a "
                  "request's size")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 31)
                  .description("1024 to 2147483648 bytes"));

  auto pull_flags = std::make_shared<PullFlags>();
  auto* pull = cmd->add_subcommand(
      "pull",
      "Fetch a bundle pushed with -o oci://... into a new or empty directory: every digest\n"
      "checked, the archive unpacked refusing absolute paths, '..', links and devices.\n"
      "Then: gpufleet verify DIR --key KEY.pub");
  pull->add_option("reference", pull_flags->reference,
                   "oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:DIGEST")
      ->required();
  pull->add_option("dir", pull_flags->dir, "new or empty directory")->required();
  add_registry_options(pull, pull_flags->oci);
  pull->callback([pull_flags] { run_pull(*pull_flags); });

  cmd->callback([flags, cmd, config, pull] {
    if (pull->parsed()) return;
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
