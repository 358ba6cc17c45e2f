// The agent's plug-in points. Subsystems (sentinel's health monitors, hostpkg's host package
// steps) register factories here from their own libraries; the agent core knows only these
// interfaces, never a subsystem. Registration is by a static object in the plug-in's .cc:
//
//   const gpufleet::agent::MonitorRegistration kXid("kmsg-xid", [](const NodeContext& n) {
//     return std::make_unique<XidMonitor>(n);
//   });
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::agent {

// Who this agent is. Production: the Kubernetes node name (from the downward API) and the
// kernel's boot id; in simulation the simulator's node name and its boot_id file.
struct NodeIdentity {
  std::string node_name;
  std::string boot_id;  // "" when the host does not expose one
};

// What a plug-in may touch on its node.
struct NodeContext {
  NodeIdentity identity;
  // Host paths are read below this root: "/" in production (the DaemonSet mounts /sys,
  // /dev/kmsg, /run/nvidia at the same paths), the simulator's nodes/<node>/ in simulation.
  std::filesystem::path host_root;
  // A directory private to this agent for plug-in state that must survive restarts (read
  // offsets, last seen counters). Each plug-in gets state_dir/<plug-in name>/.
  std::filesystem::path state_dir;

  // host_root joined with an absolute host path ("/dev/kmsg" -> <root>/dev/kmsg).
  [[nodiscard]] std::filesystem::path host_path(std::string_view absolute) const;
};

// Where a plug-in's observations go: each emit() becomes one durable journal record,
// delivered to the API later (in order, at least once). Emit facts, not intentions.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual void emit(std::string_view kind, const core::Value& payload) = 0;
};

// A health monitor: polled by the agent's scheduler every interval(); poll() must return
// quickly (no blocking reads of unbounded length) since one thread serves many nodes.
class Monitor {
 public:
  virtual ~Monitor() = default;
  [[nodiscard]] virtual std::chrono::milliseconds interval() const = 0;
  // Reads the host and emits what changed. An exception is logged and counted; the monitor
  // is polled again at its next interval (a broken monitor never stops the others).
  virtual void poll(Emitter& out) = 0;
};

// A host package step (install a package, set a sysctl, ...), run on request.
struct StepResult {
  bool ok = false;
  bool reboot_required = false;
  std::string message;  // what was done, or why it failed (with the fix)
};
class HostStep {
 public:
  virtual ~HostStep() = default;
  // Idempotent: running a step whose effect is already present reports ok and changes nothing.
  virtual StepResult run(const core::Value& params, Emitter& out) = 0;
};

using MonitorFactory = std::function<std::unique_ptr<Monitor>(const NodeContext&)>;
using HostStepFactory = std::function<std::unique_ptr<HostStep>(const NodeContext&)>;

struct MonitorRegistration {
  MonitorRegistration(std::string name, MonitorFactory factory);
};
struct HostStepRegistration {
  HostStepRegistration(std::string name, HostStepFactory factory);
};

// Registered names, sorted.
std::vector<std::string> monitor_names();
std::vector<std::string> host_step_names();
// The factory registered under `name`; throws core::InvalidInput naming the known ones.
const MonitorFactory& monitor_factory(std::string_view name);
const HostStepFactory& host_step_factory(std::string_view name);

}  // namespace gpufleet::agent
