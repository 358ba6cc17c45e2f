// Air-gapped bundles. --vendor-charts: every chart the recipe installs from a repository is
// pulled once, at bundle time, with helm (which speaks Helm repositories and OCI registries,
// with their auth and TLS options), and travels in the bundle under vendor/ with a provenance
// record (source, version, sha256); the install scripts then install from the archive and
// reach no repository. --images: every container image the bundle would run, from `helm
// template` of each chart with the values the bundle installs, for mirroring.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "recipe/bundle.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

struct HelmToolOptions {
  std::string helm = "helm";  // the helm binary (PATH lookup)
  std::string ca_file;        // --ca-file for repositories with a private CA
  bool plain_http = false;    // --plain-http for OCI registries without TLS
  std::chrono::seconds timeout{300};
};

// The component whose chart comes from a repository, fetched. Builtin charts and manifest
// components already travel in every bundle and are not listed.
std::vector<VendoredChart> fetch_charts(const Recipe& recipe, const HelmToolOptions& options);

// The container images (containers, initContainers, ephemeralContainers of anything in the
// rendered objects: Pods, workloads, CronJobs, custom resources with pod templates) of a
// multi-document YAML stream, sorted and unique. Throws core::InvalidInput naming `where` when
// the text is not YAML.
std::set<std::string> images_in_manifests(const std::string& yaml, const std::string& where);

// Every image the bundle would run: `helm template` of each installable component's chart
// (from the bundle when it carries it, else its repository) with the values the bundle
// installs (`options`'s overrides applied). Charts from repositories are fetched by helm.
std::set<std::string> bundle_images(const Recipe& recipe, const Bundle& bundle,
                                    const BundleOptions& options, const HelmToolOptions& helm);

}  // namespace gpufleet::recipe
