// Scenario files: a fleet plus a timeline of faults and events in simulated time (see
// docs/sim.md "Scenario file"). The same event form is what the control surface accepts
// while the simulator runs (`gpufleet sim inject`, POST /inject).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "sim/behaviour.h"
#include "sim/fault.h"
#include "sim/fleet_spec.h"
#include "sim/step_injection.h"

namespace gpufleet::sim {

// StepOutcome: a hostStep or stagePod event (sim/step_injection.h).
enum class EventKind { Fault, Reboot, Scale, Host, StepOutcome };

struct HostChange {
  std::map<std::string, std::string> sysctls;
  bool persist = true;
  std::vector<std::string> kernel_args_add;
  std::vector<std::string> kernel_args_remove;
  std::string kernel;
  std::string driver;
  std::map<std::string, std::string> files;
  std::string package_name;
  std::string package_version;
  bool package_reboot = false;
};

struct SimEvent {
  double at_s = 0;  // simulated seconds from the start (control events: 0 = now)
  EventKind kind = EventKind::Fault;
  // Targets: explicit nodes, or a pool (every node, or `pick` nodes drawn from the seed).
  std::vector<std::string> nodes;
  std::string pool;
  int pick = 0;
  Fault fault;
  double down_s = 60;  // reboot: how long the node stays NotReady
  int count = 0;       // scale: the pool's new node count
  HostChange host;
  StepInjection step;  // StepOutcome
  std::string where;   // "spec.timeline[3]" for messages
};

// Reads one event map ({at, node|nodes|pool [+pick], type, ...fields of that type}).
// `require_at`: scenario timelines need `at`; control events may omit it (now).
SimEvent parse_event(const core::Value& v, std::string_view source, std::string_view path,
                     bool require_at);
core::Value event_to_value(const SimEvent& e);

struct Scenario {
  std::string name;
  FleetSpec fleet;
  BehaviourTable behaviours = BehaviourTable::defaults();
  std::vector<SimEvent> timeline;    // sorted by `at`, stable
  std::optional<double> duration_s;  // stop after this long (simulated), if given
};

// `base_dir` resolves `spec.fleet` and `spec.behaviours` given as file paths. Checks every
// target node and pool against the fleet (including nodes a timeline scale-up adds).
Scenario parse_scenario(const core::Value& doc, std::string_view source,
                        const std::string& base_dir);
Scenario load_scenario_file(const std::string& path);

}  // namespace gpufleet::sim
