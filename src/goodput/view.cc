#include "goodput/view.h"

#include <algorithm>
#include <cstdio>

#include "core/errors.h"
#include "core/json.h"
#include "core/time.h"
#include "goodput/controller.h"
#include "goodput/fleet.h"
#include "goodput/ledger.h"
#include "kube/api/meta.h"

namespace gpufleet::goodput {

std::string human_seconds(std::int64_t s) {
  if (s < 0) s = 0;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>((s % 86400) / 3600));
  }
  return buf;
}

namespace {

std::string percent(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", r * 100.0);
  return buf;
}

std::string hours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", h);
  return buf;
}

std::string last_cause(const Ledger& l) {
  if (l.open()) return std::string(cause_name(l.open()->cause));
  if (!l.history().empty()) return std::string(cause_name(l.history().back().cause));
  return "";
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

}  // namespace

core::Value goodput_document(const std::vector<core::Value>& configmaps,
                             const std::vector<core::Value>& remediations, std::int64_t now) {
  core::Value doc = core::Value::map();
  core::Value errors = core::Value::list();
  std::vector<std::pair<std::string, Ledger>> ledgers;  // ConfigMap name, ledger
  for (const core::Value& cm : configmaps) {
    const std::string name(kube::name_of(cm));
    const std::string source = "configmap " + std::string(kube::namespace_of(cm)) + "/" + name;
    try {
      const core::Value* data = cm.get({"data", kLedgerDataKey});
      if (data == nullptr || !data->is_string())
        throw core::InvalidInput(source + ": data." + std::string(kLedgerDataKey) + " is missing");
      ledgers.emplace_back(name,
                           Ledger::from_value(core::parse_json(data->as_string(), source), source));
    } catch (const core::InvalidInput& e) {
      errors.push_back(std::string(e.what()));
    }
  }
  std::sort(ledgers.begin(), ledgers.end(),
            [](const auto& a, const auto& b) { return a.second.key() < b.second.key(); });
  std::vector<Ledger> all;
  core::Value jobs = core::Value::list();
  for (const auto& [cm_name, l] : ledgers) {
    all.push_back(l);
    const Summary s = l.summary(now);
    core::Value j = core::Value::map();
    j["namespace"] = l.key().ns;
    j["name"] = l.key().name;
    j["label"] = l.key().label;
    j["configMap"] = cm_name;
    j["state"] = std::string(state_name(s.state));
    j["gpus"] = s.gpus;
    j["wallSeconds"] = s.wall;
    j["productiveSeconds"] = s.productive;
    j["lostSeconds"] = s.lost;
    j["queuedSeconds"] = s.queued;
    j["ettr"] = s.ettr;
    j["interruptions"] = s.interruptions;
    j["redoneUnknown"] = s.redone_unknown;
    j["lastCause"] = last_cause(l);
    core::Value by = core::Value::map();
    for (Cause c : kCauses) {
      if (s.of(c).interruptions == 0 && s.of(c).lost() == 0) continue;
      by[cause_name(c)] = s.of(c).lost();
    }
    j["lostSecondsByCause"] = std::move(by);
    jobs.push_back(std::move(j));
  }
  const FleetSummary fs = summarize_fleet(all, now);
  core::Value fleet = core::Value::map();
  fleet["jobs"] = fs.jobs;
  fleet["ettr"] = fs.ettr;
  fleet["wallGpuSeconds"] = fs.wall_gpu_seconds;
  fleet["productiveGpuSeconds"] = fs.productive_gpu_seconds;
  fleet["interruptions"] = fs.interruptions;
  fleet["redoneUnknown"] = fs.redone_unknown;
  core::Value lost = core::Value::map();
  for (Cause c : kCauses) lost[cause_name(c)] = fs.gpu_hours_lost[static_cast<std::size_t>(c)];
  fleet["gpuHoursLost"] = std::move(lost);

  std::vector<IncidentRecord> records;
  for (const core::Value& r : remediations) {
    const std::string source = "remediation " + std::string(kube::name_of(r));
    try {
      if (auto rec = incident_from_remediation(r, source)) records.push_back(*rec);
    } catch (const core::InvalidInput& e) {
      errors.push_back(std::string(e.what()));
    }
  }
  core::Value nodes = core::Value::list();
  core::Value lemons = core::Value::list();
  for (const NodeReliability& n : node_reliability(records, now, LemonPolicy{})) {
    core::Value v = core::Value::map();
    v["node"] = n.node;
    v["incidents"] = n.incidents;
    v["lemon"] = n.lemon;
    v["mtbiSeconds"] = n.mtbi_seconds;
    v["lastAt"] = core::Timestamp{n.last_at, 0}.to_rfc3339(core::TimestampPrecision::Seconds);
    if (n.lemon) lemons.push_back(n.node);
    nodes.push_back(std::move(v));
  }
  doc["fleet"] = std::move(fleet);
  doc["jobs"] = std::move(jobs);
  doc["nodes"] = std::move(nodes);
  doc["lemonNodes"] = std::move(lemons);
  doc["errors"] = std::move(errors);
  return doc;
}

std::string render_goodput(const core::Value& doc) {
  std::string out;
  const core::Value& fleet = *doc.find("fleet");
  out += "Fleet ETTR " + percent(fleet.find("ettr")->as_double()) + " over " +
         std::to_string(fleet.find("jobs")->as_int()) + " job(s), " +
         std::to_string(fleet.find("interruptions")->as_int()) +
         " interruption(s); GPU-hours lost:";
  bool any = false;
  for (const auto& e : fleet.find("gpuHoursLost")->as_map()) {
    if (e.value.as_double() <= 0) continue;
    out += " " + e.key + " " + hours(e.value.as_double());
    any = true;
  }
  out += any ? "\n" : " none\n";
  const core::Value& jobs = *doc.find("jobs");
  if (jobs.size() == 0) {
    out += "\nNo jobs with a goodput ledger.\n";
  } else {
    std::vector<std::vector<std::string>> rows = {{"JOB", "STATE", "GPUS", "WALL", "PRODUCTIVE",
                                                   "LOST", "ETTR", "INTERRUPTIONS", "LAST CAUSE"}};
    for (const core::Value& j : jobs.as_list()) {
      std::string ettr = percent(j.find("ettr")->as_double());
      if (j.find("redoneUnknown")->as_int() > 0) ettr = "≤" + ettr;
      std::string cause(j.get_string({"lastCause"}));
      rows.push_back(
          {std::string(j.get_string({"namespace"})) + "/" + std::string(j.get_string({"name"})),
           std::string(j.get_string({"state"})), std::to_string(j.find("gpus")->as_int()),
           human_seconds(j.find("wallSeconds")->as_int()),
           human_seconds(j.find("productiveSeconds")->as_int()),
           human_seconds(j.find("lostSeconds")->as_int()), ettr,
           std::to_string(j.find("interruptions")->as_int()), cause.empty() ? "-" : cause});
    }
    std::vector<std::size_t> w(rows[0].size(), 0);
    for (const auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    out += "\n";
    for (const auto& r : rows) {
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i)
        line += i + 1 == r.size() ? r[i] : pad(r[i], w[i] + 2);
      out += line + "\n";
    }
  }
  const core::Value& lemons = *doc.find("lemonNodes");
  out += "\nLemon nodes (3+ incidents in 30 days): ";
  if (lemons.size() == 0) {
    out += "none\n";
  } else {
    for (const core::Value& n : doc.find("nodes")->as_list()) {
      if (!n.find("lemon")->as_bool()) continue;
      out += "\n  " + std::string(n.get_string({"node"})) + "  " +
             std::to_string(n.find("incidents")->as_int()) + " incidents, MTBI " +
             human_seconds(static_cast<std::int64_t>(n.find("mtbiSeconds")->as_double())) +
             ", last " + std::string(n.get_string({"lastAt"}));
    }
    out += "\n";
  }
  for (const core::Value& e : doc.find("errors")->as_list())
    out += "error: " + e.as_string() + "\n";
  return out;
}

}  // namespace gpufleet::goodput
