// Per-deployer renderers and the helpers they share. Internal to the recipe module.
#pragma once

#include <string>

#include "core/value.h"
#include "recipe/bundle.h"

namespace gpufleet::recipe::detail {

void render_helm(const Recipe& r, const BundleOptions& o, Bundle& out);
void render_argocd(const Recipe& r, const BundleOptions& o, Bundle& out);
void render_argocd_helm(const Recipe& r, const BundleOptions& o, Bundle& out);
void render_flux(const Recipe& r, const BundleOptions& o, Bundle& out);
void render_helmfile(const Recipe& r, const BundleOptions& o, Bundle& out);

// Local wrapper charts of manifest components: local-charts/<name>/ (Chart.yaml,
// files/manifests.yaml, templates/manifests.yaml). Not charts/: inside the argocd-helm chart
// that folder would make them subcharts. A vendored chart's path is its archive, vendor/...
std::string local_chart_dir(const Component& c);
void add_local_charts(const Recipe& r, Bundle& out);

// A DNS-1123 name for a chart repository, derived from its URL
// ("https://helm.ngc.nvidia.com/nvidia" -> "helm-ngc-nvidia-com-nvidia").
std::string repository_name(const std::string& url);
// The registry path of an oci:// repository without the scheme ("ghcr.io/kubeflow/charts").
std::string without_oci_scheme(const std::string& url);
// A comment line naming the recipe, for generated files.
std::string generated_by(const Recipe& r, std::string_view comment = "#");
// `leaf` under the repository folder `base` ("." or empty: the root).
std::string path_join(const std::string& base, const std::string& leaf);
// Single-quoted for POSIX shells.
std::string shell_quote(std::string_view s);

}  // namespace gpufleet::recipe::detail
