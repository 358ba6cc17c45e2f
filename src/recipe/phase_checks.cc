#include "recipe/phase_checks.h"

#include <algorithm>
#include <set>

#include "core/text.h"
#include "recipe/requirement.h"

namespace gpufleet::recipe::detail {

namespace {

// The DRA driver's component and the driver name its ResourceSlices and DeviceClass carry.
constexpr std::string_view kDraComponent = "dra-driver-nvidia-gpu";
constexpr std::string_view kGpuDriver = "gpu.nvidia.com";

// PodGroup CRDs of gang schedulers, with the component that brings each: KAI Scheduler,
// Volcano, and the scheduler-plugins coscheduling plugin.
constexpr std::pair<std::string_view, std::string_view> kGangCrds[] = {
    {"podgroups.scheduling.run.ai", "kai-scheduler"},
    {"podgroups.scheduling.volcano.sh", "volcano"},
    {"podgroups.scheduling.x-k8s.io", "scheduler-plugins"},
};

bool has_component(const Recipe& r, std::string_view name, bool include_external = true) {
  return std::any_of(r.components.begin(), r.components.end(), [&](const Component& c) {
    return c.name == name && (include_external || !c.external);
  });
}

std::string some(const std::vector<std::string>& names) {
  std::vector<std::string> head(
      names.begin(), names.begin() + static_cast<long>(std::min<std::size_t>(5, names.size())));
  std::string out = core::join(head);
  if (names.size() > head.size())
    out += " and " + std::to_string(names.size() - head.size()) + " more";
  return out;
}

std::vector<const NodeFacts*> gpu_nodes(const Snapshot& s) {
  std::vector<const NodeFacts*> out;
  for (const NodeFacts& n : s.nodes) {
    if (n.gpu_count > 0 || !n.gpu_product.empty()) out.push_back(&n);
  }
  return out;
}

void add(ValidationReport& out, std::string category, std::string name, std::string subject,
         std::string expected, std::string actual, bool passed, bool skipped = false) {
  CheckResult c{std::move(category), std::move(name),   std::move(subject),
                std::move(expected), std::move(actual), passed};
  c.skipped = skipped;
  out.results.push_back(std::move(c));
}

void check_dra(ValidationReport& out, const Recipe& r, const Snapshot& s) {
  const std::string name = "DRA allocation";
  if (!has_component(r, kDraComponent) && s.resource_slices.empty()) {
    add(out, "conformance", name, "cluster", "GPUs published for DRA",
        "not applicable: the recipe does not enable " + std::string(kDraComponent), true, true);
    return;
  }
  bool has_class = std::find(s.device_classes.begin(), s.device_classes.end(), kGpuDriver) !=
                   s.device_classes.end();
  add(out, "conformance", name + ": DeviceClass", "cluster",
      "DeviceClass " + std::string(kGpuDriver), has_class ? "present" : "not found", has_class);
  std::vector<std::string> missing;
  std::vector<const NodeFacts*> nodes = gpu_nodes(s);
  for (const NodeFacts* n : nodes) {
    bool published = std::any_of(
        s.resource_slices.begin(), s.resource_slices.end(), [&](const ResourceSliceFacts& rs) {
          return rs.node == n->name && rs.driver == kGpuDriver && rs.devices > 0;
        });
    if (!published) missing.push_back(n->name);
  }
  add(out, "conformance", name + ": ResourceSlices", "GPU nodes",
      "every GPU node publishes " + std::string(kGpuDriver) + " devices",
      nodes.empty()     ? "no GPU nodes"
      : missing.empty() ? "all " + std::to_string(nodes.size()) + " publish"
                        : "none published on " + some(missing),
      !nodes.empty() && missing.empty());
}

void check_gang(ValidationReport& out, const Recipe& r, const Snapshot& s) {
  std::vector<std::string> established;
  std::string wanted;
  for (const auto& gang : kGangCrds) {
    // Named members, not a structured binding: clang 14 (the fuzz build) cannot capture one.
    const auto& crd = gang.first;
    const auto& component = gang.second;
    auto it = std::find_if(s.workloads.begin(), s.workloads.end(), [&](const WorkloadState& w) {
      return w.kind == "CustomResourceDefinition" && w.name == crd;
    });
    if (it != s.workloads.end() && it->established) established.push_back(std::string(crd));
    if (has_component(r, component)) wanted = std::string(crd);
  }
  // The recipe's own gang scheduler must be the one that works; otherwise any will do.
  bool ok = wanted.empty()
                ? !established.empty()
                : std::find(established.begin(), established.end(), wanted) != established.end();
  add(out, "conformance", "gang scheduling", "cluster",
      wanted.empty() ? "a gang scheduler's PodGroup CRD Established"
                     : "CRD " + wanted + " Established",
      established.empty() ? "no PodGroup CRD Established (enable kai-scheduler)"
                          : core::join(established),
      ok);
}

void check_metrics(ValidationReport& out, const Snapshot& s) {
  std::vector<const NodeFacts*> nodes = gpu_nodes(s);
  std::vector<const WorkloadState*> exporters;
  for (const WorkloadState& w : s.workloads) {
    if (w.kind == "DaemonSet" && w.name.find("dcgm-exporter") != std::string::npos)
      exporters.push_back(&w);
  }
  const std::string expected =
      "a DCGM exporter ready on every GPU node (" + std::to_string(nodes.size()) + ")";
  if (exporters.empty()) {
    add(out, "conformance", "accelerator metrics", "cluster", expected,
        "no DaemonSet named *dcgm-exporter*", nodes.empty());
    return;
  }
  for (const WorkloadState* w : exporters) {
    bool ok = w->ready == w->desired && w->desired >= static_cast<std::int64_t>(nodes.size());
    add(out, "conformance", "accelerator metrics", "DaemonSet " + w->namespace_ + "/" + w->name,
        expected, std::to_string(w->ready) + "/" + std::to_string(w->desired) + " ready", ok);
  }
}

void check_host_paths(ValidationReport& out, const Recipe& r, const Snapshot& s) {
  // The recipe's own system components (driver, device plugin, toolkit) need the devices.
  std::set<std::string> system;
  for (const Component& c : r.components) system.insert(c.namespace_);
  std::vector<std::string> offenders;
  for (const HostPathDevice& h : s.host_path_devices) {
    if (system.count(h.namespace_)) continue;
    offenders.push_back(h.namespace_ + "/" + h.pod + " (volume " + h.volume + ": " + h.path + ")");
  }
  add(out, "conformance", "no hostPath GPU device access", "workloads",
      "no pod outside the recipe's namespaces mounts /dev, /dev/nvidia* or /dev/dri*",
      offenders.empty() ? "none" : some(offenders), offenders.empty());
}

}  // namespace

void check_releases(ValidationReport& out, const Recipe& recipe, const Snapshot& s) {
  for (const Component& c : recipe.components) {
    const std::string name = "release " + c.name;
    if (c.external) {
      auto it = std::find_if(s.components.begin(), s.components.end(),
                             [&](const InstalledComponent& i) { return i.chart == c.chart.name; });
      std::string actual = it == s.components.end() ? "no release of chart " + c.chart.name
                                                    : it->namespace_ + "/" + it->name + " " +
                                                          it->version + " " + it->status;
      add(out, "release", name, c.name, "external: chart " + c.chart.name + " deployed", actual,
          it != s.components.end() && it->status == "deployed");
      continue;
    }
    auto it =
        std::find_if(s.components.begin(), s.components.end(), [&](const InstalledComponent& i) {
          return i.namespace_ == c.namespace_ && i.name == c.name;
        });
    const std::string expected = c.chart.name + " " + c.chart.version + " deployed";
    if (it == s.components.end()) {
      add(out, "release", name, c.namespace_ + "/" + c.name, expected, "not installed", false);
      continue;
    }
    // "v26.3.2" and "26.3.2" are one version: charts differ in whether they write the v.
    bool version_ok = compare_versions(it->version, c.chart.version) == 0;
    add(out, "release", name, c.namespace_ + "/" + c.name, expected,
        it->chart + " " + it->version + " " + it->status,
        it->chart == c.chart.name && version_ok && it->status == "deployed");
  }
}

void check_operator_resources(ValidationReport& out, const Recipe& recipe, const Snapshot& s) {
  for (const OperatorResource& op : kOperatorResources) {
    if (!has_component(recipe, op.component, false)) continue;
    const std::string name = std::string(op.kind) + " ready";
    bool any = false;
    for (const CustomResourceState& cr : s.custom_resources) {
      if (cr.kind != op.kind) continue;
      any = true;
      add(out, "operator", name,
          std::string(op.kind) + " " + (cr.namespace_.empty() ? "" : cr.namespace_ + "/") + cr.name,
          "status.state ready", cr.state.empty() ? "no state reported" : cr.state,
          cr.state == "ready");
    }
    if (!any) {
      add(out, "operator", name, std::string(op.component), "a " + std::string(op.kind),
          "none found", false);
    }
  }
}

void check_conformance(ValidationReport& out, const Recipe& recipe, const Snapshot& s) {
  check_dra(out, recipe, s);
  check_gang(out, recipe, s);
  check_metrics(out, s);
  check_host_paths(out, recipe, s);
}

}  // namespace gpufleet::recipe::detail
