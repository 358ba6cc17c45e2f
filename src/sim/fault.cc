#include "sim/fault.h"

#include <array>
#include <utility>

#include "core/field_reader.h"

namespace gpufleet::sim {

using core::describe_value;
using core::fail_field;
using core::FieldReader;
using core::seconds_from;
namespace {

constexpr std::array<std::pair<FaultType, std::string_view>, 17> kNames{{
    {FaultType::Xid, "xid"},
    {FaultType::SXid, "sxid"},
    {FaultType::Ecc, "ecc"},
    {FaultType::RowRemap, "rowRemap"},
    {FaultType::IbPortDown, "ibPortDown"},
    {FaultType::IbPortUp, "ibPortUp"},
    {FaultType::IbPortFlap, "ibPortFlap"},
    {FaultType::IbErrors, "ibErrors"},
    {FaultType::Thermal, "thermal"},
    {FaultType::GpuLost, "gpuLost"},
    {FaultType::GpuReset, "gpuReset"},
    {FaultType::NvlinkDegraded, "nvlinkDegraded"},
    {FaultType::NetworkDegraded, "networkDegraded"},
    {FaultType::LinkDegraded, "linkDegraded"},
    {FaultType::Clear, "clear"},
    {FaultType::Maintenance, "maintenance"},
    {FaultType::SocketFallback, "socketFallback"},
}};

constexpr std::array<std::string_view, 21> kFields{
    "gpu",  "code",     "text",    "pid",   "process",  "action",   "device",
    "port", "nvswitch", "link",    "count", "period",   "factor",   "active",
    "kind", "type",     "comment", "peer",  "startsIn", "duration", "uuid"};

bool needs_gpu(FaultType t) {
  switch (t) {
    case FaultType::Xid:
    case FaultType::Ecc:
    case FaultType::RowRemap:
    case FaultType::Thermal:
    case FaultType::GpuLost:
    case FaultType::GpuReset: return true;
    default: return false;
  }
}

}  // namespace

std::string_view fault_type_name(FaultType t) noexcept {
  for (const auto& [type, name] : kNames) {
    if (type == t) return name;
  }
  return "unknown";
}

std::optional<FaultType> fault_type_from_name(std::string_view name) noexcept {
  for (const auto& [type, n] : kNames) {
    if (n == name) return type;
  }
  return std::nullopt;
}

bool is_fault_field(std::string_view key) noexcept {
  for (auto f : kFields) {
    if (f == key) return true;
  }
  return false;
}

std::string_view recovery_action_name(RecoveryAction a) noexcept {
  switch (a) {
    case RecoveryAction::None: return "None";
    case RecoveryAction::GpuReset: return "GPU Reset Required";
    case RecoveryAction::NodeReboot: return "Node Reboot Required";
    case RecoveryAction::DrainP2P: return "Drain P2P";
    case RecoveryAction::DrainAndReset: return "Drain and Reset";
  }
  return "None";
}

Fault parse_fault(const core::Value& v, std::string_view source, std::string_view path) {
  FieldReader r(v, std::string(source), std::string(path));
  std::string type_names;
  for (const auto& [type, name] : kNames) {
    if (!type_names.empty()) type_names += ", ";
    type_names += name;
  }
  std::string type = r.required_string("type", "use one of: " + type_names);
  auto ft = fault_type_from_name(type);
  if (!ft) r.fail("type", core::Value(type), "is not a fault type", "use one of: " + type_names);
  Fault f;
  f.type = *ft;
  r.get("comment");
  if (r.has("gpu")) {
    f.gpu = static_cast<int>(r.integer("gpu", 0, 0, 15, "a GPU index on the node, e.g. 3"));
  } else if (needs_gpu(f.type) && f.type != FaultType::Thermal && f.type != FaultType::GpuReset) {
    fail_field(source, r.field("gpu"), "is required for a " + type + " fault",
               "name the GPU index, e.g. gpu: 3");
  }
  switch (f.type) {
    case FaultType::Xid:
      f.code = static_cast<int>(
          r.integer("code", std::nullopt, 1, 999, "an Xid code, e.g. 79 (fallen off the bus)"));
      f.text = r.string("text", "");
      if (r.has("pid")) {
        f.pid = static_cast<int>(r.integer("pid", 0, 1, 4194304, "a process ID, e.g. 1234"));
        f.process = r.string("process", "python3");
      } else if (r.has("process")) {
        fail_field(source, r.field("process"), "is set without pid", "add pid: <number>");
      }
      if (r.has("action")) {
        std::string a = r.one_of("action", std::nullopt,
                                 {"None", "GpuReset", "NodeReboot", "DrainP2P", "DrainAndReset"});
        f.action = a == "None"         ? RecoveryAction::None
                   : a == "GpuReset"   ? RecoveryAction::GpuReset
                   : a == "NodeReboot" ? RecoveryAction::NodeReboot
                   : a == "DrainP2P"   ? RecoveryAction::DrainP2P
                                       : RecoveryAction::DrainAndReset;
      } else if (f.code == 154) {
        fail_field(source, r.field("action"), "is required for Xid 154",
                   "use one of: None, GpuReset, NodeReboot, DrainP2P, DrainAndReset");
      }
      f.link = static_cast<int>(r.integer("link", -1, -1, 63, "an NVLink number, e.g. 14"));
      break;
    case FaultType::SXid:
      f.code = static_cast<int>(
          r.integer("code", std::nullopt, 10000, 99999, "an SXid code, e.g. 20009"));
      f.nvswitch = static_cast<int>(r.integer("nvswitch", 0, 0, 7, "an NVSwitch index, e.g. 0"));
      f.link = static_cast<int>(r.integer("link", -1, -1, 63, "a switch port, e.g. 4"));
      f.text = r.string("text", "");
      break;
    case FaultType::Ecc:
      f.ecc_kind = r.one_of("kind", "singleBit", {"singleBit", "doubleBit"});
      f.count = static_cast<int>(r.integer("count", 1, 1, 1000000, "how many errors, e.g. 1"));
      break;
    case FaultType::RowRemap:
      f.remap_kind = r.one_of("kind", "pending", {"pending", "failure"});
      break;
    case FaultType::IbPortDown:
    case FaultType::IbPortUp:
    case FaultType::IbPortFlap:
    case FaultType::IbErrors:
      f.device = r.required_string("device", "name the HCA, e.g. mlx5_0");
      f.port = static_cast<int>(r.integer("port", 1, 1, 4, "the port number, usually 1"));
      if (f.type == FaultType::IbPortFlap || f.type == FaultType::IbErrors) {
        f.count = static_cast<int>(r.integer("count", f.type == FaultType::IbErrors ? 100 : 3, 1,
                                             1000000, "how many flaps or errors"));
      }
      if (f.type == FaultType::IbPortFlap) {
        if (const core::Value* p = r.get("period")) {
          f.period_s = seconds_from(*p, source, r.field("period"));
          if (f.period_s < 0.1) {
            r.fail("period", *p, "is shorter than 0.1 s", "use seconds between flaps, e.g. 4s");
          }
        }
      }
      break;
    case FaultType::Thermal: f.active = r.boolean("active", true); break;
    case FaultType::GpuReset:
      f.uuid = r.string("uuid", "");
      if (!f.uuid.empty() && f.gpu)
        r.fail("uuid", core::Value(f.uuid), "is set together with gpu",
               "name the GPU once: gpu: <index> or uuid: GPU-...");
      if (!f.uuid.empty() && (!f.uuid.starts_with("GPU-") || f.uuid.size() > 64))
        r.fail("uuid", core::Value(f.uuid), "is not a GPU UUID",
               "use the form nvidia-smi prints, e.g. GPU-3f1c2a9e-...");
      break;
    case FaultType::NvlinkDegraded:
      if (f.gpu) {
        f.count = static_cast<int>(r.integer("count", 1, 1, 18, "links to take down, e.g. 2"));
      } else {
        f.factor = r.number("factor", std::nullopt, 0.01, 1.0,
                            "the fraction of NVLink bandwidth left, e.g. 0.5");
      }
      break;
    case FaultType::NetworkDegraded:
      f.device = r.string("device", "");
      f.port = static_cast<int>(r.integer("port", 1, 1, 4, "the port number, usually 1"));
      f.factor = r.number("factor", std::nullopt, 0.01, 1.0,
                          "the fraction of network bandwidth left, e.g. 0.5");
      break;
    case FaultType::LinkDegraded:
      if (f.gpu) {
        fail_field(source, r.field("gpu"), "does not apply to a linkDegraded fault",
                   "remove it; the link joins two nodes (node and peer)");
      }
      f.peer = r.required_string("peer", "name the node at the other end of the link");
      if (f.peer.empty()) {
        r.fail("peer", core::Value(f.peer), "is empty",
               "name the node at the other end of the link");
      }
      f.factor = r.number("factor", std::nullopt, 0.01, 1.0,
                          "the fraction of the link's bandwidth left, e.g. 0.5; 1 repairs it");
      break;
    case FaultType::SocketFallback:
      if (f.gpu) {
        fail_field(source, r.field("gpu"), "does not apply to a socketFallback fault",
                   "remove it; NCCL falls back to sockets for the whole node");
      }
      f.active = r.boolean("active", true);
      break;
    case FaultType::Maintenance:
      if (f.gpu) {
        fail_field(source, r.field("gpu"), "does not apply to maintenance",
                   "remove it; the cloud maintains the whole node");
      }
      f.active = r.boolean("active", true);
      f.maintenance_kind =
          r.one_of("kind", "Reboot", {"Reboot", "Redeploy", "Freeze", "Preempt", "Terminate"});
      if (const core::Value* in = r.get("startsIn")) {
        f.starts_in_s = seconds_from(*in, source, r.field("startsIn"));
        if (f.starts_in_s < 0 || f.starts_in_s > 30 * 86400)
          r.fail("startsIn", *in, "is outside 0..30 days",
                 "when the window opens after the event, e.g. 10m");
      }
      if (const core::Value* d = r.get("duration")) {
        f.duration_s = seconds_from(*d, source, r.field("duration"));
        if (f.duration_s < 1 || f.duration_s > 86400)
          r.fail("duration", *d, "is outside 1 s..24 h", "how long the window lasts, e.g. 5m");
      }
      break;
    default: break;
  }
  r.done();
  return f;
}

core::Value fault_to_value(const Fault& f) {
  core::Value v;
  v["type"] = fault_type_name(f.type);
  if (f.gpu) v["gpu"] = *f.gpu;
  switch (f.type) {
    case FaultType::Xid:
      v["code"] = f.code;
      if (f.pid) {
        v["pid"] = *f.pid;
        v["process"] = f.process;
      }
      if (f.action) v["action"] = static_cast<int>(*f.action);
      if (!f.text.empty()) v["text"] = f.text;
      break;
    case FaultType::SXid:
      v["code"] = f.code;
      v["nvswitch"] = f.nvswitch;
      break;
    case FaultType::Ecc:
      v["kind"] = f.ecc_kind;
      v["count"] = f.count;
      break;
    case FaultType::RowRemap: v["kind"] = f.remap_kind; break;
    case FaultType::IbPortDown:
    case FaultType::IbPortUp:
    case FaultType::IbPortFlap:
    case FaultType::IbErrors:
      v["device"] = f.device;
      v["port"] = f.port;
      if (f.type == FaultType::IbPortFlap || f.type == FaultType::IbErrors) v["count"] = f.count;
      break;
    case FaultType::Thermal:
    case FaultType::SocketFallback: v["active"] = f.active; break;
    case FaultType::GpuReset:
      if (!f.uuid.empty()) v["uuid"] = f.uuid;
      break;
    case FaultType::NvlinkDegraded:
    case FaultType::NetworkDegraded:
      if (!f.device.empty()) v["device"] = f.device;
      if (f.gpu)
        v["count"] = f.count;
      else
        v["factor"] = f.factor;
      break;
    case FaultType::LinkDegraded:
      v["peer"] = f.peer;
      v["factor"] = f.factor;
      break;
    case FaultType::Maintenance:
      v["active"] = f.active;
      v["kind"] = f.maintenance_kind;
      v["startsIn"] = f.starts_in_s;
      v["duration"] = f.duration_s;
      break;
    default: break;
  }
  return v;
}

}  // namespace gpufleet::sim
