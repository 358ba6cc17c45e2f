#include "kube/events.h"

#include <cstdio>

#include "core/errors.h"
#include "kube/credentials.h"

namespace gpufleet::kube {

EventRecorder::EventRecorder(Client& client, EventSource source, std::chrono::seconds series_window)
    : client_(client), source_(std::move(source)), window_(series_window) {
  if (source_.controller.empty()) {
    throw core::InvalidInput("EventRecorder: source.controller (reportingController) is required");
  }
}

std::string EventRecorder::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

bool EventRecorder::record(const core::Value& regarding, EventType type, std::string_view reason,
                           std::string_view action, std::string_view note) {
  if (reason.empty() || action.empty()) {
    throw core::InvalidInput("EventRecorder::record: reason and action are required");
  }
  std::string_view obj_name = name_of(regarding);
  std::string_view obj_ns = namespace_of(regarding);
  // Events about cluster-scoped objects (Nodes) live in "default", as kubectl expects.
  std::string event_ns = obj_ns.empty() ? "default" : std::string(obj_ns);
  std::string type_name = type == EventType::Warning ? "Warning" : "Normal";
  // The API limits note to 1 KiB.
  std::string note_text(note.substr(0, 1024));
  std::string key = std::string(regarding.get_string({"kind"})) + "/" + event_ns + "/" +
                    std::string(obj_name) + "/" + std::string(uid_of(regarding)) + "|" + type_name +
                    "|" + std::string(reason) + "|" + std::string(action) + "|" + note_text;
  auto now = std::chrono::steady_clock::now();
  std::string micro_now = format_micro_time(std::chrono::system_clock::now());

  std::unique_lock lock(mu_);
  auto it = series_.find(key);
  if (it != series_.end() && now - it->second.last_seen < window_) {
    Series& s = it->second;
    s.count += 1;
    s.last_seen = now;
    core::Value patch;
    patch["series"]["count"] = s.count;
    patch["series"]["lastObservedTime"] = micro_now;
    std::string ns = s.namespace_, name = s.name;
    lock.unlock();
    try {
      client_.patch(resources::events(), ns, name, PatchType::Merge, patch);
      return true;
    } catch (const ApiError& e) {
      std::lock_guard relock(mu_);
      last_error_ = e.what();
      if (!e.is(Reason::NotFound)) return false;
      series_.erase(key);  // the Event expired (TTL): start a new one below
    } catch (const std::exception& e) {
      std::lock_guard relock(mu_);
      last_error_ = e.what();
      return false;
    }
    lock.lock();
  }
  // Bound the cache: forget series outside the window.
  for (auto s = series_.begin(); s != series_.end();) {
    s = now - s->second.last_seen >= window_ ? series_.erase(s) : std::next(s);
  }
  lock.unlock();

  char suffix[32];
  std::snprintf(
      suffix, sizeof suffix, ".%llx",
      static_cast<unsigned long long>(std::chrono::system_clock::now().time_since_epoch().count()));
  core::Value ev;
  ev["apiVersion"] = "events.k8s.io/v1";
  ev["kind"] = "Event";
  ev["metadata"]["name"] = std::string(obj_name.empty() ? "event" : obj_name) + suffix;
  ev["metadata"]["namespace"] = event_ns;
  ev["eventTime"] = micro_now;
  ev["reportingController"] = source_.controller;
  ev["reportingInstance"] = source_.instance.empty() ? source_.controller : source_.instance;
  ev["action"] = action;
  ev["reason"] = reason;
  ev["type"] = type_name;
  if (!note_text.empty()) ev["note"] = note_text;
  core::Value& ref = ev["regarding"];
  ref["apiVersion"] = regarding.get_string({"apiVersion"});
  ref["kind"] = regarding.get_string({"kind"});
  ref["name"] = obj_name;
  if (!obj_ns.empty()) ref["namespace"] = obj_ns;
  if (!uid_of(regarding).empty()) ref["uid"] = uid_of(regarding);
  try {
    core::Value created = client_.create(resources::events(), ev);
    std::lock_guard relock(mu_);
    series_[key] = Series{event_ns, std::string(name_of(created)), 1, now};
    return true;
  } catch (const std::exception& e) {
    std::lock_guard relock(mu_);
    last_error_ = e.what();
    return false;
  }
}

}  // namespace gpufleet::kube
