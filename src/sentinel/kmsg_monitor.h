// The kernel-log monitor ("kmsg-xid"): reads /dev/kmsg records below the node's host root,
// turns Xid / SXid / fallen-off-the-bus / recovery-action lines into typed events with the
// Xid catalog's severity and recommended action, and GPU entity health.
//
// - Resume: the boot id and the last sequence number handled are kept in the plug-in's state
//   directory, so a restarted agent emits nothing it emitted before. The state is written at
//   the START of the next poll, i.e. after the agent journalled the previous poll's batch: a
//   crash in between re-emits (at least once), never loses.
// - Reboot: a new boot id (or a sequence number going backwards) starts reading at the new
//   boot's first record; records of the old boot are never replayed, and every entity the old
//   boot left faulty is reported recovered once ("NodeRebooted"): one event per entity.
// - Dedup / burst suppression: the same (kind, code, PCI address) within `burst_window` of
//   kernel time is one event; the repeats are counted into the next emitted one. Bounded state
//   (`max_keys`, oldest evicted).
// - Cancellation: Xid 154 "recovery action changed ... to 0x0 (None)" is the driver's outcome
//   of a successful GPU reset and clears that GPU's fault, unless the fault needs a reboot
//   (fallen off the bus), which only a new boot clears.
// - One fault, one health record of its own: an entity's health changes state only upwards
//   (healthy → Warning → Fatal) while it is faulty. A signal at the state it already has or a
//   lesser one — a repeat of the Xid after the burst window, the driver's Xid 154 recovery
//   action that follows it, another Xid of the same error (48 then 95) — is part of the open
//   fault: the state and reason stay (NodeHealth history gets no entry), the message gets a
//   "; then …" line and a reboot it asks for is remembered. A new fault on the entity starts
//   after it recovered (GPU reset succeeded, reboot) or when it turns worse.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "agent/plugin.h"
#include "core/value.h"
#include "core/xid_catalog.h"
#include "sentinel/kmsg.h"

namespace gpufleet::sentinel {

// The health an Xid gives its GPU entity (check `xid`): the catalog's Critical → Fatal, Warning
// → Warning, Info → "" (an event, no health change); a code not in the catalog → Warning (worth
// a look, not an action). Reason "Xid<code>". Xid 154 names its action in the line itself and
// is read by the monitor, not here.
struct XidHealth {
  std::string state;  // Fatal | Warning | ""
  std::string reason;
  bool needs_reboot = false;  // the catalog says reboot-node: only a new boot clears it
};
XidHealth xid_health(const core::XidCatalog& catalog, int code);

// The typed event kind journalled for every kernel GPU signal (one per burst).
inline constexpr std::string_view kKernelEventKind = "sentinel.kernel";
// The NodeHealth check the monitor's entity states belong to.
inline constexpr std::string_view kXidCheck = "xid";

struct KmsgMonitorOptions {
  std::chrono::milliseconds interval{500};
  std::uint64_t burst_window_usec = 10'000'000;  // 10 s of kernel time
  std::size_t max_keys = 1024;                   // dedup keys kept
  std::size_t max_records_per_poll = 50'000;     // a poll stops there, resumes next time
  std::size_t max_file_bytes = std::size_t{16} << 20;
};

struct KmsgMonitorStats {
  std::uint64_t records = 0;     // well-formed records read (new ones)
  std::uint64_t malformed = 0;   // lines that are no kmsg record
  std::uint64_t events = 0;      // GPU signals recognised
  std::uint64_t emitted = 0;     // typed events emitted
  std::uint64_t suppressed = 0;  // repeats folded into a burst
  std::uint64_t lost = 0;        // records overwritten before they were read (seq gaps)
  std::uint64_t reboots = 0;     // boot changes seen
};

// What one GPU looks like to the kernel-log monitor: index and UUID by PCI address, from
// nvidia-smi's CSV (`run/nvidia-smi/query-gpu.csv` in simulation).
struct GpuIdentity {
  int index = -1;
  std::string uuid;
};
// Parses `index, pci.bus_id, uuid, ...` CSV (header names located by token, any order).
std::map<std::string, GpuIdentity> parse_gpu_query_csv(std::string_view csv);

class KmsgMonitor final : public agent::Monitor {
 public:
  explicit KmsgMonitor(const agent::NodeContext& node, KmsgMonitorOptions options = {});
  ~KmsgMonitor() override;

  [[nodiscard]] std::chrono::milliseconds interval() const override { return options_.interval; }
  void poll(agent::Emitter& out) override;

  [[nodiscard]] const KmsgMonitorStats& stats() const noexcept { return stats_; }

 private:
  // An entity's open fault: what first took it to its state. Later signals of the same or a
  // lesser state (the driver's recovery-action line, another Xid of the same burst) are part
  // of it: they add to `message`, never to the fault's identity (state, reason).
  struct Fault {
    std::string state;   // Warning | Fatal
    std::string reason;  // Xid79, SXid20034, RecoveryAction
    bool needs_reboot = false;
    std::string entity_kind;
    std::string message;  // as reported: the first signal, then "; then …" per follow-up
  };
  struct Burst {
    std::uint64_t last_usec = 0;
    std::uint64_t suppressed = 0;
    std::uint64_t order = 0;  // for eviction of the oldest key
  };

  void load_state();
  void save_state();
  std::string current_boot_id() const;
  void handle_line(std::string_view line, agent::Emitter& out);
  void new_boot(const std::string& boot, agent::Emitter& out);
  void handle_event(const KmsgRecord& r, const KernelEvent& ev, agent::Emitter& out);
  void set_entity(const std::string& entity, const Fault& f, std::string_view message,
                  agent::Emitter& out);
  void emit_entity(const std::string& entity, const Fault& f, agent::Emitter& out);
  void clear_entity(const std::string& entity, std::string_view reason, std::string_view message,
                    agent::Emitter& out);
  void read_char_device(const std::string& path, agent::Emitter& out);
  const GpuIdentity* gpu_for(const std::string& pci);

  agent::NodeContext node_;
  KmsgMonitorOptions options_;
  KmsgMonitorStats stats_;

  std::string boot_id_;
  bool have_seq_ = false;
  std::uint64_t last_seq_ = 0;
  std::map<std::string, Fault> faults_;  // entity -> active fault (bounded by the GPUs/switches)
  std::map<std::string, Burst> bursts_;
  std::uint64_t burst_order_ = 0;
  std::map<std::string, GpuIdentity> gpus_;  // PCI -> identity
  bool gpus_loaded_ = false;
  bool dirty_ = false;
  int fd_ = -1;  // open /dev/kmsg when it is a character device
  // The ring file's size and modification time at the last read: unchanged -> not re-read.
  std::int64_t file_size_ = -1;
  std::int64_t file_mtime_ns_ = -1;
  std::uint64_t file_inode_ = 0;  // the simulator replaces the file (rename): a new inode
};

// Registers nothing: the CLI registers the factory (static registration in a library is
// dropped by the linker). Exposed for that and for tests.
std::unique_ptr<agent::Monitor> make_kmsg_monitor(const agent::NodeContext& node);

}  // namespace gpufleet::sentinel
