#include "certify/nccl_transport.h"

#include <algorithm>
#include <cstdio>

#include "certify/text_lines.h"
#include "core/errors.h"

namespace gpufleet::certify {
namespace {

using namespace detail;

constexpr std::size_t kMaxHosts = 20000;

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The host of "<host>:<pid>:<tid>" in the text before " [<dev>] NCCL INFO", also behind a
// launcher's tag ("[1,0]<stdout>:host:12:34"); empty when there is none.
std::string_view host_of(std::string_view prefix) {
  auto tokens = split_ws(prefix);
  for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
    std::string_view t = *it;
    std::size_t tid = t.rfind(':');
    if (tid == std::string_view::npos || tid == 0) continue;
    std::size_t pid = t.rfind(':', tid - 1);
    if (pid == std::string_view::npos || pid == 0) continue;
    if (!all_digits(t.substr(tid + 1)) || !all_digits(t.substr(pid + 1, tid - pid - 1))) continue;
    std::string_view host = t.substr(0, pid);
    if (std::size_t tag = host.rfind(':'); tag != std::string_view::npos)
      host.remove_prefix(tag + 1);
    return host.size() <= 253 ? host : std::string_view{};
  }
  return {};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// "IB/0/GDRDMA" -> "IB"; "AWS Libfabric/0(1)/GDRDMA/Shared" -> "AWS Libfabric".
std::string_view net_name_of(std::string_view after_net) {
  for (std::size_t i = 0; i + 1 < after_net.size(); ++i) {
    if (after_net[i] == '/' && after_net[i + 1] >= '0' && after_net[i + 1] <= '9')
      return after_net.substr(0, i);
  }
  return trim(after_net);
}

int severity(NcclNetwork n) {  // which of a host's networks to report: the slowest
  switch (n) {
    case NcclNetwork::Socket: return 3;
    case NcclNetwork::Unknown: return 0;
    default: return 1;
  }
}

std::string_view expected_text(TransportExpectation e) {
  switch (e) {
    case TransportExpectation::Rdma: return "RDMA (IB, RoCE or EFA)";
    case TransportExpectation::InfiniBand: return "IB";
    case TransportExpectation::RoCE: return "RoCE";
    case TransportExpectation::Efa: return "EFA";
    case TransportExpectation::Any: return "any transport";
  }
  return "RDMA";
}

}  // namespace

std::string_view network_name(NcclNetwork n) noexcept {
  switch (n) {
    case NcclNetwork::InfiniBand: return "IB";
    case NcclNetwork::RoCE: return "RoCE";
    case NcclNetwork::Efa: return "EFA";
    case NcclNetwork::Socket: return "Socket";
    case NcclNetwork::Unknown: return "unknown";
  }
  return "unknown";
}

bool NcclTransportScanner::add_line(std::string_view line) {
  std::size_t at = line.find(" NCCL INFO ");
  if (at == std::string_view::npos) {
    // WARN lines are not rows either; the parser keeps them as failure lines.
    return line.find(" NCCL WARN ") != std::string_view::npos;
  }
  std::string_view host = host_of(line.substr(0, at));
  std::string_view msg = trim(line.substr(at + 11));
  if (host.empty()) return true;
  auto it =
      std::find_if(hosts_.begin(), hosts_.end(), [&](const Host& h) { return h.name == host; });
  if (it == hosts_.end()) {
    if (hosts_.size() >= kMaxHosts) return true;
    hosts_.emplace_back();
    hosts_.back().name = std::string(host);
    it = hosts_.end() - 1;
  }
  Host& h = *it;
  if (msg.starts_with("NET/IB : Using")) {
    // "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>"
    std::string_view devices = msg.substr(14);
    devices = devices.substr(0, devices.find(';'));
    for (std::string_view d : split_ws(devices)) {
      if (d.ends_with("/IB")) ++h.ib_ports;
      if (d.ends_with("/RoCE")) ++h.roce_ports;
    }
  } else if (msg.starts_with("NET/Socket : Using")) {
    h.socket_devices = true;
  } else if (msg.starts_with("NET/OFI ") && icontains(msg, "selected provider is ")) {
    std::string low = lower(msg);
    std::string_view rest = std::string_view(msg).substr(low.find("selected provider is ") + 21);
    auto t = split_ws(rest);
    if (!t.empty()) {
      std::string_view p = t.front();
      while (!p.empty() && (p.back() == ',' || p.back() == '.')) p.remove_suffix(1);
      h.ofi_provider = lower(p);
    }
  } else if (msg.starts_with("Using network ")) {
    h.using_network = std::string(trim(msg.substr(14)).substr(0, 64));
  } else if (msg.starts_with("Channel ")) {
    std::size_t via = msg.find(" via ");
    if (via == std::string_view::npos) return true;
    std::string_view path = trim(msg.substr(via + 5));
    if (path.starts_with("NET/")) {
      ++h.network_channels;
      std::string name(net_name_of(path.substr(4)).substr(0, 64));
      if (std::find(h.channel_nets.begin(), h.channel_nets.end(), name) == h.channel_nets.end() &&
          h.channel_nets.size() < 8)
        h.channel_nets.push_back(std::move(name));
      if (path.find("/GDRDMA") != std::string_view::npos) h.gdr = true;
      if (h.via.empty()) h.via = std::string(path.substr(0, 64));
    } else {
      ++h.local_channels;
    }
  }
  return true;
}

NcclNetwork NcclTransportScanner::map_name(const Host& h, std::string_view name) const {
  std::string n = lower(name);
  if (n == "socket") return NcclNetwork::Socket;
  // NCCL's own IB transport and the SHARP plugin's (IBext, IBext_v8) serve IB and RoCE alike:
  // the device list says which link layer.
  if (n.starts_with("ib")) {
    if (h.roce_ports > 0 && h.ib_ports == 0) return NcclNetwork::RoCE;
    return NcclNetwork::InfiniBand;
  }
  if (n.find("libfabric") != std::string::npos || n.find("ofi") != std::string::npos) {
    // aws-ofi-nccl over libfabric's TCP provider is sockets under another name.
    if (h.ofi_provider == "tcp" || h.ofi_provider == "sockets" ||
        h.ofi_provider.starts_with("tcp;"))
      return NcclNetwork::Socket;
    return NcclNetwork::Efa;
  }
  return NcclNetwork::Unknown;
}

std::vector<NcclHostTransport> NcclTransportScanner::hosts() const {
  std::vector<NcclHostTransport> out;
  for (const Host& h : hosts_) {
    NcclHostTransport t;
    t.host = h.name;
    t.network_channels = h.network_channels;
    t.local_channels = h.local_channels;
    t.gpu_direct_rdma = h.gdr;
    t.via = h.via;
    if (!h.channel_nets.empty()) {
      for (const std::string& name : h.channel_nets) {
        NcclNetwork n = map_name(h, name);
        if (severity(n) > severity(t.network)) t.network = n;
      }
    } else if (!h.using_network.empty()) {
      t.network = map_name(h, h.using_network);
    } else if (!h.ofi_provider.empty()) {
      t.network = map_name(h, "ofi");
    } else if (h.ib_ports + h.roce_ports > 0) {
      t.network = map_name(h, "IB");
    } else if (h.socket_devices) {
      t.network = NcclNetwork::Socket;
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string_view expectation_name(TransportExpectation e) noexcept {
  switch (e) {
    case TransportExpectation::Rdma: return "rdma";
    case TransportExpectation::InfiniBand: return "ib";
    case TransportExpectation::RoCE: return "roce";
    case TransportExpectation::Efa: return "efa";
    case TransportExpectation::Any: return "any";
  }
  return "rdma";
}

TransportExpectation parse_transport_expectation(std::string_view value, std::string_view field) {
  for (auto e :
       {TransportExpectation::Rdma, TransportExpectation::InfiniBand, TransportExpectation::RoCE,
        TransportExpectation::Efa, TransportExpectation::Any}) {
    if (expectation_name(e) == value) return e;
  }
  throw core::InvalidInput(std::string(field) + ": value \"" + std::string(value.substr(0, 100)) +
                           "\" is not one of rdma, ib, roce, efa, any (rdma: IB, RoCE or EFA; "
                           "any: the transport is not checked)");
}

bool satisfies(NcclNetwork seen, TransportExpectation expected) noexcept {
  switch (expected) {
    case TransportExpectation::Any: return true;
    case TransportExpectation::Rdma:
      return seen == NcclNetwork::InfiniBand || seen == NcclNetwork::RoCE ||
             seen == NcclNetwork::Efa;
    case TransportExpectation::InfiniBand: return seen == NcclNetwork::InfiniBand;
    case TransportExpectation::RoCE: return seen == NcclNetwork::RoCE;
    case TransportExpectation::Efa: return seen == NcclNetwork::Efa;
  }
  return false;
}

std::optional<std::string> transport_violation(const std::vector<NcclHostTransport>& hosts,
                                               std::size_t group_hosts,
                                               TransportExpectation expected,
                                               std::optional<double> bus_bandwidth_gbs,
                                               const std::map<std::string, std::string>& node_of) {
  if (expected == TransportExpectation::Any) return std::nullopt;
  if (std::max(group_hosts, hosts.size()) < 2) return std::nullopt;
  std::string names;
  std::string seen;
  int wrong = 0;
  bool socket = false;
  for (const NcclHostTransport& h : hosts) {
    if (!h.uses_network() || h.network == NcclNetwork::Unknown) continue;
    if (satisfies(h.network, expected)) continue;
    if (++wrong <= 10) {
      names += (names.empty() ? "" : ", ") + h.host;
      if (auto it = node_of.find(h.host); it != node_of.end() && it->second != h.host)
        names += " (node " + it->second + ")";
    }
    std::string name(network_name(h.network));
    if (seen.find(name) == std::string::npos) seen += (seen.empty() ? "" : "/") + name;
    socket = socket || h.network == NcclNetwork::Socket;
  }
  if (wrong == 0) return std::nullopt;
  if (wrong > 10) names += " and " + std::to_string(wrong - 10) + " more";
  std::string msg = "wrong NCCL transport: " + std::string(wrong == 1 ? "host " : "hosts ") +
                    names + " used " + seen + (socket ? " (TCP)" : "") + " between nodes where " +
                    std::string(expected_text(expected)) +
                    " is expected (expectTransport: " + std::string(expectation_name(expected)) +
                    ")";
  if (bus_bandwidth_gbs) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", *bus_bandwidth_gbs);
    msg += "; bus bandwidth " + std::string(buf) + " GB/s";
  }
  msg += socket ? "; NCCL found no usable RDMA device: check that the RDMA NICs are up, that the "
                  "RDMA device plugin runs on the node and the pod requests its resource, "
                  "NCCL_IB_HCA (and, for EFA, the aws-ofi-nccl plugin)"
                : "; check NCCL_IB_HCA / NCCL_NET and the fabric the nodes have, or set "
                  "expectTransport to it";
  return msg;
}

}  // namespace gpufleet::certify
