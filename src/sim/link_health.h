// What the bandwidth model needs to know about one node's health.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpufleet::sim {

struct LinkHealth {
  double nvlink_factor = 1.0;   // fraction of NVLink bandwidth left (worst GPU)
  double network_factor = 1.0;  // fraction of network bandwidth left (ports up x width)
  double compute_factor = 1.0;  // thermal slowdown slows the reduction kernels
  bool broken = false;          // any collective using this node's GPUs fails
  std::string failure;          // nccl-tests failure body: "Test CUDA failure common.cu:..."
  bool network_broken = false;  // collectives that leave the node fail
  std::string network_failure;
  // NCCL finds no usable RDMA device (socketFallback fault): between nodes it runs over TCP
  // sockets, at a few GB/s, and says so in its NCCL_DEBUG=INFO lines.
  bool socket_fallback = false;
  // Degraded links from this node to others (peer host, fraction of bandwidth left): a group
  // holding both ends runs at that fraction (the fleet's linkDegraded faults).
  std::vector<std::pair<std::string, double>> links;
};

}  // namespace gpufleet::sim
