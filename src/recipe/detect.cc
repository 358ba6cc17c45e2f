#include "recipe/detect.h"

#include <algorithm>
#include <set>

#include "core/errors.h"
#include "core/text.h"

namespace gpufleet::recipe {

namespace {

// Provider ID prefixes of the managed services, as their cloud controller managers set them.
constexpr std::pair<std::string_view, std::string_view> kProviders[] = {
    {"aws://", "eks"}, {"gce://", "gke"},    {"azure://", "aks"}, {"oci://", "oke"},
    {"ocid1.", "oke"}, {"linode://", "lke"}, {"kind://", "kind"},
};

// The library's value for clusters no managed service runs (kubeadm, bare metal, kind).
constexpr std::string_view kSelfManaged = "kind";

// Labels that name a node's group, in the order they are tried: gpufleet's own pool label,
// then the managed services' node groups, then the simulator's pool label.
constexpr std::string_view kNodeGroupLabels[] = {
    "gpufleet.io/node-pool", "eks.amazonaws.com/nodegroup",   "alpha.eksctl.io/nodegroup-name",
    "karpenter.sh/nodepool", "cloud.google.com/gke-nodepool", "kubernetes.azure.com/agentpool",
    "gpufleet.io/pool",
};

constexpr std::string_view kProductLabel = "nvidia.com/gpu.product";

bool known(const Library& lib, std::size_t d, const std::string& v) {
  const auto& valid = lib.valid[d];
  return std::find(valid.begin(), valid.end(), v) != valid.end();
}

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// "a, b, c" for at most four names, then "and N more".
std::string some(const std::vector<std::string>& names) {
  std::vector<std::string> head(
      names.begin(), names.begin() + static_cast<long>(std::min<std::size_t>(4, names.size())));
  std::string out = core::join(head);
  if (names.size() > head.size())
    out += " and " + std::to_string(names.size() - head.size()) + " more";
  return out;
}

std::string count_nodes(std::size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

// A pool name from a node group name: lower-case letters, digits and '-', at most 63.
std::string pool_name(std::string_view group) {
  std::string out;
  for (char c : lower(group)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (ok) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "pool" : out;
}

bool is_gpu_node(const NodeFacts& n) { return n.gpu_count > 0 || !n.gpu_product.empty(); }

std::pair<std::string, std::string> node_group(const NodeFacts& n) {
  for (std::string_view key : kNodeGroupLabels) {
    const core::Value* v = n.labels.find(key);
    if (v != nullptr && v->if_string() && !v->if_string()->empty())
      return {std::string(key), *v->if_string()};
  }
  return {std::string(kProductLabel), n.gpu_product};
}

void detect_service(const Library& lib, const Snapshot& s, DetectedCriteria& out,
                    std::string& problem) {
  std::map<std::string, std::vector<std::string>> by_service;  // service -> nodes
  std::string other_example;
  for (const NodeFacts& n : s.nodes) {
    std::string svc = service_of_provider_id(n.provider_id);
    if (!svc.empty()) {
      by_service[svc].push_back(n.name);
    } else if (!n.provider_id.empty() && other_example.empty()) {
      other_example = n.name + " (" + n.provider_id + ")";
    }
  }
  if (by_service.size() > 1) {
    std::string list;
    for (const auto& [svc, nodes] : by_service) {
      list += (list.empty() ? "" : "; ") + svc + ": " + some(nodes);
    }
    problem = "the nodes' provider IDs name more than one Kubernetes service (" + list +
              "); give --service";
    return;
  }
  std::string svc;
  std::string how;
  if (by_service.size() == 1) {
    const auto& [name, nodes] = *by_service.begin();
    svc = name;
    // A plain reference: clang 14 (the fuzz build) cannot capture a structured binding.
    const std::string& first_name = nodes.front();
    auto first = std::find_if(s.nodes.begin(), s.nodes.end(),
                              [&](const NodeFacts& n) { return n.name == first_name; });
    how = "provider ID " + first->provider_id + " (" + count_nodes(nodes.size()) + ")";
  } else if (!s.nodes.empty()) {
    svc = std::string(kSelfManaged);
    how = other_example.empty()
              ? "self-managed: no node has a provider ID of a managed service"
              : "self-managed: provider ID of " + other_example + " names no managed service";
  } else {
    out.notes.push_back("service any: the cluster has no nodes");
    return;
  }
  if (!known(lib, kService, svc)) {
    problem =
        "the cluster runs on " + svc + " (" + how +
        "), which the library has no recipes for (services: " + core::join(lib.valid[kService]) +
        "); give --service";
    return;
  }
  out.query.criteria[kService] = svc;
  out.notes.push_back("service " + svc + ": " + how);
}

void detect_os(const Library& lib, const std::vector<const NodeFacts*>& nodes, bool gpu,
               DetectedCriteria& out, std::string& problem) {
  std::map<std::string, std::vector<std::string>> by_os;
  for (const NodeFacts* n : nodes) {
    if (!n->os.empty()) by_os[n->os].push_back(n->name);
  }
  const std::string which = gpu ? "GPU nodes" : "nodes";
  if (by_os.empty()) {
    out.notes.push_back("os any: no " + which + " with an NFD os-release label or a known osImage");
    return;
  }
  if (by_os.size() > 1) {
    std::string list;
    for (const auto& [os, names] : by_os)
      list += (list.empty() ? "" : "; ") + os + ": " + some(names);
    problem =
        "the " + which + " run different OSes (" + list + "); one recipe serves one OS: give --os";
    return;
  }
  const auto& [os, names] = *by_os.begin();
  if (!known(lib, kOs, os)) {
    problem = "the " + which + " run OS '" + os + "' (" + some(names) +
              "), which the library has no recipes for (OSes: " + core::join(lib.valid[kOs]) +
              "); give --os";
    return;
  }
  out.query.criteria[kOs] = os;
  out.notes.push_back("os " + os + ": " + which + " " + some(names));
}

void detect_accelerators(const Library& lib, const std::vector<const NodeFacts*>& gpu_nodes,
                         DetectedCriteria& out, std::string& problem) {
  if (gpu_nodes.empty()) {
    out.notes.push_back(
        "accelerator any: no GPU nodes (no nvidia.com/gpu.product label, no nvidia.com/gpu "
        "capacity)");
    return;
  }
  // Node group -> accelerator -> nodes.
  std::map<std::pair<std::string, std::string>,
           std::map<std::string, std::vector<const NodeFacts*>>>
      groups;
  std::set<std::string> accelerators;
  for (const NodeFacts* n : gpu_nodes) {
    if (n->gpu_product.empty()) {
      problem = "node " + n->name + " has " + std::to_string(n->gpu_count) +
                " GPUs but no nvidia.com/gpu.product label (GPU feature discovery is not "
                "running there), so its accelerator is unknown; give --accelerator or --pool";
      return;
    }
    std::string acc = accelerator_of_product(lib, n->gpu_product);
    if (acc.empty()) {
      problem = "node " + n->name + " has GPU product " + n->gpu_product +
                ", which is none of the library's accelerators (" +
                core::join(lib.valid[kAccelerator]) + "); give --accelerator or --pool";
      return;
    }
    accelerators.insert(acc);
    groups[node_group(*n)][acc].push_back(n);
  }
  if (accelerators.size() == 1) {
    const std::string& acc = *accelerators.begin();
    out.query.criteria[kAccelerator] = acc;
    out.query.node_count = static_cast<std::int64_t>(gpu_nodes.size());
    out.notes.push_back("accelerator " + acc + ", nodes " + std::to_string(gpu_nodes.size()) +
                        ": " + gpu_nodes.front()->gpu_product + " on " +
                        count_nodes(gpu_nodes.size()));
    return;
  }
  // Different GPUs: one pool per node group, selected by the label that names the group.
  std::set<std::string> names;
  for (const auto& [group, by_acc] : groups) {
    const auto& [key, value] = group;
    if (by_acc.size() > 1) {
      std::string list;
      for (const auto& [acc, nodes] : by_acc) {
        list += (list.empty() ? "" : "; ") + acc + ": ";
        std::vector<std::string> nn;
        for (const NodeFacts* n : nodes) nn.push_back(n->name);
        list += some(nn);
      }
      problem = "node group " + key + "=" + value + " mixes GPUs (" + list +
                "); pools are derived from node groups, so give them with --pool";
      return;
    }
    const auto& [acc, nodes] = *by_acc.begin();
    PoolQuery p;
    p.name = pool_name(value);
    for (int i = 2; !names.insert(p.name).second; ++i)
      p.name = pool_name(value) + "-" + std::to_string(i);
    p.accelerator = acc;
    p.node_count = static_cast<std::int64_t>(nodes.size());
    p.node_selector[key] = value;
    out.notes.push_back("pool " + p.name + ": " + acc + " (" + nodes.front()->gpu_product +
                        ") on " + count_nodes(nodes.size()) + " with " + key + "=" + value);
    out.query.pools.push_back(std::move(p));
  }
  std::sort(out.query.pools.begin(), out.query.pools.end(),
            [](const PoolQuery& a, const PoolQuery& b) { return a.name < b.name; });
}

}  // namespace

std::string service_of_provider_id(const std::string& provider_id) {
  for (const auto& [prefix, service] : kProviders) {
    if (provider_id.rfind(prefix, 0) == 0) return std::string(service);
  }
  return {};
}

std::string accelerator_of_product(const Library& lib, const std::string& product) {
  std::string p = lower(product);
  if (p.rfind("nvidia-", 0) == 0) p = p.substr(7);
  std::string best;
  for (const std::string& v : lib.valid[kAccelerator]) {
    if (p.rfind(v, 0) != 0) continue;
    if (p.size() != v.size() && p[v.size()] != '-') continue;
    if (v.size() > best.size()) best = v;
  }
  return best;
}

DetectedCriteria detect_criteria(const Library& lib, const Snapshot& s) {
  DetectedCriteria out;
  std::vector<const NodeFacts*> gpu_nodes;
  std::vector<const NodeFacts*> all;
  for (const NodeFacts& n : s.nodes) {
    all.push_back(&n);
    if (is_gpu_node(n)) gpu_nodes.push_back(&n);
  }
  detect_service(lib, s, out, out.problems[kService]);
  detect_os(lib, gpu_nodes.empty() ? all : gpu_nodes, !gpu_nodes.empty(), out, out.problems[kOs]);
  detect_accelerators(lib, gpu_nodes, out, out.problems[kAccelerator]);
  return out;
}

std::map<std::string, std::string> running_components(const Recipe& r, const Snapshot& s) {
  std::map<std::string, std::string> out;
  for (const Component& c : r.components) {
    std::vector<const InstalledComponent*> releases;
    bool ours = false;
    for (const InstalledComponent& i : s.components) {
      if (i.chart != c.chart.name) continue;
      if (i.namespace_ == c.namespace_ && i.name == c.name) ours = true;
      releases.push_back(&i);
    }
    if (ours || releases.empty()) continue;
    const InstalledComponent& i = *releases.front();
    std::string why = "Helm release " + i.namespace_ + "/" + i.name + " (chart " + i.chart + " " +
                      i.version + ", " + i.status + ")";
    if (releases.size() > 1) why += " and " + std::to_string(releases.size() - 1) + " more";
    out[c.name] = why;
  }
  return out;
}

}  // namespace gpufleet::recipe
