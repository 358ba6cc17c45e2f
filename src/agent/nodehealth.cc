#include "agent/nodehealth.h"

#include <algorithm>

#include "agent/remediation.h"
#include "core/json.h"
#include "core/log.h"
#include "kube/errors.h"

namespace gpufleet::agent {
namespace {

int severity(std::string_view state) {
  if (state == "Healthy") return 0;
  if (state == "Unknown") return 1;
  if (state == "Warning") return 2;
  if (state == "Fatal") return 3;
  return -1;
}

std::int64_t int_of(const core::Value* v) {
  if (v == nullptr) return 0;
  if (const auto* i = v->if_int()) return *i;
  if (v->is_uint()) return static_cast<std::int64_t>(v->as_uint());
  return 0;
}

std::string bounded(std::string_view s) {
  if (s.size() <= kMaxMessage) return std::string(s);
  // Said, not silent: the reader sees that the message was shortened and by how much.
  std::string cut(s.substr(0, kMaxMessage - 40));
  return cut + " … (" + std::to_string(s.size() - cut.size()) + " more bytes)";
}

// The list item whose `key` equals `value`, appended if missing (nullptr when the list is full).
core::Value* item(core::Value& list, std::string_view key, std::string_view value,
                  std::size_t max) {
  if (!list.is_list()) list = core::Value::list();
  for (auto& v : list.as_list())
    if (v.get_string({key}) == value) return &v;
  if (list.size() >= max) return nullptr;
  core::Value fresh = core::Value::map();
  fresh[key] = std::string(value);
  list.push_back(std::move(fresh));
  return &list.as_list().back();
}

// Sets state/reason/message; lastTransitionTime moves only when the state changes.
void set_state(core::Value& target, std::string_view state, std::string_view reason,
               std::string_view message, std::string_view time) {
  if (target.get_string({"state"}) != state) target["lastTransitionTime"] = std::string(time);
  target["state"] = std::string(state);
  target["reason"] = std::string(reason);
  target["message"] = bounded(message);
}

void reject(core::Value& status, const Record& r, const std::string& why) {
  status["rejectedRecords"] = int_of(status.find("rejectedRecords")) + 1;
  status["lastRejection"] = bounded("record " + std::to_string(r.id) + ": " + why);
}

void fold_health(core::Value& status, const Record& r, const core::Value& p) {
  const std::string_view check = p.get_string({"check"});
  const std::string_view state = p.get_string({"state"});
  if (check.empty())
    return reject(status, r, "health record without 'check'; monitors must name their check");
  if (severity(state) < 0)
    return reject(status, r,
                  "health record state '" + std::string(state) +
                      "' is not one of Healthy, Unknown, Warning, Fatal");
  const std::string_view time = p.get_string({"time"});
  const std::string_view reason = p.get_string({"reason"});
  const std::string_view message = p.get_string({"message"});
  core::Value* c = item(status["checks"], "name", check, kMaxChecks);
  if (c == nullptr)
    return reject(status, r,
                  "more than 64 checks; check '" + std::string(check) + "' not recorded");
  const std::string_view entity = p.get_string({"entity"});
  // The state of what the record is about (the entity, else the check) before it: history
  // records transitions only, so a record that changes only the reason or the message of the
  // same state (a follow-up line of one fault, a monitor re-reporting after a restart) updates
  // the status and adds no entry. A first sighting ("" before) is a transition.
  std::string before;
  if (entity.empty()) {
    before = c->get_string({"state"});
    set_state(*c, state, reason, message, time);
  } else {
    core::Value* e = item((*c)["entities"], "id", entity, kMaxEntities);
    if (e == nullptr)
      return reject(status, r,
                    "check '" + std::string(check) + "' has 64 entities; '" + std::string(entity) +
                        "' not recorded");
    if (auto k = p.get_string({"entityKind"}); !k.empty()) (*e)["kind"] = std::string(k);
    before = e->get_string({"state"});
    set_state(*e, state, reason, message, time);
    // The check is as bad as its worst entity.
    const core::Value* worst = e;
    for (const auto& other : (*c)["entities"].as_list())
      if (severity(other.get_string({"state"})) > severity(worst->get_string({"state"})))
        worst = &other;
    set_state(*c, worst->get_string({"state"}), worst->get_string({"reason"}),
              worst->get_string({"message"}), time);
  }
  if (before == state) return;
  core::Value h = core::Value::map();
  h["recordId"] = static_cast<std::int64_t>(r.id);
  h["time"] = std::string(time);
  h["check"] = std::string(check);
  if (!entity.empty()) h["entity"] = std::string(entity);
  h["state"] = std::string(state);
  if (!reason.empty()) h["reason"] = std::string(reason);
  core::Value& history = status["history"];
  if (!history.is_list()) history = core::Value::list();
  history.push_back(std::move(h));
  auto& list = history.as_list();
  if (list.size() > kMaxHistory) list.erase(list.begin(), list.end() - kMaxHistory);
}

// The last remediation request the agent took and what came of it (status.remediation).
void fold_remediation(core::Value& status, const Record& r, const core::Value& p) {
  if (r.kind == kRemediationBundleKind) {
    // The last incident's log bundle (status.remediationBundle), which sentinel copies into
    // the incident.
    core::Value b = core::Value::map();
    for (const char* k : {"incident", "state", "path", "sha256", "error"})
      if (auto v = p.get_string({k}); !v.empty()) b[k] = bounded(v);
    for (const char* k : {"attempt", "bytes", "uncompressedBytes"})
      if (const core::Value* v = p.find(k); v != nullptr && v->is_int()) b[k] = *v;
    for (const char* k : {"sections", "truncated", "errors"}) {
      core::Value l = core::Value::list();
      if (const core::Value* v = p.find(k); v != nullptr && v->is_list())
        for (const auto& x : v->as_list())
          if (x.is_string() && l.size() < 16) l.push_back(bounded(x.as_string()));
      if (l.size() > 0) b[k] = std::move(l);
    }
    b["recordId"] = static_cast<std::int64_t>(r.id);
    status["remediationBundle"] = std::move(b);
    return;
  }
  std::string state;
  if (r.kind == kRemediationStartedKind) state = "Started";
  if (r.kind == kRemediationSucceededKind) state = "Succeeded";
  if (r.kind == kRemediationFailedKind) state = "Failed";
  if (r.kind == kRemediationRejectedKind) state = "Rejected";
  if (state.empty()) return;  // a kind of a later agent: nothing to show here
  core::Value v = core::Value::map();
  if (auto i = p.get_string({"incident"}); !i.empty()) v["incident"] = std::string(i);
  if (const core::Value* a = p.find("attempt"); a != nullptr && a->is_int()) v["attempt"] = *a;
  if (auto a = p.get_string({"action"}); !a.empty()) v["action"] = std::string(a);
  v["state"] = state;
  if (auto m = p.get_string({"message"}); !m.empty()) v["message"] = bounded(m);
  if (auto e = p.get_string({"error"}); !e.empty()) v["error"] = bounded(e);
  v["recordId"] = static_cast<std::int64_t>(r.id);
  if (auto t = p.get_string({"time"}); !t.empty()) v["time"] = std::string(t);
  status["remediation"] = std::move(v);
}

}  // namespace

std::size_t fold_records(core::Value& status, std::span<const Record> records) {
  if (!status.is_map()) status = core::Value::map();
  std::int64_t last = int_of(status.find("lastAppliedRecordId"));
  std::size_t changed = 0;
  for (const auto& r : records) {
    if (static_cast<std::int64_t>(r.id) <= last) continue;  // redelivered: already applied
    core::Value p;
    try {
      p = core::parse_json(r.payload, "journal record " + std::to_string(r.id));
    } catch (const std::exception& e) {
      reject(status, r, e.what());
    }
    if (r.kind == kHealthKind && p.is_map()) {
      fold_health(status, r, p);
    } else if (r.kind == kBootKind && p.is_map()) {
      status["bootID"] = std::string(p.get_string({"bootId"}));
    } else if (r.kind.starts_with("remediation.") && p.is_map()) {
      fold_remediation(status, r, p);
    } else if (r.kind == kCompactedKind && p.is_map()) {
      // Records the journal had to summarise (over its byte bound during a long outage).
      if (const auto* counts = p.find("counts"); counts != nullptr && counts->is_map()) {
        core::Value& total = status["compactedRecords"];
        if (!total.is_map()) total = core::Value::map();
        for (const auto& [k, n] : counts->as_map()) total[k] = int_of(total.find(k)) + int_of(&n);
      }
    }
    // Other kinds belong to other targets (or a later agent): not an error, they only advance
    // the mark.
    last = static_cast<std::int64_t>(r.id);
    ++changed;
  }
  status["lastAppliedRecordId"] = last;
  // The node's overall state, for `kubectl get nodehealth` and for rules: its worst check.
  if (const auto* checks = status.find("checks"); checks != nullptr && checks->is_list()) {
    std::string_view worst;
    for (const auto& c : checks->as_list())
      if (worst.empty() || severity(c.get_string({"state"})) > severity(worst))
        worst = c.get_string({"state"});
    if (!worst.empty()) status["state"] = std::string(worst);
  }
  return changed;
}

NodeHealthSink::NodeHealthSink(kube::Client& client, std::string field_manager)
    : NodeHealthSink([&client](const NodeIdentity&) -> kube::Client& { return client; },
                     std::move(field_manager)) {}

std::size_t NodeHealthSink::deliver(const NodeIdentity& node, std::span<const Record> records) {
  kube::Client& client = client_for_(node);
  for (int attempt = 0;; ++attempt) {
    auto obj = client.try_get(kNodeHealthResource, "", node.node_name);
    if (!obj) {
      core::Value fresh = core::Value::map();
      fresh["apiVersion"] = kNodeHealthResource.api_version();
      fresh["kind"] = "NodeHealth";
      fresh["metadata"]["name"] = node.node_name;
      fresh["spec"]["nodeName"] = node.node_name;
      try {
        obj = client.create(kNodeHealthResource, fresh, field_manager_);
      } catch (const kube::ApiError& e) {
        if (!e.is(kube::Reason::AlreadyExists) || attempt >= 5) throw;
        continue;  // another writer (this agent's previous life) created it: re-read
      }
    }
    core::Value status = obj->find("status") != nullptr ? *obj->find("status") : core::Value::map();
    if (fold_records(status, records) == 0) return records.size();  // all redelivered
    (*obj)["status"] = std::move(status);
    try {
      client.update_status(kNodeHealthResource, *obj);
      return records.size();
    } catch (const kube::ApiError& e) {
      // Conflict: someone wrote in between (a second agent instance during a rollout). Re-read:
      // the mark there tells which of our records are already applied.
      if (!e.is(kube::Reason::Conflict) || attempt >= 5) throw;
    }
  }
}

}  // namespace gpufleet::agent
