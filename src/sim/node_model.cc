#include "sim/node_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "core/errors.h"
#include "core/json.h"
#include "core/time.h"
#include "core/xid_catalog.h"
#include "sim/atomic_file.h"
#include "sim/node_object.h"
#include "sim/xid_text.h"

namespace gpufleet::sim {
namespace {

// Microseconds a node has been up when the simulator first sees it boot.
constexpr std::uint64_t kBootOffsetUs = 11'873'402;

std::uint64_t saturating_add(std::uint64_t v, std::uint64_t add, std::uint64_t max) {
  return v + add > max ? max : v + add;
}

const char* ib_state_text(int s) {
  switch (s) {
    case 1: return "1: DOWN";
    case 2: return "2: INIT";
    case 3: return "3: ARMED";
    case 4: return "4: ACTIVE";
    case 5: return "5: ACTIVE_DEFER";
    default: return "0: NOP";
  }
}

const char* ib_phys_text(int s) {
  switch (s) {
    case 2: return "2: Polling";
    case 3: return "3: Disabled";
    case 5: return "5: LinkUp";
    case 6: return "6: LinkErrorRecovery";
    default: return "1: Sleep";
  }
}

}  // namespace

const char* NodeModel::gpu_query_fields() {
  return "index,pci.bus_id,uuid,name,memory.total,temperature.gpu,"
         "clocks_event_reasons.hw_thermal_slowdown,ecc.errors.corrected.volatile.total,"
         "ecc.errors.uncorrected.volatile.total,remapped_rows.correctable,"
         "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure";
}

NodeModel::NodeModel(const FleetSpec& fleet, NodeIdentity id, double now_s)
    : fleet_(&fleet),
      pool_(&fleet.pools.at(id.pool)),
      id_(std::move(id)),
      rng_(derive_seed(id_.seed, "faults")),
      boot_at_s_(now_s),
      host_(pool_->kernel_version, pool_->driver_version, pool_->kernel_args) {
  boot_id_ = boot_id_for(id_, 0);
  gpus_.resize(static_cast<std::size_t>(pool_->gpus_per_node));
  for (auto& g : gpus_) {
    g.nvlinks_active = pool_->gpu->nvlinks_per_gpu;
    g.temperature_c = 30 + static_cast<int>(rng_.below(10));
  }
  for (const auto& dev : id_.ib_devices) {
    for (int p = 1; p <= pool_->network.ports_per_device; ++p) {
      IbPortState port;
      port.device = dev;
      port.port = p;
      ports_.push_back(std::move(port));
    }
  }
  for (const auto& e : pool_->sysctls) host_.set_sysctl(e.key, e.value.as_string(), true);
  boot_banner();
}

void NodeModel::log(int prio, double now_s, const std::string& text) {
  double since = now_s - boot_at_s_;
  std::uint64_t usec = kBootOffsetUs + static_cast<std::uint64_t>(since > 0 ? since * 1e6 : 0);
  if (!kmsg_.records().empty()) usec = std::max(usec, kmsg_.records().back().usec + 1);
  kmsg_.append(prio, usec, text);
}

void NodeModel::boot_banner() {
  bool arm = pool_->gpu->arch == "arm64";
  kmsg_.append(
      kKernNotice, 0,
      "Linux version " + host_.kernel_version() + " (buildd@gpufleet-sim) (gcc 12.3.0) #1 SMP");
  kmsg_.append(kKernInfo, 0, "Command line: " + host_.cmdline());
  kmsg_.append(kKernWarning, 4'102'331, "nvidia: loading out-of-tree module taints kernel.");
  kmsg_.append(kKernInfo, 4'215'870,
               std::string("NVRM: loading NVIDIA UNIX Open Kernel Module for ") +
                   (arm ? "aarch64" : "x86_64") + "  " + host_.driver_version() +
                   "  Release Build  (gpufleet-sim)");
}

GpuState& NodeModel::gpu_at(const Fault& f, const char* what) {
  int g = f.gpu.value_or(-1);
  if (g < 0 || g >= static_cast<int>(gpus_.size())) {
    throw core::InvalidInput("gpu " + std::to_string(g) + " does not exist on node " + id_.name +
                             " (it has GPUs 0.." + std::to_string(gpus_.size() - 1) + ")");
  }
  GpuState& s = gpus_[static_cast<std::size_t>(g)];
  if (!s.present) {
    throw core::InvalidInput(std::string(what) + ": gpu " + std::to_string(g) + " on node " +
                             id_.name + " is lost from the bus (clear the node first)");
  }
  return s;
}

IbPortState& NodeModel::port_at(const std::string& device, int port) {
  for (auto& p : ports_) {
    if (p.device == device && p.port == port) return p;
  }
  std::string known;
  for (const auto& d : id_.ib_devices) known += (known.empty() ? "" : ", ") + d;
  throw core::InvalidInput("InfiniBand port " + device + "/" + std::to_string(port) +
                           " does not exist on node " + id_.name +
                           " (devices: " + (known.empty() ? "none" : known) + ")");
}

void NodeModel::log_xid(int gpu, int code, double now_s, const Fault* f) {
  std::string message = f != nullptr && !f->text.empty()
                            ? f->text
                            : xid_message(code, rng_, f != nullptr ? f->link : -1);
  std::optional<int> pid = f != nullptr ? f->pid : std::nullopt;
  std::string process = f != nullptr ? f->process : "";
  log(kKernWarning, now_s,
      xid_line(xid_pci_address(id_.gpu_pci[static_cast<std::size_t>(gpu)]), code, pid, process,
               message));
}

void NodeModel::set_recovery(int gpu, RecoveryAction to, double now_s) {
  GpuState& g = gpus_[static_cast<std::size_t>(gpu)];
  // The driver only escalates on its own; an explicit Xid 154 may set any action.
  RecoveryAction from = g.recovery;
  g.recovery = to;
  log(kKernWarning, now_s,
      xid_line(xid_pci_address(id_.gpu_pci[static_cast<std::size_t>(gpu)]), 154, std::nullopt, "",
               xid154_message(from, to)));
}

void NodeModel::port_down(IbPortState& p) {
  if (p.state != 4) return;
  p.state = 1;
  p.phys_state = 2;
  p.link_downed = saturating_add(p.link_downed, 1, 255);
  p.link_error_recovery = saturating_add(p.link_error_recovery, 1, 255);
  p.symbol_error = saturating_add(p.symbol_error, 20 + rng_.below(400), 65535);
}

void NodeModel::port_up(IbPortState& p) {
  p.state = 4;
  p.phys_state = 5;
}

void NodeModel::apply_xid_effect(GpuState& g, int gpu, core::XidEffect effect, double now_s) {
  switch (effect) {
    case core::XidEffect::None: break;
    case core::XidEffect::FallenOff: g.fallen_off = true; break;
    case core::XidEffect::DoubleBitEcc:
      g.ecc_uncorrected += 1;
      if (!g.remap_pending) {
        g.remap_pending = true;
        log_xid(gpu, 63, now_s, nullptr);
      }
      break;
    case core::XidEffect::RowRemapPending: g.remap_pending = true; break;
    case core::XidEffect::RowRemapFailure: g.remap_failure = true; break;
    case core::XidEffect::SingleBitEccBurst: g.ecc_corrected += 1000; break;
    case core::XidEffect::ContainedEcc: g.ecc_uncorrected += 1; break;
    case core::XidEffect::NvlinkDown: g.nvlinks_active = std::max(0, g.nvlinks_active - 1); break;
  }
}

// An NVRM Xid: the driver line, then what the catalog says the code does.
void NodeModel::apply_xid(const Fault& f, double now_s) {
  auto gpu_index = [&] { return f.gpu.value_or(0); };
  if (f.code == 154) {
    gpu_at(f, "xid 154");
    set_recovery(gpu_index(), f.action.value_or(RecoveryAction::None), now_s);
    return;
  }
  GpuState& g = gpu_at(f, "xid");
  log_xid(gpu_index(), f.code, now_s, &f);
  auto escalate = [&](RecoveryAction a) {
    if (g.recovery < a || g.recovery == RecoveryAction::DrainP2P) {
      set_recovery(gpu_index(), f.action.value_or(a), now_s);
    }
  };
  const core::XidInfo* info = core::XidCatalog::builtin().find(f.code);
  if (info == nullptr) return;  // an Xid the catalog does not know changes nothing
  apply_xid_effect(g, gpu_index(), info->effect, now_s);
  // The driver escalates its recovery action as NVIDIA recommends for the code.
  if (info->action == core::XidAction::ResetGpu) escalate(RecoveryAction::GpuReset);
  if (info->action == core::XidAction::RebootNode) escalate(RecoveryAction::NodeReboot);
}

// An NVSwitch SXid; a fatal one takes the switch's links out.
void NodeModel::apply_sxid(const Fault& f, double now_s) {
  if (f.nvswitch < 0 || f.nvswitch >= static_cast<int>(id_.nvswitch_pci.size())) {
    throw core::InvalidInput(
        "nvswitch " + std::to_string(f.nvswitch) + " does not exist on node " + id_.name +
        (id_.nvswitch_pci.empty()
             ? " (its NVSwitches are outside the node, as on GB200 racks)"
             : " (it has NVSwitches 0.." + std::to_string(id_.nvswitch_pci.size() - 1) + ")"));
  }
  int link = f.link >= 0 ? f.link : static_cast<int>(rng_.below(64));
  log(kKernWarning, now_s,
      sxid_line(f.nvswitch, id_.nvswitch_pci[static_cast<std::size_t>(f.nvswitch)], f.code, link,
                f.text));
  if (sxid_is_fatal(f.code)) {
    // A fatal SXid takes the switch's share of every GPU's links out of service.
    int share = pool_->gpu->nvlinks_per_gpu / static_cast<int>(id_.nvswitch_pci.size());
    for (auto& g : gpus_) g.nvlinks_active = std::max(0, g.nvlinks_active - share);
  }
}

// ECC errors and row remapping: counters, the Xids the driver prints, a GPU reset wanted.
void NodeModel::apply_memory_error(const Fault& f, double now_s) {
  auto gpu_index = [&] { return f.gpu.value_or(0); };
  switch (f.type) {
    case FaultType::Ecc: {
      GpuState& g = gpu_at(f, "ecc");
      if (f.ecc_kind == "singleBit") {
        g.ecc_corrected += static_cast<std::uint64_t>(f.count);
      } else {
        for (int i = 0; i < f.count; ++i) {
          g.ecc_uncorrected += 1;
          log_xid(gpu_index(), 48, now_s, nullptr);
          if (!g.remap_pending) {
            g.remap_pending = true;
            log_xid(gpu_index(), 63, now_s, nullptr);
          }
        }
        if (g.recovery < RecoveryAction::GpuReset) {
          set_recovery(gpu_index(), RecoveryAction::GpuReset, now_s);
        }
      }
      break;
    }
    case FaultType::RowRemap: {
      GpuState& g = gpu_at(f, "rowRemap");
      if (f.remap_kind == "pending") {
        g.remap_pending = true;
        log_xid(gpu_index(), 63, now_s, nullptr);
      } else {
        g.remap_failure = true;
        log_xid(gpu_index(), 64, now_s, nullptr);
        if (g.recovery < RecoveryAction::GpuReset) {
          set_recovery(gpu_index(), RecoveryAction::GpuReset, now_s);
        }
      }
      break;
    }
    default: break;
  }
}

// InfiniBand ports: down, up, flapping, error counters.
void NodeModel::apply_port_fault(const Fault& f, double now_s) {
  switch (f.type) {
    case FaultType::IbPortDown: {
      IbPortState& p = port_at(f.device, f.port);
      p.flaps_left = 0;
      port_down(p);
      break;
    }
    case FaultType::IbPortUp: {
      IbPortState& p = port_at(f.device, f.port);
      p.flaps_left = 0;
      port_up(p);
      break;
    }
    case FaultType::IbPortFlap: {
      IbPortState& p = port_at(f.device, f.port);
      if (p.state != 4) port_up(p);
      p.flaps_left = f.count * 2;
      p.flap_half_period = f.period_s / 2;
      p.next_flap_at = now_s;
      tick(now_s);
      break;
    }
    case FaultType::IbErrors: {
      IbPortState& p = port_at(f.device, f.port);
      auto n = static_cast<std::uint64_t>(f.count);
      p.symbol_error = saturating_add(p.symbol_error, n, 65535);
      p.link_error_recovery = saturating_add(p.link_error_recovery, n / 50 + 1, 255);
      p.port_rcv_errors = saturating_add(p.port_rcv_errors, n / 10, 65535);
      break;
    }
    default: break;
  }
}

// Whole-GPU state: thermal slowdown, lost from the bus, reset.
void NodeModel::apply_gpu_state(const Fault& f, double now_s) {
  auto gpu_index = [&] { return f.gpu.value_or(0); };
  switch (f.type) {
    case FaultType::Thermal: {
      for (std::size_t i = 0; i < gpus_.size(); ++i) {
        if (f.gpu && static_cast<int>(i) != *f.gpu) continue;
        if (f.gpu) gpu_at(f, "thermal");
        gpus_[i].thermal_slowdown = f.active;
        gpus_[i].temperature_c =
            f.active ? 91 + static_cast<int>(rng_.below(5)) : 36 + static_cast<int>(rng_.below(6));
      }
      break;
    }
    case FaultType::GpuLost: {
      GpuState& g = gpu_at(f, "gpuLost");
      const std::string& bus = id_.gpu_pci[static_cast<std::size_t>(gpu_index())];
      std::string pci = xid_pci_address(bus) + ".0";
      log(kKernErr, now_s,
          "pcieport " + pci.substr(0, 8) + "00.0: pciehp: Slot(" + std::to_string(gpu_index() + 1) +
              "): Link Down");
      log(kKernErr, now_s, "NVRM: GPU " + pci + ": GPU has fallen off the bus.");
      g.present = false;
      break;
    }
    case FaultType::GpuReset: {
      std::optional<int> only = f.gpu;
      if (!f.uuid.empty()) {
        auto it = std::find(id_.gpu_uuid.begin(), id_.gpu_uuid.end(), f.uuid);
        if (it == id_.gpu_uuid.end())
          throw core::InvalidInput("gpuReset: uuid \"" + f.uuid + "\" is not a GPU of node " +
                                   id_.name + " (its GPU 0 is " +
                                   (id_.gpu_uuid.empty() ? "none" : id_.gpu_uuid.front()) +
                                   "); name one of its GPUs");
        only = static_cast<int>(it - id_.gpu_uuid.begin());
        // A GPU named by UUID is reset only when something is wrong with it: a reset of a
        // healthy GPU would throw away its counters for nothing.
        const GpuState& n = gpus_[static_cast<std::size_t>(*only)];
        const bool faulty = !n.present || n.fallen_off || n.recovery != RecoveryAction::None ||
                            n.ecc_uncorrected > 0 || n.remap_pending || n.remap_failure ||
                            n.nvlinks_active < pool_->gpu->nvlinks_per_gpu;
        if (!faulty) break;
      }
      for (std::size_t i = 0; i < gpus_.size(); ++i) {
        if (only && static_cast<int>(i) != *only) continue;
        GpuState& g = gpus_[i];
        if (!g.present || g.fallen_off) {
          throw core::InvalidInput("gpu " + std::to_string(i) + " on node " + id_.name +
                                   " cannot be reset: it is off the bus (reboot the node)");
        }
        if (g.remap_pending) {
          g.remap_pending = false;
          g.remapped_uncorrectable += 1;
        }
        g.ecc_corrected = 0;
        g.ecc_uncorrected = 0;
        g.nvlinks_active = pool_->gpu->nvlinks_per_gpu;
        if (g.recovery != RecoveryAction::None) {
          set_recovery(static_cast<int>(i), RecoveryAction::None, now_s);
        }
      }
      break;
    }
    default: break;
  }
}

// Bandwidth degradation of NVLink or the network, per GPU/port or node-wide.
void NodeModel::apply_degradation(const Fault& f) {
  switch (f.type) {
    case FaultType::NvlinkDegraded:
      if (f.gpu) {
        GpuState& g = gpu_at(f, "nvlinkDegraded");
        g.nvlinks_active = std::max(0, g.nvlinks_active - f.count);
      } else {
        nvlink_factor_ = f.factor;
      }
      break;
    case FaultType::NetworkDegraded:
      if (!f.device.empty()) {
        IbPortState& p = port_at(f.device, f.port);
        p.width = f.factor <= 0.25 ? 1 : f.factor <= 0.5 ? 2 : 4;
      } else {
        network_factor_ = f.factor;
      }
      break;
    default: break;
  }
}

// Back to healthy: one GPU, or the whole node with its ports and bandwidth.
void NodeModel::apply_clear(const Fault& f) {
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    if (f.gpu && static_cast<int>(i) != *f.gpu) continue;
    GpuState fresh;
    fresh.nvlinks_active = pool_->gpu->nvlinks_per_gpu;
    fresh.temperature_c = 36;
    fresh.remapped_correctable = gpus_[i].remapped_correctable;
    fresh.remapped_uncorrectable = gpus_[i].remapped_uncorrectable;
    gpus_[i] = fresh;
  }
  if (!f.gpu) {
    for (auto& p : ports_) {
      p.flaps_left = 0;
      p.width = 4;
      port_up(p);
    }
    nvlink_factor_ = 1.0;
    network_factor_ = 1.0;
    socket_fallback_ = false;
  }
}

// One dispatch per kind of fault; each helper below owns one seam of the model.
void NodeModel::apply(const Fault& f, double now_s) {
  switch (f.type) {
    case FaultType::Xid: apply_xid(f, now_s); break;
    case FaultType::SXid: apply_sxid(f, now_s); break;
    case FaultType::Ecc:
    case FaultType::RowRemap: apply_memory_error(f, now_s); break;
    case FaultType::IbPortDown:
    case FaultType::IbPortUp:
    case FaultType::IbPortFlap:
    case FaultType::IbErrors: apply_port_fault(f, now_s); break;
    case FaultType::Thermal:
    case FaultType::GpuLost:
    case FaultType::GpuReset: apply_gpu_state(f, now_s); break;
    case FaultType::NvlinkDegraded:
    case FaultType::NetworkDegraded: apply_degradation(f); break;
    case FaultType::Clear: apply_clear(f); break;
    case FaultType::LinkDegraded: break;  // between two nodes: the fleet keeps it (FleetModel)
    case FaultType::Maintenance: apply_maintenance(f, now_s); break;
    case FaultType::SocketFallback: socket_fallback_ = f.active; break;
  }
  touch();
}

void NodeModel::apply_maintenance(const Fault& f, double now_s) {
  ++maintenance_incarnation_;
  if (!f.active) {  // the cloud cancelled what it had scheduled
    maintenance_.clear();
    return;
  }
  MaintenanceWindow w;
  w.id = id_.name + "-maintenance-" + std::to_string(++maintenance_seq_);
  w.kind = f.maintenance_kind;
  w.start_s = now_s + f.starts_in_s;
  w.duration_s = f.duration_s;
  const auto wall = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  w.not_before_unix = wall + static_cast<std::int64_t>(f.starts_in_s);
  w.started = f.starts_in_s <= 0;
  maintenance_.push_back(std::move(w));
}

std::string NodeModel::render_scheduled_events() const {
  core::Value doc = core::Value::map();
  doc["DocumentIncarnation"] = maintenance_incarnation_;
  core::Value events = core::Value::list();
  for (const auto& w : maintenance_) {
    core::Value e = core::Value::map();
    e["EventId"] = w.id;
    e["EventType"] = w.kind;
    e["ResourceType"] = "VirtualMachine";
    e["Resources"].push_back(id_.name);
    e["EventStatus"] = w.started ? "Started" : "Scheduled";
    // Azure leaves NotBefore empty once the event started.
    e["NotBefore"] =
        w.started ? std::string() : core::Timestamp{w.not_before_unix, 0}.to_http_date();
    e["Description"] = "simulated host maintenance";
    e["EventSource"] = "Platform";
    e["DurationInSeconds"] = static_cast<std::int64_t>(w.duration_s);
    events.push_back(std::move(e));
  }
  doc["Events"] = std::move(events);
  return core::to_json(doc) + "\n";
}

bool NodeModel::tick(double now_s) {
  bool changed = false;
  for (auto& p : ports_) {
    while (p.flaps_left > 0 && p.next_flap_at <= now_s) {
      if (p.state == 4) {
        port_down(p);
      } else {
        port_up(p);
      }
      --p.flaps_left;
      p.next_flap_at += p.flap_half_period;
      changed = true;
    }
  }
  // Maintenance windows open (Started) and, once over, leave the document.
  for (auto it = maintenance_.begin(); it != maintenance_.end();) {
    if (!it->started && it->start_s <= now_s) {
      it->started = true;
      changed = true;
      ++maintenance_incarnation_;
    }
    if (it->start_s + it->duration_s <= now_s) {
      it = maintenance_.erase(it);
      changed = true;
      ++maintenance_incarnation_;
    } else {
      ++it;
    }
  }
  if (changed) touch();
  return changed;
}

void NodeModel::reboot(double now_s) {
  ++boot_count_;
  boot_id_ = boot_id_for(id_, boot_count_);
  boot_at_s_ = now_s;
  kmsg_.reset();
  host_.reboot();
  for (auto& g : gpus_) {
    if (!g.present) continue;
    g.fallen_off = false;
    if (g.remap_pending) {
      g.remap_pending = false;
      g.remapped_uncorrectable += 1;
    }
    g.ecc_corrected = 0;
    g.ecc_uncorrected = 0;
    g.recovery = RecoveryAction::None;
    g.nvlinks_active = pool_->gpu->nvlinks_per_gpu;
    g.thermal_slowdown = false;
    g.temperature_c = 30 + static_cast<int>(rng_.below(10));
  }
  boot_banner();
  touch();
}

int NodeModel::gpus_present() const {
  return static_cast<int>(
      std::count_if(gpus_.begin(), gpus_.end(), [](const GpuState& g) { return g.present; }));
}

int NodeModel::gpus_healthy() const {
  return static_cast<int>(std::count_if(gpus_.begin(), gpus_.end(), [](const GpuState& g) {
    return g.present && !g.fallen_off && !g.remap_failure;
  }));
}

int NodeModel::ports_active() const {
  return static_cast<int>(std::count_if(ports_.begin(), ports_.end(),
                                        [](const IbPortState& p) { return p.state == 4; }));
}

LinkHealth NodeModel::link_health() const {
  LinkHealth h;
  const int links = pool_->gpu->nvlinks_per_gpu;
  double worst_links = 1.0;
  for (const auto& g : gpus_) {
    if (!g.present) {
      h.broken = true;
      h.failure = "Test CUDA failure common.cu:1095 'invalid device ordinal'";
      continue;
    }
    if (g.fallen_off) {
      h.broken = true;
      h.failure = "Test CUDA failure common.cu:1125 'unknown error'";
      continue;
    }
    if (g.remap_failure || g.recovery == RecoveryAction::GpuReset ||
        g.recovery == RecoveryAction::NodeReboot || g.recovery == RecoveryAction::DrainAndReset) {
      if (!h.broken) {
        h.broken = true;
        h.failure =
            "Test NCCL failure common.cu:1132 'unhandled cuda error (run with NCCL_DEBUG=INFO "
            "for details)'";
      }
    }
    if (g.nvlinks_active == 0 && !h.broken) {
      h.broken = true;
      h.failure =
          "Test NCCL failure common.cu:1132 'unhandled system error (run with NCCL_DEBUG=INFO "
          "for details)'";
    }
    worst_links =
        std::min(worst_links, links > 0 ? static_cast<double>(g.nvlinks_active) / links : 1.0);
    if (g.thermal_slowdown) h.compute_factor = 0.85;
  }
  h.nvlink_factor = worst_links * nvlink_factor_;
  if (!ports_.empty()) {
    double lanes = 0;
    bool flapping = false;
    for (const auto& p : ports_) {
      if (p.state == 4) lanes += p.width / 4.0;
      if (p.flaps_left > 0) flapping = true;
    }
    h.network_factor = lanes / static_cast<double>(ports_.size()) * network_factor_;
    if (lanes == 0) {
      h.network_broken = true;
      h.network_failure =
          "Test NCCL failure common.cu:1132 'unhandled system error (run with NCCL_DEBUG=INFO "
          "for details)'";
    } else if (flapping) {
      h.network_broken = true;
      h.network_failure =
          "Test NCCL failure common.cu:1132 'remote process exited or there was a network "
          "error'";
    }
  } else {
    h.network_factor = network_factor_;
  }
  h.socket_fallback = socket_fallback_;
  return h;
}

std::string NodeModel::render_gpu_query_csv() const {
  std::string out =
      "index, pci.bus_id, uuid, name, memory.total [MiB], temperature.gpu, "
      "clocks_event_reasons.hw_thermal_slowdown, ecc.errors.corrected.volatile.total, "
      "ecc.errors.uncorrected.volatile.total, remapped_rows.correctable, "
      "remapped_rows.uncorrectable, remapped_rows.pending, remapped_rows.failure\n";
  int index = 0;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const GpuState& g = gpus_[i];
    if (!g.present) continue;  // gone from the bus: nvidia-smi no longer lists it
    out += std::to_string(index++) + ", " + id_.gpu_pci[i] + ", " + id_.gpu_uuid[i] + ", " +
           std::string(pool_->gpu->smi_name) + ", ";
    if (g.fallen_off) {
      out +=
          "[Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error], "
          "[Unknown Error], [Unknown Error], [Unknown Error], [Unknown Error], "
          "[Unknown Error]\n";
      continue;
    }
    out += std::to_string(pool_->gpu->memory_mib) + " MiB, " + std::to_string(g.temperature_c) +
           ", " + (g.thermal_slowdown ? "Active" : "Not Active") + ", " +
           std::to_string(g.ecc_corrected) + ", " + std::to_string(g.ecc_uncorrected) + ", " +
           std::to_string(g.remapped_correctable) + ", " +
           std::to_string(g.remapped_uncorrectable) + ", " + (g.remap_pending ? "Yes" : "No") +
           ", " + (g.remap_failure ? "Yes" : "No") + "\n";
  }
  return out;
}

std::string NodeModel::render_nvlink_status() const {
  std::string out;
  char speed[32];
  std::snprintf(speed, sizeof speed, "%.3f GB/s", pool_->gpu->nvlink_link_gbs);
  int index = 0;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const GpuState& g = gpus_[i];
    if (!g.present) continue;
    out += "GPU " + std::to_string(index++) + ": " + std::string(pool_->gpu->smi_name) +
           " (UUID: " + id_.gpu_uuid[i] + ")\n";
    if (g.fallen_off) continue;
    for (int l = 0; l < pool_->gpu->nvlinks_per_gpu; ++l) {
      out += "\t Link " + std::to_string(l) + ": ";
      out += l < g.nvlinks_active ? speed : "<inactive>";
      out += "\n";
    }
  }
  return out;
}

std::string NodeModel::rate_text(int gbps_per_port, int width) {
  int per_lane = gbps_per_port / 4;
  const char* gen = per_lane >= 200   ? "XDR"
                    : per_lane >= 100 ? "NDR"
                    : per_lane >= 50  ? "HDR"
                    : per_lane >= 25  ? "EDR"
                                      : "FDR";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d Gb/sec (%dX %s)", per_lane * width, width, gen);
  return buf;
}

std::map<std::string, std::string> NodeModel::signal_files() const {
  std::map<std::string, std::string> out;
  out["dev/kmsg"] = kmsg_.render();
  out["proc/sys/kernel/random/boot_id"] = boot_id_ + "\n";
  for (auto& [path, content] : host_.files()) out[path.substr(1)] = content;
  out["run/nvidia-smi/query-gpu.csv"] = render_gpu_query_csv();
  out["run/nvidia-smi/nvlink-status.txt"] = render_nvlink_status();
  out["run/cloud/scheduledevents.json"] = render_scheduled_events();
  for (const auto& p : ports_) {
    std::string dir = "sys/class/infiniband/" + p.device + "/ports/" + std::to_string(p.port) + "/";
    out[dir + "state"] = std::string(ib_state_text(p.state)) + "\n";
    out[dir + "phys_state"] = std::string(ib_phys_text(p.phys_state)) + "\n";
    out[dir + "rate"] = rate_text(pool_->network.rate_gbps, p.width) + "\n";
    out[dir + "link_layer"] = pool_->network.link_layer + "\n";
    out[dir + "counters/symbol_error"] = std::to_string(p.symbol_error) + "\n";
    out[dir + "counters/link_error_recovery"] = std::to_string(p.link_error_recovery) + "\n";
    out[dir + "counters/link_downed"] = std::to_string(p.link_downed) + "\n";
    out[dir + "counters/port_rcv_errors"] = std::to_string(p.port_rcv_errors) + "\n";
    out[dir + "counters/port_xmit_discards"] = std::to_string(p.port_xmit_discards) + "\n";
    out[dir + "counters/port_rcv_data"] = std::to_string(p.port_rcv_data) + "\n";
    out[dir + "counters/port_xmit_data"] = std::to_string(p.port_xmit_data) + "\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> NodeModel::take_signal_writes(
    const std::string& root) const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!signals_dirty(root)) return out;
  if (written_root_ != root) written_.clear();
  std::string base = root + "/" + id_.name + "/";
  for (auto& [rel, content] : signal_files()) {
    std::size_t h = std::hash<std::string>{}(content);
    auto it = written_.find(rel);
    if (it != written_.end() && it->second == h) continue;
    written_[rel] = h;
    out.emplace_back(base + rel, std::move(content));
  }
  written_generation_ = generation_;
  written_root_ = root;
  return out;
}

std::size_t NodeModel::write_signal_files(const std::string& root) const {
  auto writes = take_signal_writes(root);
  for (const auto& [path, content] : writes) write_file_atomic(path, content);
  return writes.size();
}

}  // namespace gpufleet::sim
