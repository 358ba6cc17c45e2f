#include "sim/scenario.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/yaml.h"
#include "sim/atomic_file.h"
#include "sim/node_identity.h"

namespace gpufleet::sim {

using core::describe_value;
using core::fail_field;
using core::FieldReader;
using core::seconds_from;
namespace {

constexpr std::string_view kEventTypes =
    "xid, sxid, ecc, rowRemap, ibPortDown, ibPortUp, ibPortFlap, ibErrors, thermal, gpuLost, "
    "gpuReset, nvlinkDegraded, networkDegraded, linkDegraded, clear, maintenance, reboot, scale, "
    "host, hostStep, stagePod";

std::vector<std::string> string_list(FieldReader& r, std::string_view key, std::string_view fix) {
  std::vector<std::string> out;
  const core::Value* v = r.get(key);
  if (v == nullptr) return out;
  if (!v->is_list()) r.fail(key, *v, "is not a list", fix);
  for (std::size_t i = 0; i < v->size(); ++i) {
    const core::Value& item = (*v)[i];
    if (!item.is_string() || item.as_string().empty()) {
      fail_field(r.source(), r.field(key) + "[" + std::to_string(i) + "]",
                 "value " + describe_value(item) + " is not a non-empty string", fix);
    }
    out.push_back(item.as_string());
  }
  return out;
}

HostChange parse_host_change(FieldReader& r) {
  HostChange h;
  for (const auto& e : r.string_map("sysctl")) h.sysctls[e.key] = e.value.as_string();
  h.persist = r.boolean("persist", true);
  if (const core::Value* kv = r.get("kernelArgs")) {
    FieldReader k(*kv, r.source(), r.field("kernelArgs"));
    h.kernel_args_add = string_list(k, "add", "list arguments such as hugepagesz=1G");
    h.kernel_args_remove = string_list(k, "remove", "list argument keys such as iommu");
    k.done();
  }
  h.kernel = r.string("kernel", "");
  h.driver = r.string("driver", "");
  if (const core::Value* fv = r.get("file")) {
    FieldReader f(*fv, r.source(), r.field("file"));
    std::string path = f.required_string("path", "an absolute path such as /etc/foo.conf");
    if (path[0] != '/') {
      f.fail("path", core::Value(path), "is not absolute", "start it with /");
    }
    h.files[path] = f.string("content", "");
    f.done();
  }
  if (const core::Value* pv = r.get("package")) {
    FieldReader p(*pv, r.source(), r.field("package"));
    h.package_name = p.required_string("name", "the package name, e.g. nvidia-fabricmanager");
    h.package_version = p.required_string("version", "the version, e.g. 570.148.08");
    h.package_reboot = p.boolean("reboot", false);
    p.done();
  }
  if (h.sysctls.empty() && h.kernel_args_add.empty() && h.kernel_args_remove.empty() &&
      h.kernel.empty() && h.driver.empty() && h.files.empty() && h.package_name.empty()) {
    fail_field(r.source(), r.path(), "is a host event that changes nothing",
               "give sysctl, kernelArgs, kernel, driver, file or package");
  }
  return h;
}

}  // namespace

SimEvent parse_event(const core::Value& v, std::string_view source_view, std::string_view path,
                     bool require_at) {
  std::string source(source_view);
  FieldReader r(v, source, std::string(path));
  SimEvent e;
  e.where = std::string(path);
  if (require_at || r.has("at")) {
    const core::Value* at = r.get("at");
    if (at == nullptr) {
      fail_field(source, r.field("at"), "is required", "when it happens: 30, \"90s\", \"2m\"");
    }
    e.at_s = seconds_from(*at, source, r.field("at"));
  }
  if (r.has("node")) e.nodes.push_back(r.required_string("node", "a node name"));
  for (auto& n : string_list(r, "nodes", "list node names")) e.nodes.push_back(std::move(n));
  e.pool = r.string("pool", "");
  e.pick = static_cast<int>(r.integer("pick", 0, 0, 100000, "how many nodes of the pool to pick"));
  r.get("comment");
  std::string type =
      r.required_string("type", std::string("use one of: ") + std::string(kEventTypes));
  if (type == "reboot") {
    e.kind = EventKind::Reboot;
    if (const core::Value* d = r.get("down")) e.down_s = seconds_from(*d, source, r.field("down"));
  } else if (type == "scale") {
    e.kind = EventKind::Scale;
    if (e.pool.empty())
      fail_field(source, r.field("pool"), "is required for scale", "name the pool");
    e.count = static_cast<int>(r.integer("count", std::nullopt, 0, 20000, "the pool's new size"));
  } else if (type == "host") {
    e.kind = EventKind::Host;
    e.host = parse_host_change(r);
  } else if (type == "hostStep" || type == "stagePod") {
    e.kind = EventKind::StepOutcome;
    e.step = parse_step_injection(r, type == "stagePod");
  } else if (fault_type_from_name(type)) {
    e.kind = EventKind::Fault;
    core::Value fault = core::Value::map();
    fault["type"] = type;
    if (const core::Map* m = v.if_map()) {
      for (const auto& entry : *m) {
        if (entry.key == "type" || !is_fault_field(entry.key)) continue;
        r.get(entry.key);
        fault[entry.key] = entry.value;
      }
    }
    e.fault = parse_fault(fault, source, path);
  } else {
    r.fail("type", core::Value(type), "is not an event type",
           std::string("use one of: ") + std::string(kEventTypes));
  }
  r.done();
  if (e.kind != EventKind::Scale && e.nodes.empty() && e.pool.empty()) {
    fail_field(source, r.field("node"), "is required (or nodes, or pool)",
               "name the node the event happens on");
  }
  if (e.kind == EventKind::Scale && !e.nodes.empty()) {
    fail_field(source, r.field("node"), "does not apply to scale", "remove it; scale takes a pool");
  }
  if (e.kind == EventKind::Fault && e.fault.type == FaultType::LinkDegraded) {
    if (!e.pool.empty() || e.nodes.size() != 1) {
      fail_field(source, r.field(e.pool.empty() ? "nodes" : "pool"),
                 "does not apply to linkDegraded (a link joins exactly two nodes)",
                 "name one end as node and the other as peer");
    }
    if (e.fault.peer == e.nodes.front()) {
      r.fail("peer", core::Value(e.fault.peer), "is the node itself",
             "name the node at the other end of the link");
    }
  }
  return e;
}

core::Value event_to_value(const SimEvent& e) {
  core::Value v;
  if (e.kind == EventKind::Fault) v = fault_to_value(e.fault);
  if (e.kind == EventKind::StepOutcome) v = step_injection_to_value(e.step);
  v["at"] = e.at_s;
  if (!e.nodes.empty()) {
    for (const auto& n : e.nodes) v["nodes"].push_back(n);
  }
  if (!e.pool.empty()) v["pool"] = e.pool;
  if (e.pick > 0) v["pick"] = e.pick;
  switch (e.kind) {
    case EventKind::Fault: break;
    case EventKind::Reboot:
      v["type"] = "reboot";
      v["down"] = e.down_s;
      break;
    case EventKind::Scale:
      v["type"] = "scale";
      v["count"] = e.count;
      break;
    case EventKind::Host: v["type"] = "host"; break;
    case EventKind::StepOutcome: break;  // its type came with its fields
  }
  return v;
}

Scenario parse_scenario(const core::Value& doc, std::string_view source_view,
                        const std::string& base_dir) {
  std::string source(source_view);
  FieldReader top(doc, source, "");
  std::string api = top.required_string("apiVersion", "write apiVersion: gpufleet.io/v1alpha1");
  if (api != "gpufleet.io/v1alpha1") {
    top.fail("apiVersion", core::Value(api), "is not supported", "write gpufleet.io/v1alpha1");
  }
  std::string kind = top.required_string("kind", "write kind: Scenario");
  if (kind != "Scenario")
    top.fail("kind", core::Value(kind), "is not Scenario", "write kind: Scenario");
  Scenario sc;
  if (const core::Value* mv = top.get("metadata")) {
    FieldReader m(*mv, source, "metadata");
    sc.name = m.required_string("name", "name the scenario");
    m.done();
  }
  const core::Value* sv = top.get("spec");
  top.done();
  if (sv == nullptr)
    fail_field(source, "spec", "is required", "add spec: {fleet: ..., timeline: [...]}");
  FieldReader spec(*sv, source, "spec");
  auto resolve = [&](const std::string& p) {
    return std::filesystem::path(p).is_absolute() ? p
                                                  : (std::filesystem::path(base_dir) / p).string();
  };
  const core::Value* fv = spec.get("fleet");
  if (fv == nullptr) {
    fail_field(source, "spec.fleet", "is required", "give a fleet file path or an inline Fleet");
  } else if (fv->is_string()) {
    try {
      sc.fleet = load_fleet_file(resolve(fv->as_string()));
    } catch (const core::InvalidInput& e) {
      // Name the scenario too: the user gave that file, not the fleet file.
      throw core::InvalidInput(std::string(source) + ": spec.fleet: " + e.what());
    }
  } else if (fv->is_map()) {
    sc.fleet = parse_fleet(*fv, source + " spec.fleet");
  } else {
    spec.fail("fleet", *fv, "is neither a path nor a Fleet document",
              "write fleet: fleet-h100.yaml or an inline kind: Fleet map");
  }
  if (spec.has("seed")) {
    sc.fleet.seed =
        static_cast<std::uint64_t>(spec.integer("seed", 1, 0, INT64_MAX, "a non-negative integer"));
  }
  if (const core::Value* d = spec.get("duration"))
    sc.duration_s = seconds_from(*d, source, "spec.duration");
  if (const core::Value* bv = spec.get("behaviours")) {
    if (bv->is_string()) {
      sc.behaviours = BehaviourTable::load_file(resolve(bv->as_string()));
    } else {
      sc.behaviours = BehaviourTable::parse_list(*bv, source, "spec.behaviours");
    }
  }
  const core::Value* tv = spec.get("timeline");
  spec.done();
  if (tv != nullptr) {
    if (!tv->is_list()) spec.fail("timeline", *tv, "is not a list", "list events as - at: 30s ...");
    for (std::size_t i = 0; i < tv->size(); ++i) {
      sc.timeline.push_back(
          parse_event((*tv)[i], source, "spec.timeline[" + std::to_string(i) + "]", true));
    }
  }
  std::stable_sort(sc.timeline.begin(), sc.timeline.end(),
                   [](const SimEvent& a, const SimEvent& b) { return a.at_s < b.at_s; });

  // Every target must exist at some point: the fleet as given, grown by any scale-up.
  FleetSpec widest = sc.fleet;
  for (const auto& e : sc.timeline) {
    if (!e.pool.empty() && widest.find_pool(e.pool) == nullptr) {
      std::string pools;
      for (const auto& p : widest.pools) pools += (pools.empty() ? "" : ", ") + p.name;
      fail_field(source, e.where + ".pool", "value \"" + e.pool + "\" is not a pool of the fleet",
                 "use one of: " + pools);
    }
    if (e.kind == EventKind::Scale) {
      for (auto& p : widest.pools) {
        if (p.name == e.pool) p.count = std::max(p.count, e.count);
      }
    }
  }
  std::set<std::string> names;
  for (const auto& id : expand_fleet(widest)) names.insert(id.name);
  for (const auto& e : sc.timeline) {
    for (const auto& n : e.nodes) {
      if (names.count(n) == 0) {
        fail_field(source, e.where + ".node", "value \"" + n + "\" is not a node of the fleet",
                   "use a node name the fleet's name patterns produce, e.g. " + *names.begin());
      }
    }
    if (!e.fault.peer.empty() && names.count(e.fault.peer) == 0) {
      fail_field(source, e.where + ".peer",
                 "value \"" + e.fault.peer + "\" is not a node of the fleet",
                 "use a node name the fleet's name patterns produce, e.g. " + *names.begin());
    }
  }
  return sc;
}

Scenario load_scenario_file(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string text = read_text_file(path);
  core::DocumentScope scope(path, text);
  return parse_scenario(core::parse_yaml(text, path), path, dir.empty() ? "." : dir);
}

}  // namespace gpufleet::sim
