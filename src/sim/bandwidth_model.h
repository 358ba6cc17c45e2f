// All-reduce bus bandwidth of a group of nodes (see docs/sim.md "Bandwidth model").
//
// Inside one NVLink domain the peak bus bandwidth is the GPU model's NVLink figure; a group
// that spans domains runs rings through the nodes' NICs, so its peak is bounded by one
// node's aggregate NIC bandwidth (NICs x rate x 0.92 protocol efficiency). Both fall slowly
// with group size, and the worst member's health (NVLink links, ports, width, thermal)
// scales them. Time for S bytes over n ranks:
//   t(S) = latency + S * 2(n-1)/n / peak * (1 + S_half / (S + S_half))
// so small messages sit on the latency floor, mid sizes pay up to twice the transfer time
// (pipelining and protocol overheads) and large ones approach the peak. A group across
// domains with a member whose NCCL fell back to TCP sockets (socketFallback) runs at socket
// speed: a few GB/s, with a higher latency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/fleet_spec.h"
#include "sim/link_health.h"

namespace gpufleet::sim {

struct GroupMember {
  std::string host;
  const PoolSpec* pool = nullptr;
  std::string nvlink_domain;         // rack name for multi-node domains, else the host
  std::vector<std::string> gpu_pci;  // "00000000:18:00.0", one per rank on this host
  std::string ip;                    // the node's address (NCCL's OOB / socket interface)
  LinkHealth health;
};

struct BandwidthEstimate {
  int ranks = 0;
  int nodes = 0;
  int domains = 0;
  double peak_busbw_gbs = 0;  // large-message bus bandwidth, GB/s (1e9 bytes)
  double latency_us = 0;      // small-message floor
  double half_bytes = 0;      // message size where transfers run at 2/3 of the peak
  std::string limited_by;     // host whose health set the peak ("" when all healthy)
  bool sockets = false;       // across domains, a member's NCCL runs over TCP sockets
  bool failed = false;
  std::string failed_host;
  std::string failure;  // "Test NCCL failure common.cu:1132 '...'"
};

// Throws core::InvalidInput on an empty group or members of different GPU models.
BandwidthEstimate estimate_allreduce(const std::vector<GroupMember>& members);

// Seconds -> microseconds for one all-reduce of `bytes` under `e` (no jitter).
double allreduce_time_us(const BandwidthEstimate& e, std::uint64_t bytes);

// busbw factor 2(n-1)/n of an all-reduce over n ranks.
inline double allreduce_bus_factor(int ranks) {
  return ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0;
}

}  // namespace gpufleet::sim
