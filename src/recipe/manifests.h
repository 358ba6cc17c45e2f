// Components that are not Helm charts: raw manifests and kustomize directories kept in the
// library under manifests/. Resolution renders them to canonical multi-document YAML (raw
// files parsed and re-emitted; kustomize directories through `kubectl kustomize`), so that the
// recipe carries exactly what will be applied and its digest covers it; the bundle wraps the
// text into a local chart for every deployer (bundle/local_chart.cc).
#pragma once

#include <string>
#include <vector>

#include "recipe/library.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

// Renders `kind` (manifests | kustomize) from the library directory `path`. Every object must
// have apiVersion, kind and metadata.name. Throws core::InvalidInput naming the component, the
// file and the fix (malformed YAML, an object without kind, a failing kustomization), and
// std::runtime_error when the kustomize tool cannot be run.
ManifestSource render_manifests(const Library& lib, const std::string& component,
                                const std::string& kind, const std::string& path);

// The command that renders kustomize directories: $GPUFLEET_KUBECTL split on spaces (a
// kubectl, or kube-local's built-in one as "kube-local kubectl"), else "kubectl"; the
// arguments "kustomize DIR" are appended.
std::vector<std::string> kustomize_command();

}  // namespace gpufleet::recipe
