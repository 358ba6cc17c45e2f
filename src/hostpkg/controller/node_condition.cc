#include "hostpkg/controller/node_condition.h"

#include <vector>

#include "hostpkg/controller/record_store.h"
#include "kube/api/conditions.h"

namespace gpufleet::hostpkg {

std::optional<core::Value> drift_condition_patch(
    const std::map<std::string, std::string, std::less<>>& records,
    const std::unordered_set<std::string>& reporting, const NodeDriftCondition& current,
    std::chrono::system_clock::time_point now) {
  std::vector<std::string> drifted;
  for (const auto& [set, text] : records) {
    // Most records hold no drift: skip the parse for them (this runs for every node per pass).
    if (!reporting.contains(set) || text.find("\"drift\"") == std::string::npos) continue;
    RecordRead rr = parse_record_text(set, text);
    if (rr.record && rr.record->drift)
      drifted.push_back(set + "/" + rr.record->drift->package + ": " + rr.record->drift->message);
  }
  kube::Condition want{std::string(kDriftCondition),
                       "False",
                       "NoDrift",
                       "no HostPackageSet reports drift on this node",
                       0,
                       {}};
  if (!drifted.empty()) {
    want.status = "True";
    want.reason = "ChecksFailed";
    want.message = "re-verification failed: ";
    for (std::size_t i = 0; i < drifted.size() && i < 5; ++i)
      want.message += (i > 0 ? "; " : "") + drifted[i];
    if (drifted.size() > 5) want.message += "; ... (" + std::to_string(drifted.size()) + " sets)";
    if (want.message.size() > 1000) want.message.resize(1000);
  } else if (!current.present) {
    return std::nullopt;
  }
  if (current.present && current.status == want.status && current.reason == want.reason &&
      current.message == want.message)
    return std::nullopt;
  core::Value list = core::Value::list();
  if (current.present) {
    core::Value old;
    old["type"] = std::string(kDriftCondition);
    old["status"] = current.status;
    old["reason"] = current.reason;
    old["message"] = current.message;
    old["lastTransitionTime"] = current.last_transition;
    list.push_back(std::move(old));
  }
  kube::set_condition(list, want, now);
  core::Value cond = list.as_list().front();
  // NodeCondition has no observedGeneration (Nodes have no spec generation to observe).
  cond.as_map().erase("observedGeneration");
  cond["lastHeartbeatTime"] = kube::format_rfc3339(now);
  core::Value patch;
  patch["status"]["conditions"] = core::Value::list();
  patch["status"]["conditions"].push_back(std::move(cond));
  return patch;
}

}  // namespace gpufleet::hostpkg
