// `gpufleet snapshot`: a Snapshot document of the live cluster (--kubeconfig/--context), or
// from kubectl dumps (--from-dir DIR).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "cli/snapshot_cluster_flags.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "recipe/live/live_cluster.h"
#include "recipe/snapshot.h"

namespace gpufleet::cli {
namespace {

struct SnapshotFlags {
  std::string from_dir;
  std::string output;
  recipe::LiveClusterOptions cluster;
};

void run_snapshot(const SnapshotFlags& f) {
  recipe::Snapshot snapshot;
  if (f.from_dir.empty()) {
    snapshot = recipe::snapshot_from_live_cluster(f.cluster);
  } else {
    recipe::ClusterObjects objects = recipe::cluster_objects_from_dir(f.from_dir);
    try {
      snapshot = recipe::snapshot_from_objects(objects);
    } catch (const core::InvalidInput& e) {
      // Objects no longer know their file (a Helm record in helm-releases.json): name the dir.
      throw core::InvalidInput("--from-dir " + f.from_dir + ": " + e.what());
    }
  }
  std::string text = recipe::snapshot_to_yaml(snapshot);
  if (f.output.empty() || f.output == "-") {
    std::cout << text;
    return;
  }
  core::write_file_atomic(f.output, text);
}

void setup_snapshot(CLI::App& root) {
  auto flags = std::make_shared<SnapshotFlags>();
  auto* cmd = root.add_subcommand(
      "snapshot",
      "Record a cluster's facts as a Snapshot document: Kubernetes version; per node OS, kernel,\n"
      "runtime, GPU product/count/driver; Helm releases; workload and CRD states; failing pods.\n"
      "Reads the live cluster (--kubeconfig, --context) or kubectl dumps (--from-dir);\n"
      "see docs/recipe.md.");
  auto* from_dir =
      cmd->add_option("--from-dir", flags->from_dir,
                      "directory with version.json, nodes.json, helm-releases.json, crds.json, "
                      "deployments.json, daemonsets.json, statefulsets.json, pods.json")
          ->check(CLI::ExistingDirectory);
  cmd->add_option("-o,--output", flags->output,
                  "write the snapshot here (default: standard output)");
  add_cluster_flags(*cmd, flags->cluster, from_dir);
  cmd->callback([flags] { run_snapshot(*flags); });
}

const CommandRegistration kSnapshot(setup_snapshot);

}  // namespace
}  // namespace gpufleet::cli
