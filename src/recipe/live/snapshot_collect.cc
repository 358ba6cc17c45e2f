// Snapshot facts from Kubernetes objects: nodes, Helm release Secrets, CRDs, workloads, pods.
#include <algorithm>
#include <map>
#include <tuple>

#include "core/base64.h"
#include "core/errors.h"
#include "core/gzip.h"
#include "core/input_limits.h"
#include "core/json.h"
#include "recipe/snapshot.h"

namespace gpufleet::recipe {

using core::Value;

namespace {

constexpr std::string_view kBadWaitingReasons[] = {"CrashLoopBackOff", "ImagePullBackOff",
                                                   "ErrImagePull", "CreateContainerConfigError"};

std::string str_at(const Value& v, std::initializer_list<std::string_view> path) {
  return std::string(v.get_string(path));
}

std::int64_t int_at(const Value& v, std::initializer_list<std::string_view> path,
                    std::int64_t fallback = 0) {
  const Value* f = v.get(path);
  if (f == nullptr) return fallback;
  if (const std::int64_t* i = f->if_int()) return *i;
  return fallback;
}

std::string label(const Value& node, std::string_view key) {
  const Value* labels = node.get({"metadata", "labels"});
  if (labels == nullptr) return {};
  const Value* v = labels->find(key);
  return v && v->if_string() ? *v->if_string() : std::string();
}

// "Ubuntu 24.04.1 LTS" -> ubuntu; used when NFD's os_release labels are absent.
std::string os_from_image(const std::string& image) {
  std::string lower;
  for (char c : image) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower.find("ubuntu") != std::string::npos) return "ubuntu";
  if (lower.find("red hat") != std::string::npos || lower.find("rhel") != std::string::npos)
    return "rhel";
  if (lower.find("container-optimized os") != std::string::npos) return "cos";
  if (lower.find("amazon linux") != std::string::npos) return "amzn";
  if (lower.find("bottlerocket") != std::string::npos) return "bottlerocket";
  return {};
}

NodeFacts node_facts(const Value& node) {
  NodeFacts n;
  n.name = str_at(node, {"metadata", "name"});
  if (const Value* l = node.get({"metadata", "labels"}); l && l->is_map()) n.labels = *l;
  n.provider_id = str_at(node, {"spec", "providerID"});
  // The GA label, else the beta one older kubelets still set.
  n.instance_type = label(node, "node.kubernetes.io/instance-type");
  if (n.instance_type.empty()) n.instance_type = label(node, "beta.kubernetes.io/instance-type");
  n.os_image = str_at(node, {"status", "nodeInfo", "osImage"});
  n.os = label(node, "feature.node.kubernetes.io/system-os_release.ID");
  if (n.os.empty()) n.os = os_from_image(n.os_image);
  n.os_version = label(node, "feature.node.kubernetes.io/system-os_release.VERSION_ID");
  n.kernel = str_at(node, {"status", "nodeInfo", "kernelVersion"});
  if (n.kernel.empty()) n.kernel = label(node, "feature.node.kubernetes.io/kernel-version.full");
  n.container_runtime = str_at(node, {"status", "nodeInfo", "containerRuntimeVersion"});
  n.kubelet = str_at(node, {"status", "nodeInfo", "kubeletVersion"});
  n.gpu_product = label(node, "nvidia.com/gpu.product");
  n.gpu_family = label(node, "nvidia.com/gpu.family");
  std::string major = label(node, "nvidia.com/cuda.driver.major");
  if (!major.empty()) {
    n.gpu_driver = major + "." + label(node, "nvidia.com/cuda.driver.minor");
    std::string rev = label(node, "nvidia.com/cuda.driver.rev");
    if (!rev.empty()) n.gpu_driver += "." + rev;
  }
  std::string count = label(node, "nvidia.com/gpu.count");
  if (!count.empty() &&
      std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    n.gpu_count = std::stoll(count);
  } else if (const Value* cap = node.get({"status", "capacity"})) {
    // Capacity quantities of extended resources are whole numbers ("8").
    if (const Value* g = cap->find("nvidia.com/gpu"); g && g->if_string()) {
      const std::string& s = *g->if_string();
      if (!s.empty() &&
          std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        n.gpu_count = std::stoll(s);
      }
    }
  }
  return n;
}

void add_pod_problems(const Value& pod, std::vector<PodProblem>& out) {
  std::string ns = str_at(pod, {"metadata", "namespace"});
  std::string name = str_at(pod, {"metadata", "name"});
  std::string phase = str_at(pod, {"status", "phase"});
  for (bool init : {true, false}) {
    const Value* statuses =
        pod.get({"status", init ? "initContainerStatuses" : "containerStatuses"});
    if (statuses == nullptr || !statuses->is_list()) continue;
    for (const Value& cs : statuses->as_list()) {
      std::string reason = str_at(cs, {"state", "waiting", "reason"});
      bool bad = std::find(std::begin(kBadWaitingReasons), std::end(kBadWaitingReasons), reason) !=
                 std::end(kBadWaitingReasons);
      if (bad) out.push_back({ns, name, phase, str_at(cs, {"name"}), init, reason});
    }
  }
}

// A hostPath that reaches GPU device files: /dev itself, or /dev/nvidia*, /dev/dri*.
bool is_gpu_device_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path == "/dev" || path.rfind("/dev/nvidia", 0) == 0 || path.rfind("/dev/dri", 0) == 0;
}

void add_host_path_devices(const Value& pod, std::vector<HostPathDevice>& out) {
  const Value* volumes = pod.get({"spec", "volumes"});
  if (volumes == nullptr || !volumes->is_list()) return;
  for (const Value& v : volumes->as_list()) {
    std::string path = str_at(v, {"hostPath", "path"});
    if (path.empty() || !is_gpu_device_path(path)) continue;
    out.push_back({str_at(pod, {"metadata", "namespace"}), str_at(pod, {"metadata", "name"}),
                   str_at(v, {"name"}), path});
  }
}

}  // namespace

Value decode_helm_release(std::string_view secret_data_release) {
  std::optional<std::string> inner = core::base64_decode(secret_data_release);
  if (!inner) throw core::InvalidInput("Helm release record: data.release is not base64");
  std::optional<std::string> payload = core::base64_decode(*inner);
  if (!payload) throw core::InvalidInput("Helm release record: the release is not base64");
  std::string json = payload->size() >= 2 && static_cast<unsigned char>((*payload)[0]) == 0x1f &&
                             static_cast<unsigned char>((*payload)[1]) == 0x8b
                         ? core::gunzip(*payload, "Helm release record",
                                        "a real release record is far smaller; raise it with "
                                        "GPUFLEET_MAX_INPUT_BYTES if this one is real")
                         : *payload;
  return core::parse_json(json, "helm release");
}

Snapshot snapshot_from_objects(const ClusterObjects& o) {
  Snapshot s;
  s.kubernetes_version = o.kubernetes_version;
  for (const Value& n : o.nodes) s.nodes.push_back(node_facts(n));
  std::sort(s.nodes.begin(), s.nodes.end(),
            [](const NodeFacts& a, const NodeFacts& b) { return a.name < b.name; });

  // Latest revision of each release (namespace/name).
  std::map<std::pair<std::string, std::string>, InstalledComponent> releases;
  for (const Value& secret : o.helm_release_secrets) {
    std::string secret_name = str_at(secret, {"metadata", "name"});
    std::string data = str_at(secret, {"data", "release"});
    if (data.empty()) continue;
    Value rel;
    try {
      rel = decode_helm_release(data);
    } catch (const core::InvalidInput& e) {
      throw core::InvalidInput("Secret " + str_at(secret, {"metadata", "namespace"}) + "/" +
                               secret_name + ": " + e.what());
    }
    InstalledComponent c;
    c.name = str_at(rel, {"name"});
    c.namespace_ = str_at(rel, {"namespace"});
    c.chart = str_at(rel, {"chart", "metadata", "name"});
    c.version = str_at(rel, {"chart", "metadata", "version"});
    c.app_version = str_at(rel, {"chart", "metadata", "appVersion"});
    c.status = str_at(rel, {"info", "status"});
    c.revision = int_at(rel, {"version"});
    if (const Value* cfg = rel.find("config"); cfg && cfg->is_map()) c.values = *cfg;
    auto key = std::make_pair(c.namespace_, c.name);
    auto it = releases.find(key);
    if (it == releases.end() || it->second.revision < c.revision) releases[key] = std::move(c);
  }
  for (auto& [_, c] : releases) s.components.push_back(std::move(c));

  for (const Value& crd : o.crds) {
    WorkloadState w{"CustomResourceDefinition", "", str_at(crd, {"metadata", "name"})};
    if (const Value* conds = crd.get({"status", "conditions"}); conds && conds->is_list()) {
      for (const Value& c : conds->as_list()) {
        if (c.get_string({"type"}) == "Established" && c.get_string({"status"}) == "True")
          w.established = true;
      }
    }
    s.workloads.push_back(std::move(w));
  }
  for (const Value& d : o.deployments) {
    s.workloads.push_back({"Deployment", str_at(d, {"metadata", "namespace"}),
                           str_at(d, {"metadata", "name"}), int_at(d, {"spec", "replicas"}, 1),
                           int_at(d, {"status", "availableReplicas"}),
                           int_at(d, {"status", "updatedReplicas"}), false});
  }
  for (const Value& d : o.daemon_sets) {
    s.workloads.push_back(
        {"DaemonSet", str_at(d, {"metadata", "namespace"}), str_at(d, {"metadata", "name"}),
         int_at(d, {"status", "desiredNumberScheduled"}), int_at(d, {"status", "numberReady"}),
         int_at(d, {"status", "updatedNumberScheduled"}), false});
  }
  for (const Value& d : o.stateful_sets) {
    s.workloads.push_back({"StatefulSet", str_at(d, {"metadata", "namespace"}),
                           str_at(d, {"metadata", "name"}), int_at(d, {"spec", "replicas"}, 1),
                           int_at(d, {"status", "readyReplicas"}),
                           int_at(d, {"status", "updatedReplicas"}), false});
  }
  std::sort(
      s.workloads.begin(), s.workloads.end(), [](const WorkloadState& a, const WorkloadState& b) {
        return std::tie(a.kind, a.namespace_, a.name) < std::tie(b.kind, b.namespace_, b.name);
      });
  for (const Value& p : o.pods) {
    add_pod_problems(p, s.pod_problems);
    add_host_path_devices(p, s.host_path_devices);
  }
  std::sort(s.host_path_devices.begin(), s.host_path_devices.end(),
            [](const HostPathDevice& a, const HostPathDevice& b) {
              return std::tie(a.namespace_, a.pod, a.volume) <
                     std::tie(b.namespace_, b.pod, b.volume);
            });
  for (const Value& r : o.operator_resources) {
    s.custom_resources.push_back({str_at(r, {"kind"}), str_at(r, {"metadata", "namespace"}),
                                  str_at(r, {"metadata", "name"}), str_at(r, {"status", "state"})});
  }
  std::sort(s.custom_resources.begin(), s.custom_resources.end(),
            [](const CustomResourceState& a, const CustomResourceState& b) {
              return std::tie(a.kind, a.namespace_, a.name) <
                     std::tie(b.kind, b.namespace_, b.name);
            });
  for (const Value& d : o.device_classes)
    s.device_classes.push_back(str_at(d, {"metadata", "name"}));
  std::sort(s.device_classes.begin(), s.device_classes.end());
  for (const Value& r : o.resource_slices) {
    const Value* devices = r.get({"spec", "devices"});
    s.resource_slices.push_back(
        {str_at(r, {"spec", "nodeName"}), str_at(r, {"spec", "driver"}),
         devices && devices->is_list() ? static_cast<std::int64_t>(devices->as_list().size()) : 0});
  }
  std::sort(s.resource_slices.begin(), s.resource_slices.end(),
            [](const ResourceSliceFacts& a, const ResourceSliceFacts& b) {
              return std::tie(a.node, a.driver, a.devices) < std::tie(b.node, b.driver, b.devices);
            });
  std::sort(s.pod_problems.begin(), s.pod_problems.end(),
            [](const PodProblem& a, const PodProblem& b) {
              return std::tie(a.namespace_, a.pod, a.init, a.container) <
                     std::tie(b.namespace_, b.pod, b.init, b.container);
            });
  return s;
}

}  // namespace gpufleet::recipe
