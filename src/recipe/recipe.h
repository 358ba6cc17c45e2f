// The Recipe document (apiVersion gpufleet.io/v1alpha1, kind Recipe): what resolution
// produces, what `bundle` reads back, and what validate/diff compare a cluster with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "recipe/operator_images.h"

namespace gpufleet::recipe {

struct ChartSource {
  std::string repository;  // https://... Helm repository, oci://registry/path, "builtin", or
                           // empty: a wrapper chart rendered from Component::manifests
  std::string name;
  std::string version;  // exact pin
  // Set only while bundling with --vendor-charts: the archive's path in the bundle
  // ("vendor/<chart>-<version>.tgz"); the chart is then installed from it.
  std::string vendored;
  bool is_oci() const { return repository.rfind("oci://", 0) == 0; }
  // A wrapper chart the bundle carries (local-charts/<name>/), rendered from Component::manifests.
  bool is_local() const { return repository.empty(); }
  // A chart built into gpufleet (deploy/chart/<name>); bundles carry it (builtin_charts.h).
  bool is_builtin() const { return repository == "builtin"; }
  bool is_vendored() const { return !vendored.empty(); }
  // In each case the chart travels in the bundle: local-charts/<name>/, or vendor/ (an archive).
  bool in_bundle() const { return is_local() || is_builtin() || is_vendored(); }
};

// Raw manifests or a kustomize directory of the library, rendered at resolution: every
// deployer installs them as a local wrapper chart (see docs/recipe.md "Manifests and
// kustomize components"); the rendered text is part of the recipe and of its digest.
struct ManifestSource {
  std::string kind;     // manifests | kustomize
  std::string path;     // library directory ("manifests/gke-nccl-tcpxo")
  std::string content;  // rendered objects, canonical multi-document YAML
  std::string sha256;   // of content
};

struct Component {
  std::string name;
  std::string description;
  ChartSource chart;
  std::string namespace_;
  core::Value values = core::Value::map();
  std::vector<std::string> dependencies;    // sorted
  int level = 0;                            // deployment level; same level = parallel
  std::optional<ManifestSource> manifests;  // set exactly when chart.is_local()
  // Installed and run by someone else (found in the cluster by `recipe --snapshot`, or named
  // in the criteria): dependents still order after it, but bundles do not install it.
  bool external = false;
  std::string external_reason;  // what was found: "Helm release monitoring/prom (chart ...)"
  // Value paths the bundle-time scheduling shortcuts write to, from the registry:
  // {systemNodeSelector: [operator.nodeSelector, ...], systemTolerations, acceleratedNodeSelector,
  //  acceleratedTolerations, storageClass}; empty when the component declares none.
  core::Value scheduling = core::Value::map();
  // Images the component's operator creates at run time, as value paths (registry
  // `operatorImages`); `bundle --images` lists them (operator_images.h).
  std::vector<OperatorImage> operator_images;
};

struct Constraint {
  std::string name;
  std::string fact;                // kubernetes.version, node.kernel, gpu.driver, ...
  std::string requirement;         // ">= 1.32"
  std::string severity = "error";  // error: validate fails; warning: reported only
  std::string remediation;         // what to do when it fails; may be empty
};

struct HealthCheck {
  std::string component;
  std::string kind;  // CustomResourceDefinition, Deployment, DaemonSet, StatefulSet, Pods
  std::string namespace_;
  std::string name;  // empty for Pods
};

struct AppliedOverlay {
  std::string name;
  std::string path;                // relative library path ("overlays/eks.yaml", "mixins/efa.yaml")
  std::vector<std::string> pools;  // pools that selected it
};

// An NCCL bus-bandwidth floor for validate's performance phase (a certify category
// communication/<category>): `node` for a group of one node (its NVLink), `fabric` for groups
// that span nodes (the scale-out network). Either may be unset (that group size is not judged).
struct BandwidthFloor {
  std::string category;  // nccl-all-reduce, nccl-all-gather, nccl-reduce-scatter, nccl-alltoall
  std::optional<double> node_gbps;
  std::optional<double> fabric_gbps;
};

struct NodePool {
  std::string name;
  std::string accelerator;
  std::optional<std::int64_t> node_count;
  core::Value node_selector = core::Value::map();
  core::Value settings = core::Value::map();  // driver, mig, ... for this pool only
  std::vector<Constraint> constraints;
  std::vector<BandwidthFloor> performance;  // sorted by category; from nodePool.performance
  std::vector<std::string> overlays;        // overlays that shaped this pool, in merge order
};

struct Recipe {
  std::string name;
  core::Value criteria = core::Value::map();
  std::vector<AppliedOverlay> overlays;  // merge order, lowest precedence first
  std::vector<Component> components;     // deployment (topological) order
  std::vector<std::vector<std::string>> levels;
  std::vector<Constraint> constraints;  // cluster-wide
  std::vector<NodePool> pools;
  std::vector<HealthCheck> health;
  std::string digest;  // "sha256:<hex>" of the inputs (criteria and library files used)
};

core::Value recipe_to_value(const Recipe& r);
std::string recipe_to_yaml(const Recipe& r);

// Reads a Recipe document back (for `bundle`, `validate`). Checks the schema, exact pins,
// dependency references and that the stored order and levels agree with the graph.
Recipe recipe_from_value(const core::Value& doc, std::string_view source);
Recipe recipe_from_yaml(std::string_view text, std::string_view source);

}  // namespace gpufleet::recipe
