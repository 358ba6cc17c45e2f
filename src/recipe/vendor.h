// Air-gapped bundles. --vendor-charts: every chart the recipe installs from a repository is
// pulled once, at bundle time, with helm (which speaks Helm repositories and OCI registries,
// with their auth and TLS options), and travels in the bundle under vendor/ with a provenance
// record (source, version, sha256); the install scripts then install from the archive and
// reach no repository. --images: every container image the bundle would run, from `helm
// template` of each chart with the values the bundle installs, and the images operators create
// at run time (operator_images.h), for mirroring. --charts-from: the archives of a bundle
// written with --vendor-charts, so that a bundle (and its images.txt) can be made again where
// there is no network.
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

// The archives of the bundle in `dir` (written with --vendor-charts), for the components of
// `recipe` whose chart comes from a repository: read from dir/vendor/ as its provenance.yaml
// lists them, each checked against the SHA-256 recorded there and the chart and version the
// recipe pins. Throws core::InvalidInput naming `flag`, the file and the fix.
std::vector<VendoredChart> charts_from_bundle(const Recipe& recipe, const std::string& dir,
                                              std::string_view flag = "--charts-from");

// The node OS tags of the GPU Operator's driver images (operator_images.h): `given`
// (--node-os, e.g. "ubuntu22.04") when not empty, else what the recipe's node.os and
// node.osVersion constraints enumerate, cluster-wide and per pool. Throws InvalidInput for a
// malformed --node-os.
NodeOsTags node_os_tags(const Recipe& recipe, const std::vector<std::string>& given);

struct BundleImages {
  std::set<std::string> images;
  std::vector<std::string> notes;  // images left to an operator's default, and why
};

// Every image the bundle would run: `helm template` of each installable component's chart
// (from the bundle when it carries it, else its repository) with the values the bundle
// installs (`options`'s overrides applied), and the operator images each component declares,
// resolved from the chart's default values (`helm show values`) merged with the bundle's.
// Charts from repositories are fetched by helm; a bundle whose charts all travel in it needs
// no network.
BundleImages bundle_images(const Recipe& recipe, const Bundle& bundle, const BundleOptions& options,
                           const HelmToolOptions& helm,
                           const std::vector<std::string>& node_os = {});

// images.txt: the notes as `# ` comment lines first, then one image per line, sorted.
std::string images_text(const BundleImages& images);

}  // namespace gpufleet::recipe
