#include "sim/node_object.h"

#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

std::string part(std::string_view version, int n) {
  std::size_t start = 0;
  for (int i = 0; i < n; ++i) {
    start = version.find('.', start);
    if (start == std::string_view::npos) return "0";
    ++start;
  }
  auto end = version.find('.', start);
  return std::string(version.substr(start, end == std::string_view::npos ? end : end - start));
}

std::string kib(std::int64_t gib) { return std::to_string(gib * 1024 * 1024) + "Ki"; }

core::Value condition(std::string_view type, std::string_view status, std::string_view reason,
                      std::string_view message, std::string_view heartbeat,
                      std::string_view transition) {
  core::Value c;
  c["type"] = type;
  c["status"] = status;
  c["reason"] = reason;
  c["message"] = message;
  c["lastHeartbeatTime"] = heartbeat;
  c["lastTransitionTime"] = transition;
  return c;
}

}  // namespace

std::string boot_id_for(const NodeIdentity& id, int boot_number) {
  Rng rng(derive_seed(id.seed, "boot/" + std::to_string(boot_number)));
  std::string out;
  append_uuid(rng, out);
  return out;
}

NodeRuntime initial_runtime(const FleetSpec& fleet, const NodeIdentity& id,
                            std::string_view boot_id, std::string_view now) {
  const PoolSpec& pool = fleet.pools.at(id.pool);
  NodeRuntime rt;
  rt.boot_id = boot_id;
  rt.gpus_present = pool.gpus_per_node;
  rt.gpus_healthy = pool.gpus_per_node;
  rt.rdma_healthy = pool.network.devices * pool.network.ports_per_device;
  rt.ready_transition = now;
  rt.kernel_version = pool.kernel_version;
  rt.driver_version = pool.driver_version;
  return rt;
}

core::Value node_labels(const FleetSpec& fleet, const NodeIdentity& id, const NodeRuntime& rt) {
  const PoolSpec& pool = fleet.pools.at(id.pool);
  const GpuModel& gpu = *pool.gpu;
  core::Value l = core::Value::map();
  l["kubernetes.io/hostname"] = id.name;
  l["kubernetes.io/os"] = "linux";
  l["kubernetes.io/arch"] = gpu.arch;
  l["beta.kubernetes.io/os"] = "linux";
  l["beta.kubernetes.io/arch"] = gpu.arch;
  l["topology.kubernetes.io/zone"] = id.zone;
  l[std::string(kRackLabel)] = id.rack_name;
  l[std::string(kPoolLabel)] = pool.name;
  l[std::string(kFleetLabel)] = fleet.name;
  l[std::string(kSimulatedLabel)] = "true";
  // GPU feature discovery
  l["nvidia.com/gpu.present"] = "true";
  l["nvidia.com/gpu.product"] = gpu.product;
  l["nvidia.com/gpu.count"] = std::to_string(rt.gpus_present);
  l["nvidia.com/gpu.memory"] = std::to_string(gpu.memory_mib);
  l["nvidia.com/gpu.family"] = gpu.family;
  l["nvidia.com/gpu.compute.major"] = std::to_string(gpu.compute_major);
  l["nvidia.com/gpu.compute.minor"] = std::to_string(gpu.compute_minor);
  l["nvidia.com/gpu.machine"] = gpu.arch == "arm64" ? "GB200-NVL72" : "HGX-" + std::string(gpu.key);
  l["nvidia.com/cuda.driver.major"] = part(rt.driver_version, 0);
  l["nvidia.com/cuda.driver.minor"] = part(rt.driver_version, 1);
  l["nvidia.com/cuda.driver.rev"] = part(rt.driver_version, 2);
  l["nvidia.com/cuda.runtime.major"] = part(pool.cuda_version, 0);
  l["nvidia.com/cuda.runtime.minor"] = part(pool.cuda_version, 1);
  l["nvidia.com/mig.capable"] = gpu.mig_capable ? "true" : "false";
  if (!id.clique.empty()) l["nvidia.com/gpu.clique"] = id.clique;
  // Node feature discovery
  l["feature.node.kubernetes.io/kernel-version.full"] = rt.kernel_version;
  l["feature.node.kubernetes.io/kernel-version.major"] = part(rt.kernel_version, 0);
  l["feature.node.kubernetes.io/kernel-version.minor"] = part(rt.kernel_version, 1);
  l["feature.node.kubernetes.io/system-os_release.ID"] = pool.os.id;
  l["feature.node.kubernetes.io/system-os_release.VERSION_ID"] = pool.os.version_id;
  l["feature.node.kubernetes.io/pci-10de.present"] = "true";
  if (pool.network.devices > 0) l["feature.node.kubernetes.io/pci-15b3.present"] = "true";
  for (const auto& e : pool.labels) l[e.key] = e.value;
  return l;
}

core::Value node_status(const FleetSpec& fleet, const NodeIdentity& id, const NodeRuntime& rt,
                        std::string_view now) {
  const PoolSpec& pool = fleet.pools.at(id.pool);
  // Built as separate values: a reference into a core::Map dies when a sibling is inserted.
  core::Value cap;
  cap["cpu"] = std::to_string(pool.cpu_cores);
  cap["memory"] = kib(pool.memory_gib);
  cap["pods"] = std::to_string(pool.max_pods);
  cap["ephemeral-storage"] = kib(pool.ephemeral_storage_gib);
  cap["hugepages-1Gi"] = "0";
  cap["hugepages-2Mi"] = "0";
  cap["nvidia.com/gpu"] = std::to_string(rt.gpus_present);
  if (pool.network.devices > 0) {
    cap[pool.network.resource] =
        std::to_string(pool.network.devices * pool.network.ports_per_device);
  }
  core::Value alloc = cap;
  // kube-reserved + system-reserved + eviction threshold, as a typical GPU node sets them.
  alloc["cpu"] = std::to_string(pool.cpu_cores * 1000 - 2000) + "m";
  alloc["memory"] = std::to_string(pool.memory_gib * 1024 * 1024 -
                                   (pool.memory_gib * 1024 * 1024) / 50 - 100 * 1024) +
                    "Ki";
  alloc["ephemeral-storage"] =
      std::to_string(pool.ephemeral_storage_gib * 1024 * 1024 * 9 / 10) + "Ki";
  alloc["nvidia.com/gpu"] = std::to_string(rt.gpus_healthy);
  if (pool.network.devices > 0) alloc[pool.network.resource] = std::to_string(rt.rdma_healthy);

  core::Value conds = core::Value::list();
  conds.push_back(condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                            "kubelet has sufficient memory available", now, rt.ready_transition));
  conds.push_back(condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                            "kubelet has no disk pressure", now, rt.ready_transition));
  conds.push_back(condition("PIDPressure", "False", "KubeletHasSufficientPID",
                            "kubelet has sufficient PID available", now, rt.ready_transition));
  conds.push_back(condition("Ready", rt.ready ? "True" : "False", rt.ready_reason, rt.ready_message,
                            now, rt.ready_transition));

  core::Value info;
  info["architecture"] = pool.gpu->arch;
  info["bootID"] = rt.boot_id;
  info["containerRuntimeVersion"] = pool.container_runtime;
  info["kernelVersion"] = rt.kernel_version;
  info["kubeProxyVersion"] = fleet.kubelet_version;
  info["kubeletVersion"] = fleet.kubelet_version;
  info["machineID"] = id.machine_id;
  info["operatingSystem"] = "linux";
  info["osImage"] = pool.os.pretty_name;
  info["systemUUID"] = id.system_uuid;

  core::Value s;
  s["capacity"] = std::move(cap);
  s["allocatable"] = std::move(alloc);
  s["conditions"] = std::move(conds);
  s["nodeInfo"] = std::move(info);
  core::Value ip;
  ip["type"] = "InternalIP";
  ip["address"] = id.internal_ip;
  core::Value host;
  host["type"] = "Hostname";
  host["address"] = id.name;
  s["addresses"].push_back(std::move(ip));
  if (!rt.kubelet_address.empty()) {
    core::Value ext;
    ext["type"] = "ExternalIP";
    ext["address"] = rt.kubelet_address;
    s["addresses"].push_back(std::move(ext));
  }
  s["addresses"].push_back(std::move(host));
  s["daemonEndpoints"]["kubeletEndpoint"]["Port"] = rt.kubelet_port;
  return s;
}

core::Value node_object(const FleetSpec& fleet, const NodeIdentity& id, const NodeRuntime& rt,
                        std::string_view now) {
  const PoolSpec& pool = fleet.pools.at(id.pool);
  core::Value n;
  n["apiVersion"] = "v1";
  n["kind"] = "Node";
  n["metadata"]["name"] = id.name;
  n["metadata"]["labels"] = node_labels(fleet, id, rt);
  core::Value& ann = n["metadata"]["annotations"];
  ann = core::Value::map();
  ann["node.alpha.kubernetes.io/ttl"] = "0";
  ann["gpufleet.io/simulated-by"] = "gpufleet sim";
  for (const auto& e : pool.annotations) ann[e.key] = e.value;
  n["spec"]["providerID"] = "gpufleet-sim://" + fleet.name + "/" + id.name;
  if (!pool.taints.empty()) {
    core::Value& taints = n["spec"]["taints"];
    for (const auto& t : pool.taints) {
      core::Value tv;
      tv["key"] = t.key;
      if (!t.value.empty()) tv["value"] = t.value;
      tv["effect"] = t.effect;
      taints.push_back(std::move(tv));
    }
  }
  n["status"] = node_status(fleet, id, rt, now);
  return n;
}

}  // namespace gpufleet::sim
