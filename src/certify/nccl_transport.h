// Which transport NCCL used between nodes, read from its NCCL_DEBUG=INFO lines, and the check
// that a multi-node test ran over the fabric it was meant to (issue 31: a test that fell back
// to TCP sockets measures a few GB/s where RDMA gives hundreds, and must say why it failed).
//
// NCCL prints, per rank process, `<host>:<pid>:<tid> [<dev>] NCCL INFO <message>`; the lines
// that tell the transport (docs/certify.md "Transport"):
//   NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>   (/RoCE: RoCE)
//   NET/IB : No device found.
//   NET/Socket : Using [0]eth0:10.0.0.1<0>
//   NET/OFI Selected Provider is efa (found 32 nics)                       (aws-ofi-nccl)
//   Using network IB | Using network Socket | Using network AWS Libfabric
//   Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA               (between nodes)
//   Channel 00/0 : 0[0] -> 1[1] via P2P/IPC                               (inside a node)
// The channel lines are the strongest evidence (what the rings really run over); without
// them "Using network", then the device lists decide. Unknown lines are ignored.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::certify {

enum class NcclNetwork { Unknown, InfiniBand, RoCE, Efa, Socket };
// "IB", "RoCE", "EFA", "Socket", "unknown".
std::string_view network_name(NcclNetwork n) noexcept;

struct NcclHostTransport {
  std::string host;
  NcclNetwork network = NcclNetwork::Unknown;  // what this host's ranks used between nodes
  bool gpu_direct_rdma = false;                // a network channel said /GDRDMA
  int network_channels = 0;                    // channel lines via NET/...
  int local_channels = 0;                      // channel lines via P2P, SHM, NVLS, ...
  std::string via;                             // the first network channel's "NET/IB/0/GDRDMA"

  // Whether this host's NCCL used a network at all: network channels, or (a log without
  // channel lines) a network it said it uses. Channels all inside the node (an NVLink domain
  // across trays) use none.
  [[nodiscard]] bool uses_network() const noexcept {
    return network_channels > 0 || (local_channels == 0 && network != NcclNetwork::Unknown);
  }
};

// Collects the NCCL INFO lines of one output, many ranks interleaved.
class NcclTransportScanner {
 public:
  // True when `line` is an NCCL INFO (or WARN) line, which is then never a result row.
  bool add_line(std::string_view line);
  // Per host, in the order their first INFO line came.
  [[nodiscard]] std::vector<NcclHostTransport> hosts() const;

 private:
  struct Host {
    std::string name;
    int ib_ports = 0;    // NET/IB device list: ports with link layer IB
    int roce_ports = 0;  // ... with /RoCE
    bool socket_devices = false;
    std::string ofi_provider;  // aws-ofi-nccl: efa, tcp, ...
    std::string using_network;
    std::vector<std::string> channel_nets;  // distinct names after "via NET/"
    int network_channels = 0;
    int local_channels = 0;
    bool gdr = false;
    std::string via;
  };
  [[nodiscard]] NcclNetwork map_name(const Host& h, std::string_view name) const;
  std::vector<Host> hosts_;
};

// What a test expects between nodes: rdma (IB, RoCE or EFA; the default of multi-node NCCL
// tests), one of them, or any (not checked).
enum class TransportExpectation { Rdma, InfiniBand, RoCE, Efa, Any };
// "rdma", "ib", "roce", "efa", "any".
std::string_view expectation_name(TransportExpectation e) noexcept;
// Throws core::InvalidInput: `field`: value "x" is not one of rdma, ib, roce, efa, any (...).
TransportExpectation parse_transport_expectation(std::string_view value, std::string_view field);
[[nodiscard]] bool satisfies(NcclNetwork seen, TransportExpectation expected) noexcept;

// The failure message when a host that used a network used the wrong one, else nullopt.
// Not checked: expectation any, fewer than two hosts (a single node carries no network
// channels), hosts whose transport is unknown or that used no network.
// `bus_bandwidth_gbs`: the measured statistic, quoted in the message when given. `node_of`:
// NCCL's host names (a pod's hostname on Kubernetes) -> node names, named beside them.
std::optional<std::string> transport_violation(
    const std::vector<NcclHostTransport>& hosts, std::size_t group_hosts,
    TransportExpectation expected, std::optional<double> bus_bandwidth_gbs,
    const std::map<std::string, std::string>& node_of = {});

}  // namespace gpufleet::certify
