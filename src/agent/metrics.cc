#include "agent/metrics.h"

#include <algorithm>

#include "agent/agent.h"

namespace gpufleet::agent {
namespace {

namespace metrics = core::metrics;

metrics::Counter& deliveries(metrics::Registry& r) {
  return r.counter("gpufleet_agent_deliveries_total",
                   "Delivery calls by result: ok, rejected (the API server refused the write, "
                   "e.g. an admission denial; records stay in the journal), unavailable.",
                   {"result"});
}

}  // namespace

AgentMetrics::AgentMetrics(metrics::Registry& r)
    : appended(r.counter("gpufleet_agent_records_appended_total",
                         "Records journalled, all nodes of this process.", {})
                   .with({})),
      delivered(r.counter("gpufleet_agent_records_delivered_total",
                          "Records the API side applied (acked), all nodes of this process.", {})
                    .with({})),
      delivered_ok(deliveries(r).with({"ok"})),
      rejected(deliveries(r).with({"rejected"})),
      unavailable(deliveries(r).with({"unavailable"})),
      monitor_errors(r.counter("gpufleet_agent_monitor_errors_total",
                               "Monitor polls that failed, all nodes of this process.", {})
                         .with({})),
      // 1 ms .. ~33 s: an API round trip up to a request timeout.
      delivery_duration(r.histogram("gpufleet_agent_delivery_duration_seconds",
                                    "Time one delivery call (a batch of records) takes.",
                                    metrics::exponential_buckets(0.001, 2, 16), {})
                            .with({})),
      // 10 ms .. ~2.8 h: a record may wait out an API outage in the journal.
      record_latency(r.histogram("gpufleet_agent_record_delivery_latency_seconds",
                                 "Time from journalling a record to its delivery (sampled).",
                                 metrics::exponential_buckets(0.01, 2, 21), {})
                         .with({})),
      backlog(r.gauge("gpufleet_agent_journal_backlog_records",
                      "Undelivered journal records, all nodes of this process.", {})
                  .with({})),
      backlog_max(r.gauge("gpufleet_agent_journal_backlog_max_records",
                          "The largest undelivered backlog of one node.", {})
                      .with({})),
      nodes_with_backlog(r.gauge("gpufleet_agent_nodes_with_backlog",
                                 "Nodes with undelivered journal records.", {})
                             .with({})),
      nodes(r.gauge("gpufleet_agent_nodes", "Node agents in this process.", {}).with({})),
      journal_bytes(r.gauge("gpufleet_agent_journal_bytes",
                            "Journal bytes on disk, all nodes of this process.", {})
                        .with({})),
      remediation_requests(r.counter("gpufleet_agent_remediation_requests_total",
                                     "Remediation requests (Node annotation) handled, by "
                                     "outcome: Succeeded, Failed, Rejected, NotQuarantined, "
                                     "AlreadyTaken, Stale, Disabled.",
                                     {"outcome"})) {}

void AgentMetrics::observe(const AgentPool& pool) {
  double sum = 0, max = 0, with = 0, count = 0, bytes = 0;
  pool.for_each([&](const Agent& a) {
    const JournalStats js = a.stats().journal;
    const double pending = static_cast<double>(js.last_id - std::min(js.acked_id, js.last_id));
    sum += pending;
    max = std::max(max, pending);
    with += pending > 0 ? 1 : 0;
    count += 1;
    bytes += static_cast<double>(js.bytes);
  });
  backlog.set(sum);
  backlog_max.set(max);
  nodes_with_backlog.set(with);
  nodes.set(count);
  journal_bytes.set(bytes);
}

}  // namespace gpufleet::agent
