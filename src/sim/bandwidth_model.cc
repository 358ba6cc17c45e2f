#include "sim/bandwidth_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/errors.h"

namespace gpufleet::sim {
namespace {

constexpr double kNicEfficiency = 0.92;       // RDMA payload / line rate NCCL reaches
constexpr double kSingleGpuCopyGbs = 2000.0;  // one rank: a local device copy
// NCCL's socket transport through the kernel's TCP stack: the published case of a job that
// fell back to it measured about 3 GB/s bus bandwidth where RDMA gave 489.
constexpr double kSocketBusbwGbs = 3.2;

}  // namespace

BandwidthEstimate estimate_allreduce(const std::vector<GroupMember>& members) {
  if (members.empty()) throw core::InvalidInput("an all-reduce group needs at least one node");
  const GpuModel* gpu = members.front().pool->gpu;
  BandwidthEstimate e;
  std::set<std::string> domains;
  std::set<std::string> hosts;
  for (const auto& m : members) {
    if (m.pool->gpu != gpu) {
      throw core::InvalidInput("node " + m.host + " has " + std::string(m.pool->gpu->key) +
                               " GPUs but the group started with " + std::string(gpu->key) +
                               " (run NCCL tests on one GPU model at a time)");
    }
    if (!hosts.insert(m.host).second) {
      throw core::InvalidInput("node " + m.host + " appears twice in the group");
    }
    e.ranks += static_cast<int>(m.gpu_pci.size());
    domains.insert(m.nvlink_domain);
  }
  e.nodes = static_cast<int>(members.size());
  e.domains = static_cast<int>(domains.size());
  bool cross = e.domains > 1;

  // The worst member sets the pace.
  double nvlink = 1.0, network = 1.0, compute = 1.0;
  std::string worst_host;
  double worst = 1.0;
  for (const auto& m : members) {
    const LinkHealth& h = m.health;
    if (h.broken || (cross && h.network_broken)) {
      if (!e.failed) {
        e.failed = true;
        e.failed_host = m.host;
        e.failure = h.broken ? h.failure : h.network_failure;
      }
    }
    nvlink = std::min(nvlink, h.nvlink_factor);
    network = std::min(network, h.network_factor);
    compute = std::min(compute, h.compute_factor);
    double mine = std::min(h.nvlink_factor, cross ? h.network_factor : 1.0) * h.compute_factor;
    if (mine < worst) {
      worst = mine;
      worst_host = m.host;
    }
  }
  // A degraded link between two members slows every ring through it, like a member at that
  // fraction of the fabric the group runs on (the network across domains, else NVLink).
  double link = 1.0;
  if (e.nodes > 1) {
    for (const auto& m : members) {
      for (const auto& [peer, factor] : m.health.links) {
        if (factor < link && hosts.count(peer) != 0) {
          link = factor;
          if (factor * compute < worst) {
            worst = factor * compute;
            worst_host = m.host;
          }
        }
      }
    }
  }
  if (cross)
    network = std::min(network, link);
  else
    nvlink = std::min(nvlink, link);
  e.limited_by = worst_host;

  double nvl_peak = gpu->nvlink_busbw_gbs * nvlink;
  int ranks_per_domain = e.ranks / std::max(1, e.domains);
  if (ranks_per_domain > 8) nvl_peak *= 1.0 - 0.02 * std::log2(ranks_per_domain / 8.0);
  if (!cross) {
    e.peak_busbw_gbs = nvl_peak * compute;
    e.latency_us = gpu->nvlink_latency_us + 0.6 * std::log2(std::max(2, e.ranks));
    e.half_bytes = 32.0 * 1024 * 1024;
  } else {
    const NetworkSpec& net = members.front().pool->network;
    double nic_gbs = net.devices * net.ports_per_device * net.rate_gbps / 8.0 * kNicEfficiency;
    double net_peak = nic_gbs * network * (1.0 - 0.015 * std::log2(e.domains));
    e.peak_busbw_gbs = std::min(nvl_peak, net_peak) * compute;
    e.latency_us = 20.0 + 3.0 * std::log2(e.nodes);
    e.half_bytes = 64.0 * 1024 * 1024;
    for (const auto& m : members) e.sockets = e.sockets || m.health.socket_fallback;
    if (e.sockets) {
      e.peak_busbw_gbs = std::min(e.peak_busbw_gbs, kSocketBusbwGbs * network * compute);
      e.latency_us = 60.0 + 6.0 * std::log2(e.nodes);
      e.half_bytes = 4.0 * 1024 * 1024;
      auto first = std::find_if(members.begin(), members.end(),
                                [](const GroupMember& m) { return m.health.socket_fallback; });
      e.limited_by = first->host;
    }
  }
  if (e.ranks == 1) e.peak_busbw_gbs = 0;
  return e;
}

double allreduce_time_us(const BandwidthEstimate& e, std::uint64_t bytes) {
  double s = static_cast<double>(bytes);
  if (s <= 0) return e.latency_us;
  if (e.ranks <= 1) return e.latency_us / 2 + s / (kSingleGpuCopyGbs * 1e3);
  double bus_bytes = s * allreduce_bus_factor(e.ranks);
  // Pipelining and protocol overheads cost up to 2x at mid sizes and fade for large ones.
  double ramp = 1.0 + e.half_bytes / (s + e.half_bytes);
  return e.latency_us + bus_bytes * ramp / (std::max(1e-3, e.peak_busbw_gbs) * 1e3);
}

}  // namespace gpufleet::sim
