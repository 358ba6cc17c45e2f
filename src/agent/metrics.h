// The agent's /metrics, aggregated over every node the process runs. A DaemonSet pod runs one
// node, `gpufleet agent --sim-state-dir` thousands: a label per node would grow the series
// with the fleet, so there is none (per-node detail lives in each NodeHealth and in the logs).
//   gpufleet_agent_records_appended_total                  records journalled
//   gpufleet_agent_records_delivered_total                 records the API side applied (acked)
//   gpufleet_agent_deliveries_total{result}                delivery calls: ok | rejected (the
//       API server refused the write: a 4xx such as an admission denial; the records stay
//       and are retried) | unavailable (transport error, 5xx, throttling)
//   gpufleet_agent_monitor_errors_total                    monitor polls that threw
//   gpufleet_agent_delivery_duration_seconds               one delivery call (histogram)
//   gpufleet_agent_record_delivery_latency_seconds         journalled -> acked, per record
//       (histogram; sampled: at most kLatencySamples undelivered records per node are timed)
//   gpufleet_agent_journal_backlog_records                 undelivered records, all nodes
//   gpufleet_agent_journal_backlog_max_records             the largest backlog of one node
//   gpufleet_agent_nodes_with_backlog                      nodes with undelivered records
//   gpufleet_agent_nodes                                   agents in this process
//   gpufleet_agent_journal_bytes                           journal bytes on disk, all nodes
//   gpufleet_agent_remediation_requests_total{outcome}     remediation requests handled, by
//       outcome (remediation.h's Outcome names: Succeeded, Failed, Rejected, Stale, ...)
#pragma once

#include <cstddef>
#include <string_view>

#include "core/metrics.h"

namespace gpufleet::agent {

class AgentPool;

// Undelivered records per node whose append time is remembered for the latency histogram.
inline constexpr std::size_t kLatencySamples = 256;

struct AgentMetrics {
  explicit AgentMetrics(core::metrics::Registry& registry = core::metrics::default_registry());

  core::metrics::Counter::Handle appended, delivered, delivered_ok, rejected, unavailable,
      monitor_errors;
  core::metrics::Histogram::Handle delivery_duration, record_latency;
  core::metrics::Gauge::Handle backlog, backlog_max, nodes_with_backlog, nodes, journal_bytes;
  core::metrics::Counter& remediation_requests;  // {outcome}

  // Counts one handled remediation request (outcome_name() of remediation.h).
  void remediation(std::string_view outcome) { remediation_requests.with({outcome}).inc(); }

  // Sets the gauges from the pool's agents (call it every few seconds).
  void observe(const AgentPool& pool);
};

}  // namespace gpufleet::agent
