#include "sim/node_identity.h"

#include <array>
#include <cstdio>

#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

// Bus numbers of the eight GPUs on an HGX H100/H200/B200 baseboard.
constexpr std::array<int, 16> kHgxGpuBus{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb,
                                         0x1b, 0x2d, 0x3d, 0x60, 0x9d, 0xae, 0xbd, 0xde};
// PCI domains of the four GPUs of a GB200 compute tray (bus 01 in each).
constexpr std::array<int, 16> kGraceGpuDomain{0x0008, 0x0009, 0x0018, 0x0019, 0x0028, 0x0029,
                                              0x0038, 0x0039, 0x0048, 0x0049, 0x0058, 0x0059,
                                              0x0068, 0x0069, 0x0078, 0x0079};

std::string hex_id(Rng& rng, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  while (static_cast<int>(out.size()) < digits) {
    std::uint64_t word = rng.next();
    for (int i = 0; i < 16 && static_cast<int>(out.size()) < digits; ++i) {
      out.push_back(kHex[(word >> (4 * i)) & 0xf]);
    }
  }
  return out;
}

}  // namespace

std::string xid_pci_address(const std::string& bus_id) {
  // 00000000:18:00.0 -> domain 0000 (last four of eight), bus, device; function dropped.
  std::string s = bus_id;
  auto first = s.find(':');
  if (first == std::string::npos) return s;
  std::string domain = s.substr(0, first);
  if (domain.size() > 4) domain = domain.substr(domain.size() - 4);
  std::string rest = s.substr(first + 1);
  if (auto dot = rest.rfind('.'); dot != std::string::npos) rest = rest.substr(0, dot);
  std::string out = domain + ":" + rest;
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

NodeIdentity make_node_identity(const FleetSpec& fleet, std::size_t pool_index, int index) {
  const PoolSpec& pool = fleet.pools.at(pool_index);
  NodeIdentity id;
  id.pool = pool_index;
  id.index = index;
  id.rack = index / pool.nodes_per_rack;
  id.slot = index % pool.nodes_per_rack;
  id.name = expand_name_pattern(pool.name_pattern, pool.name, index, id.rack, id.slot);
  char rack_name[96];
  std::snprintf(rack_name, sizeof rack_name, "%s-rack-%03d", pool.name.c_str(), id.rack);
  id.rack_name = rack_name;
  id.zone = pool.zones[static_cast<std::size_t>(id.rack) % pool.zones.size()];
  id.seed = derive_seed(fleet.seed, pool.name + "/" + std::to_string(index));

  if (pool.nvlink_domain_gpus > 0 && pool.nodes_per_domain() > 1) {
    // GFD publishes <cluster UUID>.<clique ID>; one fabric cluster per rack here.
    Rng rack_rng(derive_seed(fleet.seed, "clique/" + id.rack_name));
    std::string uuid;
    append_uuid(rack_rng, uuid);
    id.clique = uuid + ".1";
  }

  char ip[32];
  std::snprintf(ip, sizeof ip, "10.%zu.%d.%d", 64 + pool_index % 64, (index / 250) % 256,
                index % 250 + 1);
  id.internal_ip = ip;

  Rng rng(id.seed);
  id.machine_id = hex_id(rng, 32);
  append_uuid(rng, id.system_uuid);
  bool grace = pool.gpu->arch == "arm64";
  for (int g = 0; g < pool.gpus_per_node; ++g) {
    char bus[32];
    if (grace) {
      std::snprintf(bus, sizeof bus, "0000%04X:01:00.0", kGraceGpuDomain[g % 16]);
    } else {
      std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", kHgxGpuBus[g % 16]);
    }
    id.gpu_pci.emplace_back(bus);
    std::string uuid = "GPU-";
    append_uuid(rng, uuid);
    id.gpu_uuid.push_back(std::move(uuid));
  }
  for (int s = 0; s < pool.gpu->nvswitches_per_node; ++s) {
    char bus[32];
    std::snprintf(bus, sizeof bus, "0000:%02x:00.0", 0x05 + s);
    id.nvswitch_pci.emplace_back(bus);
  }
  for (int d = 0; d < pool.network.devices; ++d) {
    id.ib_devices.push_back("mlx5_" + std::to_string(d));
  }
  return id;
}

std::vector<NodeIdentity> expand_fleet(const FleetSpec& fleet) {
  std::vector<NodeIdentity> out;
  out.reserve(fleet.node_count());
  for (std::size_t p = 0; p < fleet.pools.size(); ++p) {
    for (int i = 0; i < fleet.pools[p].count; ++i) out.push_back(make_node_identity(fleet, p, i));
  }
  return out;
}

}  // namespace gpufleet::sim
