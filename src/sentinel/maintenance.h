// The cloud-maintenance monitor ("cloud-maintenance"): a provider tells the node what
// maintenance the cloud has scheduled for it (a host reboot, a live migration, a retirement),
// and the monitor reports it in NodeHealth (check "maintenance", one entity per maintenance
// event) AHEAD of the window, so that a SentinelPolicy rule can cordon and drain the node
// before the cloud takes it away, and release it once the window is over.
//
// Providers (MaintenanceProvider) are a source of the provider's own document plus a parser:
// - "azure": the Instance Metadata Service's Scheduled Events
//   (GET http://169.254.169.254/metadata/scheduledevents?api-version=2020-07-01, header
//   Metadata: true);
// - "aws": EC2 instance metadata, IMDSv2 (PUT /latest/api/token, then GET
//   /latest/meta-data/events/maintenance/scheduled);
// - "gcp": the Compute Engine metadata server (header Metadata-Flavor: Google):
//   instance/maintenance-event (NONE, MIGRATE_ON_HOST_MAINTENANCE, TERMINATE_ON_HOST_MAINTENANCE;
//   the value changes about 60 s before the event) and instance/upcoming-maintenance?alt=json
//   (the scheduled window, when the machine type announces one);
// - "simulator": the simulator's node file run/cloud/scheduledevents.json (the Azure
//   document; see docs/sim.md), read below the node's host root.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/plugin.h"

namespace gpufleet::sentinel {

inline constexpr std::string_view kMaintenanceCheck = "maintenance";
inline constexpr std::string_view kMaintenanceEventKind = "sentinel.maintenance";
// The simulator's Scheduled Events document, relative to the node's host root.
inline constexpr std::string_view kSimScheduledEventsPath = "/run/cloud/scheduledevents.json";

// One scheduled maintenance, in the provider's words where it has them.
struct MaintenanceEvent {
  std::string id;                  // EventId
  std::string type;                // Azure EventType (Reboot, Redeploy, Freeze, Preempt, Terminate)
                                   // or the EC2 code (system-reboot, instance-retirement, ...)
  std::string status;              // Scheduled | Started | Completed | Canceled
  std::int64_t not_before_ms = 0;  // earliest start; 0 when the provider gave none (Started)
  std::int64_t not_after_ms = 0;   // latest end; 0 when unknown
  std::int64_t duration_s = -1;    // expected length; -1 when unknown
  std::string description;
};

// Parsers of the providers' documents. Strict about what they use (a field of the wrong kind,
// a date that is not an HTTP date), lenient about fields they do not use. Throw
// core::InvalidInput naming `source`, the field, the value and what was expected.
std::vector<MaintenanceEvent> parse_azure_scheduled_events(std::string_view json,
                                                           std::string_view source);
std::vector<MaintenanceEvent> parse_aws_scheduled_events(std::string_view json,
                                                         std::string_view source);
// GCE's two metadata keys: `maintenance_event` is the text of instance/maintenance-event,
// `upcoming` the body of instance/upcoming-maintenance?alt=json ("" when the key is absent:
// 404, a machine type without announced windows). Entities: "maintenance-event" (the imminent
// migration or termination, in progress) and "upcoming-maintenance" (the scheduled window).
std::vector<MaintenanceEvent> parse_gcp_maintenance(std::string_view maintenance_event,
                                                    std::string_view upcoming,
                                                    std::string_view source);

// Where maintenance comes from. fetch() returns the provider's document ("" = no events) or
// throws std::runtime_error when the provider cannot be reached.
struct MaintenanceProvider {
  std::string name;
  std::function<std::string()> fetch;
  std::function<std::vector<MaintenanceEvent>(std::string_view)> parse;
};

// The providers. `endpoint` overrides the metadata service's base URL (tests serve it on
// loopback); `timeout` bounds each HTTP request.
MaintenanceProvider simulator_maintenance_provider(const agent::NodeContext& node);
MaintenanceProvider azure_maintenance_provider(
    std::string endpoint = "http://169.254.169.254",
    std::chrono::milliseconds timeout = std::chrono::seconds(2));
MaintenanceProvider aws_maintenance_provider(
    std::string endpoint = "http://169.254.169.254",
    std::chrono::milliseconds timeout = std::chrono::seconds(2));
MaintenanceProvider gcp_maintenance_provider(
    std::string endpoint = "http://metadata.google.internal",
    std::chrono::milliseconds timeout = std::chrono::seconds(2));
// By name: simulator | azure | aws | gcp. Throws core::InvalidInput naming the known ones.
MaintenanceProvider maintenance_provider(std::string_view name, const agent::NodeContext& node,
                                         const std::string& endpoint = "");

struct MaintenanceMonitorOptions {
  std::chrono::milliseconds interval{30'000};
  // How long before a window opens the node is reported (Warning, MaintenanceScheduled):
  // the time a drain needs. Earlier events are reported as upcoming (Healthy) only.
  std::chrono::seconds lead{3600};
  std::size_t max_events = 16;           // per node, the earliest kept
  std::function<std::int64_t()> now_ms;  // default: the system clock
};

// Health per maintenance event (entity = its id, kind "Host"):
//   Healthy  MaintenanceUpcoming   scheduled, window opens later than `lead` from now
//   Warning  MaintenanceScheduled  window opens within `lead`
//   Warning  MaintenanceInProgress started (or its window opened)
//   Healthy  MaintenanceCompleted  gone from the provider's document, or Completed/Canceled
// Changes only (dedup); the reported set is kept in the plug-in's state directory, so an
// event that ended while the agent was down is still reported Completed after a restart.
// A provider that cannot be reached keeps the last state and reports check-level Unknown
// (ProviderUnreachable) once.
class MaintenanceMonitor final : public agent::Monitor {
 public:
  MaintenanceMonitor(const agent::NodeContext& node, MaintenanceProvider provider,
                     MaintenanceMonitorOptions options = {});
  [[nodiscard]] std::chrono::milliseconds interval() const override { return options_.interval; }
  void poll(agent::Emitter& out) override;

 private:
  void load_state();
  void save_state() const;
  void report(const std::string& entity, std::string_view state, std::string_view reason,
              const std::string& message, agent::Emitter& out);

  agent::NodeContext node_;
  MaintenanceProvider provider_;
  MaintenanceMonitorOptions options_;
  std::map<std::string, std::string> reported_;  // entity -> "state/reason" last reported
  bool unreachable_ = false;
};

// The agent's factory: the provider from GPUFLEET_MAINTENANCE_PROVIDER (azure | aws | gcp |
// simulator; GPUFLEET_MAINTENANCE_ENDPOINT overrides the metadata URL), else "simulator"
// when the node's host root is not "/" (simulation), else none: nullptr, the monitor is off.
// Lead and interval from GPUFLEET_MAINTENANCE_LEAD / GPUFLEET_MAINTENANCE_INTERVAL
// (durations). Throws core::InvalidInput for an unknown provider or a bad duration.
std::unique_ptr<agent::Monitor> make_maintenance_monitor(const agent::NodeContext& node);

}  // namespace gpufleet::sentinel
