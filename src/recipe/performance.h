// validate's performance phase without the cluster: the NCCL bus-bandwidth floors of a node
// pool (library `nodePool.performance`, recipe `nodePools[].performance`), the certify
// Certification that measures them, and the per-node report read back from its status.
// Running it against a cluster is recipe/live/performance_run.h. recipe does not include
// certify: the two meet through the Certification object (docs/certify.md).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "recipe/recipe.h"
#include "recipe/validate.h"

namespace gpufleet::recipe {

// The NCCL categories a floor may name (certify's communication/<name>).
inline constexpr std::string_view kBandwidthCategories[] = {"nccl-all-gather", "nccl-all-reduce",
                                                            "nccl-alltoall", "nccl-reduce-scatter"};

// Reads `{nccl-all-reduce: {busBandwidthGBps: {node: 400, fabric: 310}}}` strictly (unknown
// keys, categories and non-positive numbers name the field and the fix); sorted by category.
std::vector<BandwidthFloor> performance_from_value(const core::Value& v, std::string_view where);
core::Value performance_to_value(const std::vector<BandwidthFloor>& floors);

// The CEL threshold certify evaluates (value: GB/s, groupSize: nodes in the group):
// "value >= (groupSize > 1 ? 310.0 : 400.0)".
std::string bandwidth_threshold(const BandwidthFloor& f);

struct PerformanceOptions {
  std::string namespace_ = "gpufleet-system";
  std::chrono::seconds timeout{30 * 60};
};

// A deterministic name per recipe and pool ("validate-<pool>-<8 hex>"): running validate
// again finds the Certification it created before.
std::string certification_name(const Recipe& recipe, const NodePool& pool);

// The Certification testing `nodes` (the pool's nodes, sorted) against the pool's floors, one
// category per floor, scale diagnose (certify names the faulty nodes), tolerating the
// nvidia.com/gpu taint. Only `spec` decides whether an existing object is reused.
core::Value pool_certification(const Recipe& recipe, const NodePool& pool,
                               const std::vector<std::string>& nodes,
                               const PerformanceOptions& options);

// One result for the Certification (subject the pool) and one per node, from the object's
// status: a node certify lists in failedNodes fails with its reason and message, an excluded
// node fails with the reason it was not tested, the others pass once the run Passed or Failed.
// A run that is not finished (`finished` false: the deadline passed) fails every node, saying
// the Certification keeps running and validate may be run again to wait for it.
void report_certification(ValidationReport& out, const NodePool& pool,
                          const std::vector<std::string>& nodes, const core::Value& certification,
                          bool finished, std::string_view waited);

}  // namespace gpufleet::recipe
