// Faults the simulator can inject into a node (see docs/sim.md "Faults"), and their
// parsing from scenario files and the control surface.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::sim {

enum class FaultType {
  Xid,              // an NVRM Xid on a GPU, with the state change the code implies
  SXid,             // an NVSwitch SXid; fatal ones take NVLink bandwidth down
  Ecc,              // ECC errors: singleBit (corrected) or doubleBit (uncorrected, Xid 48)
  RowRemap,         // row remapping pending (Xid 63) or failure (Xid 64)
  IbPortDown,       // an InfiniBand port goes down (link_downed counts)
  IbPortUp,         // and comes back
  IbPortFlap,       // down/up `count` times, `period` seconds apart
  IbErrors,         // symbol errors and link error recoveries without a state change
  Thermal,          // HW thermal slowdown on (or off with `active: false`)
  GpuLost,          // the GPU leaves the PCI bus: capacity and nvidia-smi rows drop
  GpuReset,         // an operator's GPU reset: clears what a reset clears
  NvlinkDegraded,   // NVLink links inactive on a GPU, or a node-wide bandwidth factor
  NetworkDegraded,  // a port at reduced width, or a node-wide network bandwidth factor
  LinkDegraded,     // the link between this node and `peer` (a cable or switch port) at `factor`
  Clear,            // repair: the node (or one GPU) back to healthy
  Maintenance,      // the cloud schedules maintenance of the node (`active: false` cancels)
  SocketFallback,   // NCCL on the node sees no RDMA device and uses TCP sockets (`active: false`
                    // ends it)
};

std::string_view fault_type_name(FaultType t) noexcept;

// Xid 154's recovery actions, with the numbers the driver prints.
enum class RecoveryAction : int {
  None = 0,
  GpuReset = 1,
  NodeReboot = 2,
  DrainP2P = 3,
  DrainAndReset = 4,
};
std::string_view recovery_action_name(RecoveryAction a) noexcept;

struct Fault {
  FaultType type = FaultType::Xid;
  std::optional<int> gpu;  // GPU index on the node (required for GPU faults)
  std::string uuid;  // gpuReset: the GPU by UUID instead of index (what sentinel's entities name)
  int code = 0;      // Xid / SXid code
  std::string text;  // message override (default: realistic text for the code)
  std::optional<int> pid;                // process context of an Xid; absent: pid='<unknown>'
  std::string process;                   // process name with pid
  std::optional<RecoveryAction> action;  // Xid 154 target (default from the code)
  std::string device;                    // IB device (mlx5_N); empty: every port for degradations
  int port = 1;
  int nvswitch = 0;       // SXid: which NVSwitch on the node
  int link = -1;          // NVLink/NVSwitch link number (-1: drawn from the seed)
  int count = 1;          // ECC errors, flaps, symbol errors, links down
  double period_s = 4.0;  // flap period
  double factor = 1.0;    // degraded bandwidth (0 < factor <= 1)
  std::string peer;       // linkDegraded: the node at the other end of the link
  bool active = true;     // thermal on/off
  std::string ecc_kind = "singleBit";
  std::string remap_kind = "pending";
  // maintenance: the window opens `starts_in_s` after the event and lasts `duration_s`;
  // `maintenance_kind` is the Azure EventType the simulator's document says.
  double starts_in_s = 600;
  double duration_s = 60;
  std::string maintenance_kind = "Reboot";
};

// Reads a fault from a map {type: xid, gpu: 3, code: 79, ...}; `path` names it in errors.
// Throws core::InvalidInput naming the field, value and fix.
Fault parse_fault(const core::Value& v, std::string_view source, std::string_view path);
core::Value fault_to_value(const Fault& f);

// The keys parse_fault reads besides `type` (so event readers can share one map).
bool is_fault_field(std::string_view key) noexcept;
// Parses `type` into a FaultType; nullopt when it is not a fault type.
std::optional<FaultType> fault_type_from_name(std::string_view name) noexcept;

}  // namespace gpufleet::sim
