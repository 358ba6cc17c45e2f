// `dcgmi diag -r <level> -j` output for one simulated node, from its fault model: what the
// certify category diagnostics/dcgm-r1..r4 reads. Both JSON layouts: DCGM 3.x
// ("DCGM GPU Diagnostic", results keyed by "gpu_ids") and 4.x ("DCGM Diagnostic", results
// per entity with error ids and severities, a test_summary per test).
//
// What fails where (error ids and severities as DCGM's dcgm_errors.h numbers them):
//   GPU lost or fallen off the bus  every GPU test of that GPU: Fail, XID error (101), reset
//   uncorrected ECC errors          memory: Fail, volatile DBE (4), reset
//   row remap failure               memory: Fail, row remap failure (80), isolate
//   row remap pending               memory: Warn, pending row remap (85), reset
//   NVLink links down (level >= 2)  pcie: Fail, NVLink error threshold (13), triage
//   HW thermal slowdown (level >= 3) targeted_power: Warn, text only
//   uncorrected ECC errors (level 4)  memtest: Fail, text only (the bad addresses it read back)
//   row remap failure (level 4)       memtest: Fail, text only
//   HW thermal slowdown (level 4)     pulse_test: Warn, text only (clocks throttled under pulses)
// The layout follows the container image's tag, as with real images: dcgm:3.* prints 3.x,
// anything else 4.x (dcgm_major_from_image).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/node_model.h"

namespace gpufleet::sim {

struct DcgmDiagConfig {
  int level = 3;          // -r 1..4
  int major_version = 4;  // 3 or 4: which JSON layout
};

struct DcgmDiagResult {
  std::string output;
  int exit_code = 0;
  double seconds = 0;  // how long the run takes at this level
};

// The same JSON without the indentation (text before it kept): what the simulated kubelet
// puts in the termination message, so that a level-4 report of 8 GPUs fits Kubernetes'
// 4096 bytes there (the full text stays in the container log).
std::string compact_json_output(const std::string& output);

// 3 for an image whose tag starts with "3." (nvcr.io/nvidia/cloud-native/dcgm:3.3.9-1-...),
// else 4.
int dcgm_major_from_image(std::string_view image);

// Throws core::InvalidInput on a level outside 1..4 or a version other than 3 or 4.
DcgmDiagResult run_dcgm_diag(const NodeModel& node, const DcgmDiagConfig& config);

}  // namespace gpufleet::sim
