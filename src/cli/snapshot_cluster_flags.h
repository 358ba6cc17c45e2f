// --kubeconfig/--context: where snapshot, validate and diff find the live cluster.
#pragma once

#include <CLI/CLI.hpp>

#include "recipe/live/live_cluster.h"

namespace gpufleet::cli {

// `file_input` (--snapshot, --from-dir) reads a file instead of the cluster, so CLI11 rejects
// it together with these flags.
inline void add_cluster_flags(CLI::App& cmd, recipe::LiveClusterOptions& o,
                              CLI::Option* file_input) {
  auto* kubeconfig = cmd.add_option(
      "--kubeconfig", o.kubeconfig,
      "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)");
  auto* context =
      cmd.add_option("--context", o.context, "kubeconfig context (default: current-context)");
  file_input->excludes(kubeconfig)->excludes(context);
}

}  // namespace gpufleet::cli
