#include "sim/fleet_spec.h"

#include <charconv>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/yaml.h"
#include "kube/api/names.h"
#include "sim/atomic_file.h"

namespace gpufleet::sim {

using core::describe_value;
using core::fail_field;
using core::FieldReader;
using core::seconds_from;
using kube::check_dns_subdomain;
using kube::check_label_key;
using kube::check_label_value;

namespace {

constexpr std::string_view kApiVersion = "gpufleet.io/v1alpha1";

std::string known_gpu_keys() {
  std::string out;
  for (const auto& m : gpu_models()) {
    if (!out.empty()) out += ", ";
    out += m.key;
  }
  return out;
}

// "570.148.08" -> three numeric parts; "12.8" -> two.
bool dotted_numbers(std::string_view s, std::size_t parts) {
  std::size_t seen = 0;
  while (true) {
    auto dot = s.find('.');
    std::string_view part = s.substr(0, dot);
    if (part.empty()) return false;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
    }
    ++seen;
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  return seen == parts;
}

std::vector<Taint> parse_taints(FieldReader& r) {
  std::vector<Taint> out;
  const core::Value* v = r.get("taints");
  if (v == nullptr) return out;
  if (!v->is_list()) r.fail("taints", *v, "is not a list", "write a list of {key, value, effect}");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < v->size(); ++i) {
    FieldReader t((*v)[i], r.source(), r.field("taints") + "[" + std::to_string(i) + "]");
    Taint taint;
    taint.key = t.required_string("key", "name the taint key, e.g. nvidia.com/gpu");
    if (auto problem = check_label_key(taint.key); !problem.empty()) {
      t.fail("key", core::Value(taint.key), problem, "use a valid Kubernetes key");
    }
    taint.value = t.string("value", "");
    if (auto problem = check_label_value(taint.value); !problem.empty()) {
      t.fail("value", core::Value(taint.value), problem, "use a valid label value");
    }
    taint.effect =
        t.one_of("effect", std::nullopt, {"NoSchedule", "PreferNoSchedule", "NoExecute"});
    t.done();
    if (!seen.insert(taint.key + ":" + taint.effect).second) {
      t.fail("key", core::Value(taint.key), "repeats a taint with the same effect",
             "keep one taint per key and effect");
    }
    out.push_back(std::move(taint));
  }
  return out;
}

void check_labels(FieldReader& r, std::string_view key, const core::Map& labels) {
  for (const auto& e : labels) {
    std::string field = r.field(key) + "." + e.key;
    if (auto problem = check_label_key(e.key); !problem.empty()) {
      fail_field(r.source(), field, "key " + problem, "use a valid Kubernetes label key");
    }
    if (key == "labels") {
      if (auto problem = check_label_value(e.value.as_string()); !problem.empty()) {
        fail_field(r.source(), field, "value " + describe_value(e.value) + " " + problem,
                   "use at most 63 letters, digits, '-', '_', '.'");
      }
    }
  }
}

NetworkSpec parse_network(FieldReader& pool) {
  NetworkSpec net;
  const core::Value* v = pool.get("network");
  if (v == nullptr) return net;
  FieldReader r(*v, pool.source(), pool.field("network"));
  net.resource = r.string("resource", net.resource);
  if (auto problem = check_label_key(net.resource);
      !problem.empty() || net.resource.find('/') == std::string::npos) {
    r.fail("resource", core::Value(net.resource), "is not an extended resource name",
           "use <domain>/<name>, e.g. rdma/ib or nvidia.com/hostdev");
  }
  net.devices = static_cast<int>(
      r.integer("devices", net.devices, 0, 32, "the number of RDMA NICs per node, e.g. 8"));
  net.ports_per_device =
      static_cast<int>(r.integer("portsPerDevice", net.ports_per_device, 1, 4, "usually 1"));
  net.rate_gbps = static_cast<int>(
      r.integer("rateGbps", net.rate_gbps, 10, 1600, "the port speed, e.g. 400 for NDR"));
  net.link_layer = r.one_of("linkLayer", "InfiniBand", {"InfiniBand", "Ethernet"});
  r.done();
  return net;
}

// The pool's gpu: product, count per node, driver and CUDA versions.
void parse_pool_gpu(FieldReader& r, const std::string& source, PoolSpec& p) {
  const core::Value* gv = r.get("gpu");
  if (gv == nullptr) fail_field(source, r.field("gpu"), "is required", "add gpu: {product: h100}");
  FieldReader g(*gv, source, r.field("gpu"));
  std::string product = g.required_string("product", "use one of: " + known_gpu_keys());
  p.gpu = find_gpu_model(product);
  if (p.gpu == nullptr) {
    g.fail("product", core::Value(product), "is not a known GPU",
           "use one of: " + known_gpu_keys());
  }
  int default_gpus = p.gpu->key == "gb200" ? 4 : 8;
  p.gpus_per_node = static_cast<int>(
      g.integer("count", default_gpus, 1, 16, "GPUs per node, e.g. 8 (HGX) or 4 (GB200 tray)"));
  p.driver_version = g.string("driver", "570.148.08");
  if (!dotted_numbers(p.driver_version, 3) && !dotted_numbers(p.driver_version, 2)) {
    g.fail("driver", core::Value(p.driver_version), "is not a driver version",
           "write it as major.minor.rev, e.g. \"570.148.08\"");
  }
  p.cuda_version = g.string("cuda", "12.8");
  if (!dotted_numbers(p.cuda_version, 2)) {
    g.fail("cuda", core::Value(p.cuda_version), "is not a CUDA version",
           "write it as major.minor in quotes, e.g. \"12.8\"");
  }
  g.done();
}

// NVLink domain, racks and zones.
void parse_pool_layout(FieldReader& r, const std::string& source, const std::string& fleet_name,
                       PoolSpec& p) {
  if (const core::Value* dv = r.get("nvlinkDomain")) {
    FieldReader d(*dv, source, r.field("nvlinkDomain"));
    p.nvlink_domain_gpus = static_cast<int>(
        d.integer("gpus", std::nullopt, 1, 576, "GPUs in one NVLink domain, e.g. 72 for NVL72"));
    d.done();
    if (p.nvlink_domain_gpus % p.gpus_per_node != 0) {
      d.fail("gpus", core::Value(p.nvlink_domain_gpus),
             "is not a multiple of the " + std::to_string(p.gpus_per_node) + " GPUs per node",
             "use a multiple of gpu.count, e.g. 72 with 4 GPUs per node (18 nodes per rack)");
    }
  }
  if (p.nvlink_domain_gpus > 0) {
    int domain_nodes = p.nodes_per_domain();
    if (r.has("nodesPerRack")) {
      auto n = r.integer("nodesPerRack", domain_nodes, 1, 1000, "");
      if (n != domain_nodes) {
        r.fail("nodesPerRack", core::Value(n),
               "contradicts nvlinkDomain (" + std::to_string(domain_nodes) + " nodes per domain)",
               "remove nodesPerRack: a rack is one NVLink domain");
      }
    }
    p.nodes_per_rack = domain_nodes;
  } else {
    p.nodes_per_rack =
        static_cast<int>(r.integer("nodesPerRack", 4, 1, 1000, "nodes per rack, e.g. 4 HGX nodes"));
  }
  if (const core::Value* zv = r.get("zones")) {
    if (!zv->is_list() || zv->size() == 0) {
      r.fail("zones", *zv, "is not a non-empty list", "list zone names, e.g. [zone-a, zone-b]");
    }
    for (std::size_t z = 0; z < zv->size(); ++z) {
      const core::Value& zone = (*zv)[z];
      std::string field = r.field("zones") + "[" + std::to_string(z) + "]";
      if (!zone.is_string() || !check_label_value(zone.as_string()).empty() ||
          zone.as_string().empty()) {
        fail_field(source, field, "value " + describe_value(zone) + " is not a valid zone name",
                   "use a label value such as us-east-1a");
      }
      p.zones.push_back(zone.as_string());
    }
  } else {
    p.zones.push_back(fleet_name + "-zone-a");
  }
}

// The host's shape: CPU, memory, pods, disk, network, kernel, runtime and OS (defaults by
// architecture).
void parse_pool_host(FieldReader& r, const std::string& source, PoolSpec& p) {
  bool grace = p.gpu->arch == "arm64";
  p.cpu_cores = static_cast<int>(
      r.integer("cpu", grace ? 144 : 224, 1, 4096, "CPU cores per node, e.g. 224"));
  p.memory_gib =
      r.integer("memoryGiB", grace ? 960 : 2048, 1, 65536, "host memory in GiB, e.g. 2048");
  p.max_pods = static_cast<int>(r.integer("maxPods", 110, 1, 2500, "pods per node, e.g. 110"));
  p.ephemeral_storage_gib =
      r.integer("ephemeralStorageGiB", 3500, 1, 1 << 20, "local disk in GiB, e.g. 3500");
  p.network = parse_network(r);

  if (const core::Value* hv = r.get("host")) {
    FieldReader h(*hv, source, r.field("host"));
    p.kernel_version = h.string("kernel", "");
    p.container_runtime = h.string("containerRuntime", "containerd://1.7.27");
    if (p.container_runtime.find("://") == std::string::npos) {
      h.fail("containerRuntime", core::Value(p.container_runtime), "has no runtime scheme",
             "write <runtime>://<version>, e.g. containerd://1.7.27");
    }
    if (const core::Value* ov = h.get("os")) {
      FieldReader o(*ov, source, h.field("os"));
      p.os.id = o.string("id", "");
      p.os.version_id = o.string("versionId", "");
      p.os.pretty_name = o.string("prettyName", "");
      o.done();
    }
    p.sysctls = h.string_map("sysctls");
    p.kernel_args = h.string("kernelArgs", "");
    h.done();
  } else {
    p.container_runtime = "containerd://1.7.27";
  }
  if (p.os.id.empty()) p.os.id = "ubuntu";
  if (p.os.version_id.empty()) p.os.version_id = p.os.id == "ubuntu" ? "22.04" : "9.4";
  if (p.os.pretty_name.empty()) {
    p.os.pretty_name = p.os.id == "ubuntu" ? "Ubuntu " + p.os.version_id + " LTS"
                                           : p.os.id + " " + p.os.version_id;
  }
  if (p.kernel_version.empty()) {
    p.kernel_version = grace ? "6.8.0-1021-nvidia-64k" : "5.15.0-1063-nvidia";
  }
}

// The name pattern must give unique, valid names.
void check_name_pattern(const std::string& source, const std::string& path, const PoolSpec& p) {
  bool by_index = p.name_pattern.find("{index") != std::string::npos;
  bool by_rack_slot = p.name_pattern.find("{rack") != std::string::npos &&
                      p.name_pattern.find("{slot") != std::string::npos;
  if (!by_index && !by_rack_slot) {
    fail_field(source, path + ".namePattern",
               "value \"" + p.name_pattern + "\" would give every node the same name",
               "include {index} (or both {rack} and {slot}), e.g. \"{pool}-{index:04}\"");
  }
  try {
    for (int sample : {0, p.count > 0 ? p.count - 1 : 0}) {
      std::string n = expand_name_pattern(p.name_pattern, p.name, sample, sample / p.nodes_per_rack,
                                          sample % p.nodes_per_rack);
      if (auto problem = check_dns_subdomain(n); !problem.empty()) {
        fail_field(
            source, path + ".namePattern",
            "value \"" + p.name_pattern + "\" gives node name \"" + n + "\" which " + problem,
            "use lower-case letters, digits and '-' around the placeholders");
      }
    }
  } catch (const core::InvalidInput& e) {
    std::string what = e.what();
    if (what.rfind(source, 0) == 0) throw;
    fail_field(source, path + ".namePattern", what,
               "use {pool}, {index}, {rack}, {slot}, optionally with a width: {index:04}");
  }
}

PoolSpec parse_pool(const core::Value& v, const std::string& source, std::size_t i,
                    const std::string& fleet_name) {
  std::string path = "spec.pools[" + std::to_string(i) + "]";
  FieldReader r(v, source, path);
  PoolSpec p;
  p.name = r.required_string("name", "name the pool, e.g. h100");
  if (auto problem = check_dns_subdomain(p.name); !problem.empty() || p.name.size() > 40) {
    r.fail("name", core::Value(p.name), problem.empty() ? "is longer than 40 characters" : problem,
           "use a short lower-case name such as h100-a");
  }
  p.count = static_cast<int>(
      r.integer("count", std::nullopt, 0, 20000, "the number of nodes in the pool, e.g. 32"));
  p.name_pattern = r.string("namePattern", "{pool}-{index:04}");

  parse_pool_gpu(r, source, p);
  parse_pool_layout(r, source, fleet_name, p);
  parse_pool_host(r, source, p);
  p.taints = parse_taints(r);
  p.labels = r.string_map("labels");
  check_labels(r, "labels", p.labels);
  p.annotations = r.string_map("annotations");
  check_labels(r, "annotations", p.annotations);
  r.done();

  check_name_pattern(source, path, p);
  return p;
}

}  // namespace

std::string expand_name_pattern(std::string_view pattern, std::string_view pool, int index,
                                int rack, int slot) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    auto close = pattern.find('}', i);
    if (close == std::string_view::npos) {
      throw core::InvalidInput("unclosed '{' in name pattern \"" + std::string(pattern) + "\"");
    }
    std::string_view token = pattern.substr(i + 1, close - i - 1);
    int width = 0;
    if (auto colon = token.find(':'); colon != std::string_view::npos) {
      std::string_view w = token.substr(colon + 1);
      auto [ptr, ec] = std::from_chars(w.data(), w.data() + w.size(), width);
      if (ec != std::errc() || ptr != w.data() + w.size() || width < 0 || width > 12) {
        throw core::InvalidInput("bad width in placeholder {" + std::string(token) + "}");
      }
      token = token.substr(0, colon);
    }
    std::string text;
    if (token == "pool") {
      text = pool;
    } else if (token == "index" || token == "rack" || token == "slot") {
      int n = token == "index" ? index : token == "rack" ? rack : slot;
      text = std::to_string(n);
      if (static_cast<int>(text.size()) < width) text.insert(0, width - text.size(), '0');
    } else {
      throw core::InvalidInput("unknown placeholder {" + std::string(token) + "}");
    }
    out += text;
    i = close;
  }
  return out;
}

const PoolSpec* FleetSpec::find_pool(std::string_view pool) const {
  for (const auto& p : pools) {
    if (p.name == pool) return &p;
  }
  return nullptr;
}

std::size_t FleetSpec::node_count() const {
  std::size_t n = 0;
  for (const auto& p : pools) n += static_cast<std::size_t>(p.count);
  return n;
}

FleetSpec parse_fleet(const core::Value& doc, std::string_view source_view) {
  std::string source(source_view);
  FieldReader top(doc, source, "");
  std::string api = top.required_string("apiVersion", "write apiVersion: gpufleet.io/v1alpha1");
  if (api != kApiVersion) {
    top.fail("apiVersion", core::Value(api), "is not supported", "write gpufleet.io/v1alpha1");
  }
  std::string kind = top.required_string("kind", "write kind: Fleet");
  if (kind != "Fleet") top.fail("kind", core::Value(kind), "is not Fleet", "write kind: Fleet");
  FleetSpec fleet;
  fleet.source = source;
  if (const core::Value* mv = top.get("metadata")) {
    FieldReader m(*mv, source, "metadata");
    fleet.name = m.required_string("name", "name the fleet, e.g. demo");
    m.string_map("labels");
    m.done();
  } else {
    fail_field(source, "metadata.name", "is required", "add metadata: {name: demo}");
  }
  if (auto problem = check_dns_subdomain(fleet.name); !problem.empty()) {
    fail_field(source, "metadata.name", "value \"" + fleet.name + "\" " + problem,
               "use a lower-case name such as demo");
  }
  const core::Value* sv = top.get("spec");
  top.done();
  if (sv == nullptr) fail_field(source, "spec", "is required", "add spec: {pools: [...]}");
  FieldReader spec(*sv, source, "spec");
  fleet.seed = static_cast<std::uint64_t>(
      spec.integer("seed", 1, 0, INT64_MAX, "any non-negative integer; equal seeds repeat runs"));
  fleet.kubelet_version = spec.string("kubeletVersion", fleet.kubelet_version);
  if (fleet.kubelet_version.empty() || fleet.kubelet_version[0] != 'v' ||
      !dotted_numbers(fleet.kubelet_version.substr(1, fleet.kubelet_version.find('-') - 1), 3)) {
    spec.fail("kubeletVersion", core::Value(fleet.kubelet_version), "is not a Kubernetes version",
              "write it like v1.32.4");
  }
  const core::Value* pv = spec.get("pools");
  spec.done();
  if (pv == nullptr || !pv->is_list() || pv->size() == 0) {
    fail_field(source, "spec.pools", pv == nullptr ? "is required" : "is empty or not a list",
               "list at least one pool with name, count and gpu");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < pv->size(); ++i) {
    PoolSpec pool = parse_pool((*pv)[i], source, i, fleet.name);
    if (!names.insert(pool.name).second) {
      fail_field(source, "spec.pools[" + std::to_string(i) + "].name",
                 "value \"" + pool.name + "\" repeats another pool's name",
                 "give every pool a unique name");
    }
    fleet.pools.push_back(std::move(pool));
  }
  // Node names must be unique across pools too (checked on the expansion's first and last).
  std::set<std::string> node_names;
  for (std::size_t i = 0; i < fleet.pools.size(); ++i) {
    const PoolSpec& p = fleet.pools[i];
    if (p.count == 0) continue;
    for (int sample : {0, p.count - 1}) {
      std::string n = expand_name_pattern(p.name_pattern, p.name, sample, sample / p.nodes_per_rack,
                                          sample % p.nodes_per_rack);
      if (!node_names.insert(n).second && !(sample == p.count - 1 && p.count == 1)) {
        fail_field(source, "spec.pools[" + std::to_string(i) + "].namePattern",
                   "value \"" + p.name_pattern + "\" gives node name \"" + n +
                       "\" which another pool also uses",
                   "include {pool} in the pattern");
      }
    }
  }
  return fleet;
}

FleetSpec load_fleet_file(const std::string& path) {
  const std::string text = read_text_file(path);
  core::DocumentScope scope(path, text);
  return parse_fleet(core::parse_yaml(text, path), path);
}

core::Value fleet_to_value(const FleetSpec& fleet) {
  core::Value v;
  v["name"] = fleet.name;
  v["seed"] = fleet.seed;
  v["kubeletVersion"] = fleet.kubelet_version;
  for (const auto& p : fleet.pools) {
    core::Value pool;
    pool["name"] = p.name;
    pool["count"] = p.count;
    pool["namePattern"] = p.name_pattern;
    pool["gpu"]["product"] = std::string(p.gpu->key);
    pool["gpu"]["count"] = p.gpus_per_node;
    pool["gpu"]["driver"] = p.driver_version;
    pool["gpu"]["cuda"] = p.cuda_version;
    if (p.nvlink_domain_gpus > 0) pool["nvlinkDomain"]["gpus"] = p.nvlink_domain_gpus;
    pool["nodesPerRack"] = p.nodes_per_rack;
    for (const auto& z : p.zones) pool["zones"].push_back(z);
    v["pools"].push_back(std::move(pool));
  }
  return v;
}

}  // namespace gpufleet::sim
