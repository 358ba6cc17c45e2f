#include "goodput/fleet.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/time.h"

namespace gpufleet::goodput {

FleetSummary summarize_fleet(const std::vector<Ledger>& ledgers, std::int64_t now) {
  FleetSummary f;
  struct Impact {
    IncidentImpact out;
    std::set<JobKey> jobs;
  };
  std::map<std::string, Impact> incidents;
  auto note = [&](const Interruption& i, const std::string& id, const JobKey& job,
                  std::int64_t gpu_seconds, bool cause) {
    Impact& im = incidents[id];
    im.out.incident = id;
    if (cause) {
      im.out.cause = i.cause;
      im.out.node = i.node;
      im.out.gpu_seconds += gpu_seconds;
    }
    im.jobs.insert(job);
  };
  for (const auto& l : ledgers) {
    if (!l.started_at()) continue;
    const Summary s = l.summary(now);
    ++f.jobs;
    f.wall_gpu_seconds += s.wall * s.gpus;
    f.productive_gpu_seconds += s.productive * s.gpus;
    for (Cause c : kCauses)
      f.gpu_hours_lost[static_cast<std::size_t>(c)] +=
          static_cast<double>(s.of(c).lost() * s.gpus) / 3600.0;
    f.interruptions += s.interruptions;
    f.redone_unknown += s.redone_unknown;
    std::vector<const Interruption*> all;
    for (const auto& i : l.history()) all.push_back(&i);
    if (l.open()) all.push_back(&*l.open());
    for (const Interruption* i : all) {
      const Phases p = l.phases_of(*i, now);
      const std::int64_t lost = (p.detection + p.drain + p.restart + p.redone.value_or(0)) * s.gpus;
      if (!i->incident.empty()) note(*i, i->incident, l.key(), lost, true);
      for (const auto& a : i->also) note(*i, a, l.key(), 0, false);
    }
  }
  f.ettr = f.wall_gpu_seconds > 0 ? static_cast<double>(f.productive_gpu_seconds) /
                                        static_cast<double>(f.wall_gpu_seconds)
                                  : 1.0;
  for (auto& [id, im] : incidents) {
    im.out.jobs = static_cast<std::int64_t>(im.jobs.size());
    f.incidents.push_back(std::move(im.out));
  }
  std::sort(f.incidents.begin(), f.incidents.end(),
            [](const IncidentImpact& a, const IncidentImpact& b) {
              if (a.jobs != b.jobs) return a.jobs > b.jobs;
              if (a.gpu_seconds != b.gpu_seconds) return a.gpu_seconds > b.gpu_seconds;
              return a.incident < b.incident;
            });
  return f;
}

std::vector<NodeReliability> node_reliability(const std::vector<IncidentRecord>& incidents,
                                              std::int64_t now, const LemonPolicy& policy,
                                              std::optional<std::int64_t> observed_since) {
  if (policy.window_seconds < 1)
    throw core::InvalidInput("lemon policy: window " + std::to_string(policy.window_seconds) +
                             "s is not positive (use a window of 1 second or more, e.g. 30 days)");
  if (policy.min_incidents < 1)
    throw core::InvalidInput("lemon policy: minimum incidents " +
                             std::to_string(policy.min_incidents) +
                             " is not positive (use 1 or more, e.g. 3)");
  const std::int64_t from =
      std::max(now - policy.window_seconds, observed_since.value_or(INT64_MIN));
  const std::int64_t observed = std::max<std::int64_t>(1, now - from);
  std::set<std::string> seen;
  std::map<std::string, NodeReliability> nodes;
  for (const auto& r : incidents) {
    if (r.cause == Cause::HostPackage || r.cause == Cause::User) continue;
    if (r.at < from || r.at > now || r.node.empty()) continue;
    if (!seen.insert(r.id).second) continue;
    NodeReliability& n = nodes[r.node];
    n.node = r.node;
    ++n.incidents;
    ++n.by_cause[static_cast<std::size_t>(r.cause)];
    n.last_at = std::max(n.last_at, r.at);
  }
  std::vector<NodeReliability> out;
  for (auto& [name, n] : nodes) {
    n.mtbi_seconds = static_cast<double>(observed) / static_cast<double>(n.incidents);
    n.lemon = n.incidents >= policy.min_incidents;
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const NodeReliability& a, const NodeReliability& b) {
    if (a.lemon != b.lemon) return a.lemon;
    if (a.incidents != b.incidents) return a.incidents > b.incidents;
    if (a.last_at != b.last_at) return a.last_at > b.last_at;
    return a.node < b.node;
  });
  return out;
}

Cause cause_of_entities(const std::vector<std::string>& entities) {
  bool nic = false;
  for (const auto& e : entities) {
    const std::string_view check = std::string_view(e).substr(0, e.find('/'));
    if (check == "xid" || check == "gpu") return Cause::GpuXid;
    if (check == "ib-port") nic = true;
  }
  return nic ? Cause::Nic : Cause::SentinelRemediation;
}

namespace {

std::optional<std::int64_t> time_at(const core::Value& rem,
                                    std::initializer_list<std::string_view> path,
                                    std::string_view field, std::string_view source) {
  const core::Value* v = rem.get(path);
  if (v == nullptr || v->is_null()) return std::nullopt;
  const auto t = v->is_string() ? core::Timestamp::try_parse_rfc3339(v->as_string())
                                : std::optional<core::Timestamp>{};
  if (!t)
    core::fail_field(source, field,
                     "value " + core::describe_value(*v) + " is not an RFC 3339 time",
                     "the API server writes times as \"2025-03-01T12:00:00Z\"");
  return t->seconds;
}

struct RemFacts {
  std::string name;
  std::string node;
  std::int64_t detected = 0;
  Cause cause = Cause::Unknown;
};

std::optional<RemFacts> remediation_facts(const core::Value& rem, std::string_view source) {
  if (rem.get_string({"spec", "reason"}) == "NewNode") return std::nullopt;
  RemFacts f;
  f.name = std::string(rem.get_string({"metadata", "name"}));
  if (f.name.empty())
    core::fail_field(source, "metadata.name", "is required", "a Remediation has a name");
  f.node = std::string(rem.get_string({"spec", "nodeName"}));
  if (f.node.empty())
    core::fail_field(source, "spec.nodeName", "is required", "the node of the incident");
  auto detected = time_at(rem, {"spec", "detectedAt"}, "spec.detectedAt", source);
  if (!detected)
    detected =
        time_at(rem, {"metadata", "creationTimestamp"}, "metadata.creationTimestamp", source);
  if (!detected)
    core::fail_field(source, "spec.detectedAt", "is required",
                     "the incident's detectedAt or creationTimestamp");
  f.detected = *detected;
  std::vector<std::string> entities;
  if (const core::Value* es = rem.get({"spec", "entities"}); es && es->is_list())
    for (const auto& e : es->as_list())
      if (e.is_string()) entities.push_back(e.as_string());
  f.cause = cause_of_entities(entities);
  return f;
}

}  // namespace

std::optional<InterruptionEvent> event_from_remediation(const core::Value& rem,
                                                        std::string_view source) {
  auto f = remediation_facts(rem, source);
  if (!f) return std::nullopt;
  InterruptionEvent e;
  e.incident = f->name;
  e.cause = f->cause;
  e.node = f->node;
  e.fault_at = f->detected;
  e.acted_at = time_at(rem, {"status", "quarantinedAt"}, "status.quarantinedAt", source);
  if (!e.acted_at)
    e.acted_at = time_at(rem, {"status", "drainStartedAt"}, "status.drainStartedAt", source);
  const std::string_view phase = rem.get_string({"status", "phase"});
  if (phase == "Released" || phase == "Failed" || phase == "Cancelled")
    e.ended_at = time_at(rem, {"status", "completedAt"}, "status.completedAt", source);
  return e;
}

std::optional<IncidentRecord> incident_from_remediation(const core::Value& rem,
                                                        std::string_view source) {
  auto f = remediation_facts(rem, source);
  if (!f) return std::nullopt;
  IncidentRecord r;
  r.id = f->name;
  r.node = f->node;
  r.at = f->detected;
  r.cause = f->cause;
  return r;
}

}  // namespace gpufleet::goodput
