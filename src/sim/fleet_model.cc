#include "sim/fleet_model.h"

#include <algorithm>
#include <cstdio>

#include "core/errors.h"
#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

std::string describe_fault(const Fault& f) {
  std::string s(fault_type_name(f.type));
  if (f.type == FaultType::Xid || f.type == FaultType::SXid) s += " " + std::to_string(f.code);
  if (f.gpu) s += " gpu " + std::to_string(*f.gpu);
  if (!f.device.empty()) s += " " + f.device + "/" + std::to_string(f.port);
  if (!f.peer.empty()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " factor %.2f", f.factor);
    s += " to " + f.peer + buf;
  }
  return s;
}

void apply_host(HostModel& h, const HostChange& c) {
  for (const auto& [k, v] : c.sysctls) h.set_sysctl(k, v, c.persist);
  if (!c.kernel_args_add.empty() || !c.kernel_args_remove.empty()) {
    h.change_kernel_args(c.kernel_args_add, c.kernel_args_remove);
  }
  if (!c.kernel.empty()) h.set_kernel(c.kernel);
  if (!c.driver.empty()) h.set_driver(c.driver);
  for (const auto& [path, content] : c.files) h.write_file(path, content);
  if (!c.package_name.empty())
    h.install_package(c.package_name, c.package_version, c.package_reboot);
}

}  // namespace

FleetModel::FleetModel(FleetSpec spec, double now_s) : spec_(std::move(spec)) {
  for (std::size_t p = 0; p < spec_.pools.size(); ++p) {
    for (int i = 0; i < spec_.pools[p].count; ++i) add_node(p, i, now_s);
  }
}

void FleetModel::add_node(std::size_t pool, int index, double now_s) {
  NodeIdentity id = make_node_identity(spec_, pool, index);
  std::string name = id.name;
  auto [it, inserted] = nodes_.emplace(name, nullptr);
  if (!inserted) return;
  it->second = std::make_unique<NodeModel>(spec_, std::move(id), now_s);
  // Keep pool order, then index order.
  auto pos = std::find_if(order_.begin(), order_.end(), [&](const std::string& other) {
    const NodeIdentity& o = nodes_.at(other)->identity();
    return o.pool > pool || (o.pool == pool && o.index > index);
  });
  order_.insert(pos, name);
}

std::vector<std::string> FleetModel::node_names() const { return order_; }

NodeModel* FleetModel::find(std::string_view name) {
  auto it = nodes_.find(std::string(name));
  return it == nodes_.end() ? nullptr : it->second.get();
}

const NodeModel* FleetModel::find(std::string_view name) const {
  auto it = nodes_.find(std::string(name));
  return it == nodes_.end() ? nullptr : it->second.get();
}

bool FleetModel::is_down(std::string_view name) const {
  return down_until_.count(std::string(name)) != 0;
}

double FleetModel::down_until(std::string_view name) const {
  auto it = down_until_.find(std::string(name));
  return it == down_until_.end() ? -1 : it->second;
}

void FleetModel::schedule(SimEvent e) {
  auto pos = std::upper_bound(queue_.begin(), queue_.end(), e.at_s,
                              [](double at, const SimEvent& x) { return at < x.at_s; });
  queue_.insert(pos, std::move(e));
}

std::vector<std::string> FleetModel::targets(const SimEvent& e) {
  std::vector<std::string> out = e.nodes;
  if (!e.pool.empty() && e.kind != EventKind::Scale) {
    std::vector<std::string> members;
    for (const auto& n : order_) {
      if (spec_.pools[nodes_.at(n)->identity().pool].name == e.pool) members.push_back(n);
    }
    if (e.pick > 0 && e.pick < static_cast<int>(members.size())) {
      Rng rng(derive_seed(spec_.seed, "pick/" + e.where + "/" + std::to_string(picks_++)));
      for (std::size_t i = 0; i < static_cast<std::size_t>(e.pick); ++i) {
        std::size_t j = i + rng.below(members.size() - i);
        std::swap(members[i], members[j]);
      }
      members.resize(static_cast<std::size_t>(e.pick));
    }
    out.insert(out.end(), members.begin(), members.end());
  }
  return out;
}

std::vector<AppliedEvent> FleetModel::scale(const std::string& pool, int count, double now_s) {
  std::size_t p = 0;
  for (; p < spec_.pools.size(); ++p) {
    if (spec_.pools[p].name == pool) break;
  }
  if (p == spec_.pools.size()) {
    throw core::InvalidInput("scale: pool \"" + pool + "\" is not a pool of fleet " + spec_.name);
  }
  AppliedEvent ev;
  ev.at_s = now_s;
  ev.kind = EventKind::Scale;
  int old = spec_.pools[p].count;
  ev.what = "scale " + pool + " " + std::to_string(old) + " -> " + std::to_string(count);
  for (int i = old; i < count; ++i) {
    add_node(p, i, now_s);
    ev.added.push_back(make_node_identity(spec_, p, i).name);
  }
  for (int i = old - 1; i >= count; --i) {
    std::string name = make_node_identity(spec_, p, i).name;
    nodes_.erase(name);
    step_injections_.forget(name);
    down_until_.erase(name);
    forget_links(name);
    order_.erase(std::remove(order_.begin(), order_.end(), name), order_.end());
    ev.removed.push_back(name);
  }
  spec_.pools[p].count = count;
  return {ev};
}

std::vector<AppliedEvent> FleetModel::apply(const SimEvent& e, double now_s) {
  if (e.kind == EventKind::Scale) return scale(e.pool, e.count, now_s);
  if (!e.pool.empty() && spec_.find_pool(e.pool) == nullptr) {
    throw core::InvalidInput("pool \"" + e.pool + "\" is not a pool of fleet " + spec_.name);
  }
  std::vector<std::string> names = targets(e);
  for (const auto& n : names) {
    if (find(n) == nullptr) {
      throw core::InvalidInput("node \"" + n + "\" is not a node of fleet " + spec_.name +
                               " (it may have been scaled away)");
    }
  }
  const bool link = e.kind == EventKind::Fault && e.fault.type == FaultType::LinkDegraded;
  if (link) {
    if (names.size() != 1) {
      throw core::InvalidInput("linkDegraded joins one node to its peer, not " +
                               std::to_string(names.size()) + " nodes (name one node)");
    }
    if (find(e.fault.peer) == nullptr) {
      throw core::InvalidInput("linkDegraded peer \"" + e.fault.peer +
                               "\" is not a node of fleet " + spec_.name +
                               " (it may have been scaled away)");
    }
    if (e.fault.peer == names.front()) {
      throw core::InvalidInput("linkDegraded peer \"" + e.fault.peer +
                               "\" is the node itself (name the other end of the link)");
    }
  }
  std::vector<AppliedEvent> out;
  for (const auto& n : names) {
    NodeModel& node = *find(n);
    AppliedEvent ev;
    ev.at_s = now_s;
    ev.kind = e.kind;
    ev.node = n;
    switch (e.kind) {
      case EventKind::Fault:
        if (link) {
          auto key = std::minmax(n, e.fault.peer);
          if (e.fault.factor >= 1.0)
            links_.erase({key.first, key.second});
          else
            links_[{key.first, key.second}] = e.fault.factor;
          node.touch();
          if (NodeModel* peer = find(e.fault.peer)) peer->touch();
        } else {
          node.apply(e.fault, now_s);
          if (e.fault.type == FaultType::Clear && !e.fault.gpu) forget_links(n);
        }
        ev.what = describe_fault(e.fault);
        break;
      case EventKind::Reboot: {
        char buf[64];
        std::snprintf(buf, sizeof buf, "reboot, down %.0fs", e.down_s);
        ev.what = buf;
        down_until_[n] = now_s + e.down_s;
        break;
      }
      case EventKind::Host: {
        apply_host(node.host(), e.host);
        node.touch();
        ev.what = node.host().reboot_required() ? "host change (reboot required)" : "host change";
        break;
      }
      case EventKind::StepOutcome:
        step_injections_.apply(n, e.step);
        ev.what = describe_step_injection(e.step);
        break;
      case EventKind::Scale: break;
    }
    out.push_back(std::move(ev));
  }
  return out;
}

std::vector<AppliedEvent> FleetModel::advance(double now_s) {
  std::vector<AppliedEvent> out;
  while (!queue_.empty() && queue_.front().at_s <= now_s) {
    SimEvent e = std::move(queue_.front());
    queue_.erase(queue_.begin());
    try {
      auto applied = apply(e, e.at_s);
      out.insert(out.end(), applied.begin(), applied.end());
    } catch (const core::InvalidInput& err) {
      AppliedEvent ev;
      ev.at_s = e.at_s;
      ev.kind = e.kind;
      ev.node = e.nodes.empty() ? e.pool : e.nodes.front();
      ev.what = e.where;
      ev.error = err.what();
      out.push_back(std::move(ev));
    }
  }
  for (auto it = down_until_.begin(); it != down_until_.end();) {
    if (it->second <= now_s) {
      NodeModel* node = find(it->first);
      if (node != nullptr) {
        node->reboot(it->second);
        AppliedEvent ev;
        ev.at_s = it->second;
        ev.kind = EventKind::Reboot;
        ev.node = it->first;
        ev.what = "boot " + node->boot_id();
        out.push_back(std::move(ev));
      }
      it = down_until_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& n : order_) nodes_.at(n)->tick(now_s);
  return out;
}

void FleetModel::forget_links(const std::string& node) {
  for (auto it = links_.begin(); it != links_.end();) {
    if (it->first.first == node || it->first.second == node)
      it = links_.erase(it);
    else
      ++it;
  }
}

std::vector<GroupMember> FleetModel::group(const std::vector<std::string>& hosts) const {
  std::vector<GroupMember> out;
  for (const auto& h : hosts) {
    const NodeModel* n = find(h);
    if (n == nullptr) {
      throw core::InvalidInput("NCCL host \"" + h + "\" is not a node of fleet " + spec_.name);
    }
    GroupMember m;
    m.host = h;
    m.pool = &n->pool();
    m.nvlink_domain = n->pool().nodes_per_domain() > 1 ? n->identity().rack_name : h;
    for (std::size_t g = 0; g < n->gpus().size(); ++g) {
      if (n->gpus()[g].present) m.gpu_pci.push_back(n->identity().gpu_pci[g]);
    }
    m.ip = n->identity().internal_ip;
    m.health = n->link_health();
    for (const auto& [ends, factor] : links_) {
      if (ends.first == h) m.health.links.emplace_back(ends.second, factor);
      if (ends.second == h) m.health.links.emplace_back(ends.first, factor);
    }
    if (is_down(h)) {
      m.health.broken = true;
      m.health.failure =
          "Test NCCL failure common.cu:1132 'remote process exited or there was a network error'";
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::size_t FleetModel::write_signals(const std::string& root) const {
  std::size_t n = 0;
  for (const auto& name : order_) n += nodes_.at(name)->write_signal_files(root);
  return n;
}

std::vector<std::pair<std::string, std::string>> FleetModel::take_signal_writes(
    const std::string& root, std::size_t max_nodes) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t taken = 0;
  for (std::size_t seen = 0; seen < order_.size() && taken < max_nodes; ++seen) {
    signal_cursor_ = (signal_cursor_ + 1) % order_.size();
    const NodeModel& n = *nodes_.at(order_[signal_cursor_]);
    if (!n.signals_dirty(root)) continue;
    auto writes = n.take_signal_writes(root);
    out.insert(out.end(), std::make_move_iterator(writes.begin()),
               std::make_move_iterator(writes.end()));
    ++taken;
  }
  return out;
}

core::Value FleetModel::summary(double now_s) const {
  core::Value s;
  s["fleet"] = spec_.name;
  s["simulatedSeconds"] = now_s;
  s["nodes"] = static_cast<std::int64_t>(order_.size());
  std::int64_t down = 0, gpus = 0, healthy = 0, ports = 0, ports_up = 0, broken = 0;
  core::Value pools = core::Value::map();
  core::Value faulty = core::Value::list();
  for (const auto& name : order_) {
    const NodeModel& n = *nodes_.at(name);
    const core::Value* seen = pools.find(n.pool().name);
    std::int64_t in_pool = seen == nullptr ? 1 : seen->as_int() + 1;
    pools[n.pool().name] = in_pool;
    bool is_down_now = is_down(name);
    down += is_down_now ? 1 : 0;
    gpus += n.gpus_present();
    healthy += n.gpus_healthy();
    ports += static_cast<std::int64_t>(n.ports().size());
    ports_up += n.ports_active();
    LinkHealth h = n.link_health();
    bool sick = h.broken || h.network_broken || h.nvlink_factor < 1 || h.network_factor < 1 ||
                h.compute_factor < 1 || h.socket_fallback || n.host().reboot_required();
    if (h.broken) ++broken;
    if (sick && faulty.size() < 50) faulty.push_back(name);
  }
  s["pools"] = std::move(pools);
  s["down"] = down;
  s["gpus"] = gpus;
  s["gpusHealthy"] = healthy;
  s["ibPorts"] = ports;
  s["ibPortsActive"] = ports_up;
  s["brokenNodes"] = broken;
  s["degradedNodes"] = std::move(faulty);
  core::Value links = core::Value::list();
  for (const auto& [ends, factor] : links_) {
    if (links.size() >= 50) break;
    core::Value l;
    l["nodes"].push_back(ends.first);
    l["nodes"].push_back(ends.second);
    l["factor"] = factor;
    links.push_back(std::move(l));
  }
  s["degradedLinks"] = std::move(links);
  s["pendingEvents"] = static_cast<std::int64_t>(queue_.size());
  return s;
}

}  // namespace gpufleet::sim
