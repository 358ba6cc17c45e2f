// Bundles: a recipe rendered for the user's deployment tool. Every bundle carries the
// recipe (recipe.yaml) and a checksums file (checksums.txt, `sha256sum -c` format), and is
// byte-identical for the same recipe and options.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/overrides.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

enum class Deployer { Helm, ArgoCd, ArgoCdHelm, Flux, Helmfile };

// "helm", "argocd", "argocd-helm", "flux", "helmfile"; throws InvalidInput listing them.
Deployer parse_deployer(std::string_view name);
std::string_view deployer_name(Deployer d);
const std::vector<std::string_view>& deployer_names();

struct BundleFile {
  std::string content;
  bool executable = false;
};

// Relative path -> file; std::map keeps paths sorted for the checksums file.
using Bundle = std::map<std::string, BundleFile>;

// A chart archive the bundle carries (gpufleet bundle --vendor-charts, vendor.h).
struct VendoredChart {
  std::string component;
  std::string repository;  // where it was pulled from
  std::string chart;
  std::string version;
  std::string file;     // the archive's name, under vendor/ in the bundle
  std::string sha256;   // of content
  std::string content;  // the .tgz
};

struct BundleOptions {
  // Argo CD app-of-apps: the Git repository and path the bundle is pushed to.
  std::string repo_url;
  std::string repo_path = ".";
  std::string revision = "HEAD";
  std::string argocd_namespace = "argocd";
  std::string flux_namespace = "flux-system";
  // Value overrides (--set, -f, ...), applied in order on top of the recipe's values.
  std::vector<Override> overrides;
  // Scheduling shortcuts, written to the value paths the registry declares; applied before
  // `overrides` (an explicit --set wins) and recorded with them.
  SchedulingShortcuts scheduling;
  // Charts carried in the bundle (vendor/<file>) and installed from there, with
  // vendor/provenance.yaml; only the helm and helmfile deployers install from archives.
  std::vector<VendoredChart> vendored;
};

// The recipe a bundle installs: external components left out, the pools' node selectors, the
// scheduling shortcuts and the overrides applied (its digest names them all).
Recipe bundled_recipe(const Recipe& given, const BundleOptions& options);

// Renders the bundle, including recipe.yaml (the recipe as given) and checksums.txt. With
// overrides, the bundle renders apply_overrides(recipe), records them in overrides.yaml and
// names the combined digest in its generated files. Throws InvalidInput for options the
// deployer needs but lacks (argocd needs repo_url) and for bad overrides.
Bundle render_bundle(const Recipe& recipe, Deployer deployer, const BundleOptions& options);

// "<sha256>  <path>\n" for every file but checksums.txt, sorted by path.
std::string checksums_of(const Bundle& bundle);

// Writes the bundle under `dir`, which must not exist or be empty (so that no stale file
// of an older bundle stays behind). Scripts get mode 0755, other files 0644.
void write_bundle(const Bundle& bundle, const std::string& dir);

}  // namespace gpufleet::recipe
