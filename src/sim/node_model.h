// The GPU, fabric and host state of one simulated node, the faults that change it, and
// the host signal files a node agent reads (layout in docs/sim.md "Signal files"):
//   <root>/<node>/dev/kmsg                                   kernel log, /dev/kmsg format
//   <root>/<node>/sys/class/infiniband/<dev>/ports/<p>/...   state, phys_state, rate,
//                                                            link_layer, counters/*
//   <root>/<node>/run/nvidia-smi/query-gpu.csv               `nvidia-smi --query-gpu=...
//   --format=csv` <root>/<node>/run/nvidia-smi/nvlink-status.txt           `nvidia-smi nvlink -s`
//   <root>/<node>/proc/sys/kernel/random/boot_id, proc/cmdline, proc/sys/..., etc/...
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/xid_catalog.h"
#include "sim/fault.h"
#include "sim/fleet_spec.h"
#include "sim/host_model.h"
#include "sim/kmsg_log.h"
#include "sim/link_health.h"
#include "sim/node_identity.h"
#include "sim/rng.h"

namespace gpufleet::sim {

struct GpuState {
  bool present = true;      // false: lost from the PCI bus
  bool fallen_off = false;  // Xid 79: no usable until the node reboots
  bool thermal_slowdown = false;
  int temperature_c = 34;
  std::uint64_t ecc_corrected = 0;    // volatile, reset at boot
  std::uint64_t ecc_uncorrected = 0;  // volatile, reset at boot
  int remapped_correctable = 0;
  int remapped_uncorrectable = 0;
  bool remap_pending = false;
  bool remap_failure = false;
  int nvlinks_active = 0;
  RecoveryAction recovery = RecoveryAction::None;
};

struct IbPortState {
  std::string device;
  int port = 1;
  int state = 4;       // 4: ACTIVE, 1: DOWN
  int phys_state = 5;  // 5: LinkUp, 2: Polling
  int width = 4;       // lanes: 4X nominal, 2X/1X when degraded
  int flaps_left = 0;  // down/up transitions still to play
  double next_flap_at = 0;
  double flap_half_period = 2.0;
  // Counters as the HCA keeps them; the narrow ones saturate (16 and 8 bits).
  std::uint64_t symbol_error = 0;
  std::uint64_t link_error_recovery = 0;
  std::uint64_t link_downed = 0;
  std::uint64_t port_rcv_errors = 0;
  std::uint64_t port_xmit_discards = 0;
  std::uint64_t port_rcv_data = 0;
  std::uint64_t port_xmit_data = 0;
};

// A maintenance window the cloud scheduled for the node (FaultType::Maintenance).
struct MaintenanceWindow {
  std::string id;
  std::string kind;    // Azure EventType
  double start_s = 0;  // simulated time the window opens
  double duration_s = 0;
  std::int64_t not_before_unix = 0;  // the same moment as wall-clock seconds (the document's)
  bool started = false;
};

class NodeModel {
 public:
  // `now_s` is simulated seconds since the simulator started; the node boots then.
  NodeModel(const FleetSpec& fleet, NodeIdentity id, double now_s);

  // Applies a fault at simulated time `now_s`: state change plus kernel log lines.
  // Throws core::InvalidInput when the target (GPU index, device, NVSwitch) does not exist.
  void apply(const Fault& f, double now_s);
  // Plays scheduled transitions (IB flaps) due by `now_s`; true when anything changed.
  bool tick(double now_s);
  // A new boot at `now_s`: new boot ID, kernel log restarts, pending row remaps and host
  // changes take effect, fallen-off GPUs come back, volatile ECC counters reset.
  void reboot(double now_s);

  [[nodiscard]] const NodeIdentity& identity() const noexcept { return id_; }
  [[nodiscard]] const PoolSpec& pool() const noexcept { return *pool_; }
  [[nodiscard]] const std::string& boot_id() const noexcept { return boot_id_; }
  [[nodiscard]] int boot_count() const noexcept { return boot_count_; }
  [[nodiscard]] const std::vector<GpuState>& gpus() const noexcept { return gpus_; }
  [[nodiscard]] const std::vector<IbPortState>& ports() const noexcept { return ports_; }
  [[nodiscard]] const KmsgLog& kmsg() const noexcept { return kmsg_; }
  [[nodiscard]] const std::vector<MaintenanceWindow>& maintenance() const noexcept {
    return maintenance_;
  }
  // The Azure Scheduled Events document of the node's maintenance windows (what
  // run/cloud/scheduledevents.json holds).
  [[nodiscard]] std::string render_scheduled_events() const;
  [[nodiscard]] HostModel& host() noexcept { return host_; }
  [[nodiscard]] const HostModel& host() const noexcept { return host_; }
  // Monotonic change counter: bumps on every state change (writers skip clean nodes).
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_; }
  void touch() noexcept { ++generation_; }

  [[nodiscard]] int gpus_present() const;
  [[nodiscard]] int gpus_healthy() const;
  [[nodiscard]] int ports_active() const;
  [[nodiscard]] LinkHealth link_health() const;

  // Signal renderings (also what write_signal_files writes).
  [[nodiscard]] std::string render_gpu_query_csv() const;
  [[nodiscard]] std::string render_nvlink_status() const;
  [[nodiscard]] static std::string rate_text(int gbps_per_port, int width);
  // Every signal file relative to the node directory -> content.
  [[nodiscard]] std::map<std::string, std::string> signal_files() const;
  // Mirrors signal_files() into <root>/<node>/ with atomic renames, skipping unchanged files
  // (and the whole node when nothing changed since the last call for this root).
  // Returns the number of files written.
  std::size_t write_signal_files(const std::string& root) const;
  // The (absolute path, content) pairs write_signal_files would write, marking them written:
  // lets a caller render under its lock and do the file I/O outside it.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> take_signal_writes(
      const std::string& root) const;
  // Whether anything changed since the last take/write for `root`.
  [[nodiscard]] bool signals_dirty(const std::string& root) const noexcept {
    return written_generation_ != generation_ || written_root_ != root;
  }

  // The header of query-gpu.csv: the --query-gpu fields the simulator fills.
  static const char* gpu_query_fields();

 private:
  GpuState& gpu_at(const Fault& f, const char* what);
  IbPortState& port_at(const std::string& device, int port);
  void log(int prio, double now_s, const std::string& text);
  void log_xid(int gpu, int code, double now_s, const Fault* f);
  // The seams of apply(), one per kind of fault.
  void apply_xid(const Fault& f, double now_s);
  void apply_sxid(const Fault& f, double now_s);
  void apply_memory_error(const Fault& f, double now_s);
  void apply_port_fault(const Fault& f, double now_s);
  void apply_gpu_state(const Fault& f, double now_s);
  void apply_degradation(const Fault& f);
  void apply_clear(const Fault& f);
  void apply_maintenance(const Fault& f, double now_s);
  // What an Xid does to the GPU's state, as the catalog names it.
  void apply_xid_effect(GpuState& g, int gpu, core::XidEffect effect, double now_s);
  void set_recovery(int gpu, RecoveryAction to, double now_s);
  void port_down(IbPortState& p);
  void port_up(IbPortState& p);
  void boot_banner();

  const FleetSpec* fleet_;
  const PoolSpec* pool_;
  NodeIdentity id_;
  Rng rng_;
  std::string boot_id_;
  int boot_count_ = 0;
  double boot_at_s_ = 0;
  std::vector<GpuState> gpus_;
  std::vector<IbPortState> ports_;
  double nvlink_factor_ = 1.0;    // node-wide hidden degradation
  double network_factor_ = 1.0;   // node-wide hidden degradation
  bool socket_fallback_ = false;  // NCCL uses TCP sockets between nodes (socketFallback)
  KmsgLog kmsg_;
  std::vector<MaintenanceWindow> maintenance_;
  int maintenance_seq_ = 0;
  std::int64_t maintenance_incarnation_ = 1;  // DocumentIncarnation: bumps on every change
  HostModel host_;
  std::uint64_t generation_ = 1;
  mutable std::map<std::string, std::size_t> written_;  // relative path -> content hash
  mutable std::uint64_t written_generation_ = 0;        // generation last mirrored
  mutable std::string written_root_;
};

}  // namespace gpufleet::sim
