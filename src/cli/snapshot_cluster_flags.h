// --kubeconfig/--context: where snapshot, validate and diff find the live cluster.
#pragma once

#include <CLI/CLI.hpp>

#include "recipe/live_cluster.h"

namespace gpufleet::cli {

inline void add_cluster_flags(CLI::App& cmd, recipe::LiveClusterOptions& o) {
  cmd.add_option("--kubeconfig", o.kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)");
  cmd.add_option("--context", o.context, "kubeconfig context (default: current-context)");
}

}  // namespace gpufleet::cli
