#include "recipe/snapshot.h"

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/yaml.h"
#include "recipe/schema_check.h"

namespace gpufleet::recipe {

using core::Value;
using detail::check_keys;

std::string NodeFacts::fact(std::string_view name) const {
  if (name == "node.os") return os;
  if (name == "node.osVersion") return os_version;
  if (name == "node.kernel") return kernel;
  if (name == "node.containerRuntime") return container_runtime;
  if (name == "gpu.product") return gpu_product;
  if (name == "gpu.family") return gpu_family;
  if (name == "gpu.driver") return gpu_driver;
  if (name == "gpu.count") return std::to_string(gpu_count);
  return {};
}

namespace {

void put(Value& v, std::string_view key, const std::string& s) {
  if (!s.empty()) v[key] = s;
}

std::string get(const Value& v, std::string_view key, std::string_view where) {
  const Value* f = v.find(key);
  if (f == nullptr || f->is_null()) return {};
  return detail::expect_string(*f, std::string(where) + "." + std::string(key));
}

std::int64_t get_int(const Value& v, std::string_view key, std::string_view where) {
  const Value* f = v.find(key);
  if (f == nullptr || f->is_null()) return 0;
  if (!f->is_int()) {
    throw core::InvalidInput(std::string(where) + "." + std::string(key) +
                             ": expected a whole number");
  }
  return f->as_int();
}

const core::List& list_at(const Value& spec, std::string_view key, std::string_view where) {
  static const core::List kEmpty;
  const Value* f = spec.find(key);
  if (f == nullptr || f->is_null()) return kEmpty;
  return detail::expect_list(*f, std::string(where) + "." + std::string(key));
}

}  // namespace

Value snapshot_to_value(const Snapshot& s) {
  Value doc = Value::map();
  doc["apiVersion"] = "gpufleet.io/v1alpha1";
  doc["kind"] = "Snapshot";
  Value& spec = doc["spec"];
  spec["kubernetes"]["version"] = s.kubernetes_version;
  Value nodes = Value::list();
  for (const NodeFacts& n : s.nodes) {
    Value e = Value::map();
    e["name"] = n.name;
    e["labels"] = n.labels;
    put(e, "providerID", n.provider_id);
    put(e, "instanceType", n.instance_type);
    put(e, "os", n.os);
    put(e, "osVersion", n.os_version);
    put(e, "osImage", n.os_image);
    put(e, "kernel", n.kernel);
    put(e, "containerRuntime", n.container_runtime);
    put(e, "kubelet", n.kubelet);
    if (n.gpu_count > 0 || !n.gpu_product.empty()) {
      Value& g = e["gpu"];
      g = Value::map();
      put(g, "product", n.gpu_product);
      put(g, "family", n.gpu_family);
      put(g, "driver", n.gpu_driver);
      g["count"] = n.gpu_count;
    }
    nodes.push_back(std::move(e));
  }
  spec["nodes"] = std::move(nodes);
  Value comps = Value::list();
  for (const InstalledComponent& c : s.components) {
    Value e = Value::map();
    e["name"] = c.name;
    e["namespace"] = c.namespace_;
    e["chart"] = c.chart;
    e["version"] = c.version;
    put(e, "appVersion", c.app_version);
    e["status"] = c.status;
    e["revision"] = c.revision;
    e["values"] = c.values;
    comps.push_back(std::move(e));
  }
  spec["components"] = std::move(comps);
  Value work = Value::list();
  for (const WorkloadState& w : s.workloads) {
    Value e = Value::map();
    e["kind"] = w.kind;
    put(e, "namespace", w.namespace_);
    e["name"] = w.name;
    if (w.kind == "CustomResourceDefinition") {
      e["established"] = w.established;
    } else {
      e["desired"] = w.desired;
      e["ready"] = w.ready;
      e["updated"] = w.updated;
    }
    work.push_back(std::move(e));
  }
  spec["workloads"] = std::move(work);
  Value pods = Value::list();
  for (const PodProblem& p : s.pod_problems) {
    Value e = Value::map();
    e["namespace"] = p.namespace_;
    e["pod"] = p.pod;
    e["phase"] = p.phase;
    e["container"] = p.container;
    e["init"] = p.init;
    e["reason"] = p.reason;
    pods.push_back(std::move(e));
  }
  spec["podProblems"] = std::move(pods);
  // Written only when present, so snapshots of clusters without them read as before.
  if (!s.custom_resources.empty()) {
    Value list = Value::list();
    for (const CustomResourceState& c : s.custom_resources) {
      Value e = Value::map();
      e["kind"] = c.kind;
      put(e, "namespace", c.namespace_);
      e["name"] = c.name;
      e["state"] = c.state;
      list.push_back(std::move(e));
    }
    spec["customResources"] = std::move(list);
  }
  if (!s.host_path_devices.empty()) {
    Value list = Value::list();
    for (const HostPathDevice& h : s.host_path_devices) {
      Value e = Value::map();
      e["namespace"] = h.namespace_;
      e["pod"] = h.pod;
      e["volume"] = h.volume;
      e["path"] = h.path;
      list.push_back(std::move(e));
    }
    spec["hostPathDevices"] = std::move(list);
  }
  if (!s.device_classes.empty()) {
    Value list = Value::list();
    for (const std::string& d : s.device_classes) list.push_back(d);
    spec["deviceClasses"] = std::move(list);
  }
  if (!s.resource_slices.empty()) {
    Value list = Value::list();
    for (const ResourceSliceFacts& r : s.resource_slices) {
      Value e = Value::map();
      put(e, "node", r.node);
      e["driver"] = r.driver;
      e["devices"] = r.devices;
      list.push_back(std::move(e));
    }
    spec["resourceSlices"] = std::move(list);
  }
  return doc;
}

std::string snapshot_to_yaml(const Snapshot& s) { return core::to_yaml(snapshot_to_value(s)); }

Snapshot snapshot_from_value(const Value& doc, std::string_view source) {
  std::string where(source);
  detail::check_header(doc, "Snapshot", where);
  check_keys(doc.as_map(), {"apiVersion", "kind", "spec"}, where);
  const Value* spec = doc.find("spec");
  if (spec == nullptr) throw core::InvalidInput(where + ": spec: missing");
  std::string sw = where + ": spec";
  check_keys(detail::expect_map(*spec, sw),
             {"kubernetes", "nodes", "components", "workloads", "podProblems", "customResources",
              "hostPathDevices", "deviceClasses", "resourceSlices"},
             sw);
  Snapshot s;
  if (const Value* k = spec->find("kubernetes")) {
    check_keys(detail::expect_map(*k, sw + ".kubernetes"), {"version"}, sw + ".kubernetes");
    s.kubernetes_version = get(*k, "version", sw + ".kubernetes");
  }
  const core::List& nodes = list_at(*spec, "nodes", sw);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Value& e = nodes[i];
    const std::string w = sw + ".nodes[" + std::to_string(i) + "]";
    check_keys(detail::expect_map(e, w),
               {"name", "labels", "providerID", "instanceType", "os", "osVersion", "osImage",
                "kernel", "containerRuntime", "kubelet", "gpu"},
               w);
    NodeFacts n;
    n.name = get(e, "name", w);
    if (const Value* l = e.find("labels")) {
      detail::expect_map(*l, w + ".labels");
      n.labels = *l;
    }
    n.provider_id = get(e, "providerID", w);
    n.instance_type = get(e, "instanceType", w);
    n.os = get(e, "os", w);
    n.os_version = get(e, "osVersion", w);
    n.os_image = get(e, "osImage", w);
    n.kernel = get(e, "kernel", w);
    n.container_runtime = get(e, "containerRuntime", w);
    n.kubelet = get(e, "kubelet", w);
    if (const Value* g = e.find("gpu")) {
      check_keys(detail::expect_map(*g, w + ".gpu"), {"product", "family", "driver", "count"},
                 w + ".gpu");
      n.gpu_product = get(*g, "product", w + ".gpu");
      n.gpu_family = get(*g, "family", w + ".gpu");
      n.gpu_driver = get(*g, "driver", w + ".gpu");
      n.gpu_count = get_int(*g, "count", w + ".gpu");
    }
    s.nodes.push_back(std::move(n));
  }
  const core::List& components = list_at(*spec, "components", sw);
  for (std::size_t i = 0; i < components.size(); ++i) {
    const Value& e = components[i];
    const std::string w = sw + ".components[" + std::to_string(i) + "]";
    check_keys(
        detail::expect_map(e, w),
        {"name", "namespace", "chart", "version", "appVersion", "status", "revision", "values"}, w);
    InstalledComponent c;
    c.name = get(e, "name", w);
    c.namespace_ = get(e, "namespace", w);
    c.chart = get(e, "chart", w);
    c.version = get(e, "version", w);
    c.app_version = get(e, "appVersion", w);
    c.status = get(e, "status", w);
    c.revision = get_int(e, "revision", w);
    if (const Value* v = e.find("values"); v && !v->is_null()) {
      detail::expect_map(*v, w + ".values");
      c.values = *v;
    }
    s.components.push_back(std::move(c));
  }
  const core::List& workloads = list_at(*spec, "workloads", sw);
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    const Value& e = workloads[i];
    const std::string w = sw + ".workloads[" + std::to_string(i) + "]";
    check_keys(detail::expect_map(e, w),
               {"kind", "namespace", "name", "desired", "ready", "updated", "established"}, w);
    WorkloadState ws;
    ws.kind = get(e, "kind", w);
    ws.namespace_ = get(e, "namespace", w);
    ws.name = get(e, "name", w);
    ws.desired = get_int(e, "desired", w);
    ws.ready = get_int(e, "ready", w);
    ws.updated = get_int(e, "updated", w);
    if (const Value* est = e.find("established"))
      ws.established = detail::expect_bool(*est, w + ".established");
    s.workloads.push_back(std::move(ws));
  }
  const core::List& podProblems = list_at(*spec, "podProblems", sw);
  for (std::size_t i = 0; i < podProblems.size(); ++i) {
    const Value& e = podProblems[i];
    const std::string w = sw + ".podProblems[" + std::to_string(i) + "]";
    check_keys(detail::expect_map(e, w),
               {"namespace", "pod", "phase", "container", "init", "reason"}, w);
    PodProblem p;
    p.namespace_ = get(e, "namespace", w);
    p.pod = get(e, "pod", w);
    p.phase = get(e, "phase", w);
    p.container = get(e, "container", w);
    if (const Value* i = e.find("init")) p.init = detail::expect_bool(*i, w + ".init");
    p.reason = get(e, "reason", w);
    s.pod_problems.push_back(std::move(p));
  }
  const core::List& crs = list_at(*spec, "customResources", sw);
  for (std::size_t i = 0; i < crs.size(); ++i) {
    const std::string w = sw + ".customResources[" + std::to_string(i) + "]";
    check_keys(detail::expect_map(crs[i], w), {"kind", "namespace", "name", "state"}, w);
    s.custom_resources.push_back({get(crs[i], "kind", w), get(crs[i], "namespace", w),
                                  get(crs[i], "name", w), get(crs[i], "state", w)});
  }
  const core::List& hps = list_at(*spec, "hostPathDevices", sw);
  for (std::size_t i = 0; i < hps.size(); ++i) {
    const std::string w = sw + ".hostPathDevices[" + std::to_string(i) + "]";
    check_keys(detail::expect_map(hps[i], w), {"namespace", "pod", "volume", "path"}, w);
    s.host_path_devices.push_back({get(hps[i], "namespace", w), get(hps[i], "pod", w),
                                   get(hps[i], "volume", w), get(hps[i], "path", w)});
  }
  const core::List& dcs = list_at(*spec, "deviceClasses", sw);
  for (std::size_t i = 0; i < dcs.size(); ++i) {
    s.device_classes.push_back(
        detail::expect_string(dcs[i], sw + ".deviceClasses[" + std::to_string(i) + "]"));
  }
  const core::List& rss = list_at(*spec, "resourceSlices", sw);
  for (std::size_t i = 0; i < rss.size(); ++i) {
    const std::string w = sw + ".resourceSlices[" + std::to_string(i) + "]";
    check_keys(detail::expect_map(rss[i], w), {"node", "driver", "devices"}, w);
    s.resource_slices.push_back(
        {get(rss[i], "node", w), get(rss[i], "driver", w), get_int(rss[i], "devices", w)});
  }
  return s;
}

Snapshot snapshot_from_text(std::string_view text, std::string_view source) {
  core::DocumentScope scope(source, text);
  return snapshot_from_value(core::parse_yaml(text, source), source);
}

}  // namespace gpufleet::recipe
