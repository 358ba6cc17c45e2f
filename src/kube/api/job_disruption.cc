#include "kube/api/job_disruption.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/text.h"
#include "core/time.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::kube {

namespace {

std::string rfc3339_ms(std::int64_t ms) {
  return core::Timestamp::from_unix_nanos(ms * 1'000'000)
      .to_rfc3339(core::TimestampPrecision::Micros);
}

std::int64_t ms_of(std::string_view text) {
  const auto t = core::Timestamp::try_parse_rfc3339(core::trim(text));
  if (!t) return 0;
  return t->seconds * 1000 + t->nanos / 1'000'000;
}

std::string_view annotation(const core::Value& pod, std::string_view key) {
  const core::Value* a = pod.get({"metadata", "annotations", key});
  return a != nullptr && a->is_string() ? std::string_view(a->as_string()) : std::string_view();
}

PodRef ref_of(const core::Value& pod) {
  return {std::string(namespace_of(pod)), std::string(name_of(pod)), std::string(uid_of(pod)),
          std::string(pod.get_string({"spec", "nodeName"}))};
}

bool terminating(const core::Value& pod) {
  return pod.get({"metadata", "deletionTimestamp"}) != nullptr;
}

// The job answered this request: the ack annotation names it, or a checkpoint was written at
// or after the request (whole seconds: last-checkpoint is metav1.Time-like).
bool acknowledged(const std::vector<const core::Value*>& live, const JobRecord& r) {
  for (const core::Value* p : live) {
    if (!r.request_id.empty() &&
        core::trim(annotation(*p, kCheckpointAckAnnotation)) == r.request_id)
      return true;
    const std::string_view last = core::trim(annotation(*p, kLastCheckpointAnnotation));
    if (last.empty() || last == "none") continue;
    const auto t = core::Timestamp::try_parse_rfc3339(last);
    if (t && t->seconds >= r.requested_ms / 1000) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> default_gang_label_keys() {
  return {"goodput.gpufleet.io/job", "jobset.sigs.k8s.io/jobset-name",
          "training.kubeflow.org/job-name", "batch.kubernetes.io/job-name"};
}

std::vector<std::string> default_excluded_job_label_keys() {
  return {"gpufleet.io/certify-run", "hostpkg.gpufleet.io/stage"};
}

std::string_view job_action_name(JobAction a) noexcept {
  switch (a) {
    case JobAction::RequestCheckpoint: return "RequestCheckpoint";
    case JobAction::Wait: return "Wait";
    case JobAction::DrainGang: return "DrainGang";
    case JobAction::Disrupted: return "Disrupted";
  }
  return "Disrupted";
}

std::optional<GangKey> gang_key_of(const core::Value& pod) {
  const core::Value* labels = pod.get({"metadata", "labels"});
  if (labels == nullptr || !labels->is_map()) return std::nullopt;
  for (const auto& k : default_excluded_job_label_keys())
    if (labels->find(k) != nullptr) return std::nullopt;
  for (const auto& k : default_gang_label_keys()) {
    const core::Value* v = labels->find(k);
    if (v != nullptr && v->is_string() && !v->as_string().empty())
      return GangKey{std::string(namespace_of(pod)), k, v->as_string()};
  }
  return std::nullopt;
}

std::vector<std::string> gang_index(const core::Value& pod) {
  auto key = gang_key_of(pod);
  if (!key) return {};
  return {key->index()};
}

std::vector<JobDecision> decide_jobs(const JobDisruptionInput& in) {
  struct Gang {
    std::vector<const core::Value*> live;  // not Succeeded/Failed, once each
    bool on_node = false;
  };
  std::map<GangKey, Gang> gangs;
  std::set<std::string> seen;
  for (const core::Value* p : in.pods) {
    if (p == nullptr || !p->is_map()) continue;
    const core::Value& pod = *p;
    // DaemonSet and mirror pods belong to their node, not to a job.
    if (pod::terminal(pod) || pod::owned_by_daemon_set(pod) || pod::mirror(pod)) continue;
    auto key = gang_key_of(pod);
    if (!key) continue;
    if (std::find(in.skip_namespaces.begin(), in.skip_namespaces.end(), key->ns) !=
        in.skip_namespaces.end())
      continue;
    const std::string id = key->ns + "/" + std::string(name_of(pod));
    if (!seen.insert(id).second) continue;
    Gang& g = gangs[*key];
    g.live.push_back(&pod);
    if (pod.get_string({"spec", "nodeName"}) == in.node) g.on_node = true;
  }

  std::vector<JobDecision> out;
  for (const auto& entry : gangs) {
    // Named references, not a structured binding: lambdas below capture them (C++20 clang
    // rejects capturing a binding).
    const GangKey& key = entry.first;
    const Gang& g = entry.second;
    if (!g.on_node) continue;
    const JobRecord* rec = nullptr;
    for (const auto& r : in.records)
      if (r.key == key) rec = &r;
    JobDecision d;
    d.key = key;
    if (rec != nullptr && rec->disrupted_ms > 0) {
      // Once per disruption: only the pods recorded then, as long as they still stand (an
      // eviction a PDB refused, or one a restart cut off); their replacements are left alone.
      d.action = JobAction::Disrupted;
      d.reason = rec->reason;
      for (const core::Value* p : g.live) {
        PodRef r = ref_of(*p);
        if (r.node == in.node || terminating(*p)) continue;
        if (std::find(rec->pods.begin(), rec->pods.end(), r) != rec->pods.end() ||
            std::any_of(rec->pods.begin(), rec->pods.end(),
                        [&](const PodRef& x) { return !x.uid.empty() && x.uid == r.uid; }))
          d.evict.push_back(std::move(r));
      }
      out.push_back(std::move(d));
      continue;
    }
    // One pod is no gang: drained as any pod (unless a wait for it was already recorded).
    if (g.live.size() < 2 && rec == nullptr) continue;
    const bool opted = std::any_of(g.live.begin(), g.live.end(), [](const core::Value* p) {
      return core::trim(annotation(*p, kCheckpointContractAnnotation)) == kCheckpointOnRequest;
    });
    auto hold = [&] {
      for (const core::Value* p : g.live)
        if (p->get_string({"spec", "nodeName"}) == in.node) d.held_uids.emplace_back(uid_of(*p));
    };
    auto drain = [&](std::string reason) {
      d.action = JobAction::DrainGang;
      d.reason = std::move(reason);
      for (const core::Value* p : g.live) {
        PodRef r = ref_of(*p);
        if (r.node != in.node && !terminating(*p)) d.evict.push_back(std::move(r));
      }
    };
    if (!opted) {
      drain("NoContract");
    } else if ((rec == nullptr || rec->requested_ms == 0) && in.checkpoint_timeout_s <= 0) {
      drain("NoWait");  // the policy waits for no checkpoint
    } else if (rec == nullptr || rec->requested_ms == 0) {
      d.action = JobAction::RequestCheckpoint;
      d.request_id = in.request_id;
      d.deadline_ms = in.now_ms + in.checkpoint_timeout_s * 1000;
      for (const core::Value* p : g.live)
        if (!terminating(*p)) d.annotate.push_back(ref_of(*p));
      hold();
    } else if (acknowledged(g.live, *rec)) {
      drain("Acknowledged");
    } else if (in.now_ms >= rec->deadline_ms) {
      drain("DeadlineExceeded");
    } else {
      d.action = JobAction::Wait;
      d.request_id = rec->request_id;
      d.deadline_ms = rec->deadline_ms;
      // A pod the request did not reach (a restart between the record and the annotations,
      // or a pod created since) is asked again, with the same id; not one that carries
      // another disruption's request whose deadline is still ahead (a second node of the job
      // taken away meanwhile): two controllers would overwrite each other's request.
      for (const core::Value* p : g.live) {
        if (terminating(*p)) continue;
        const std::string_view asked = core::trim(annotation(*p, kCheckpointRequestedAnnotation));
        if (asked == rec->request_id) continue;
        if (!asked.empty() && ms_of(annotation(*p, kCheckpointDeadlineAnnotation)) > in.now_ms)
          continue;
        d.annotate.push_back(ref_of(*p));
      }
      hold();
    }
    out.push_back(std::move(d));
  }
  return out;
}

void record_decision(std::vector<JobRecord>& records, const JobDecision& d,
                     const JobDisruptionInput& in) {
  if (d.action != JobAction::RequestCheckpoint && d.action != JobAction::DrainGang) return;
  auto it = std::find_if(records.begin(), records.end(),
                         [&](const JobRecord& r) { return r.key == d.key; });
  if (it == records.end()) {
    JobRecord r;
    r.key = d.key;
    records.push_back(std::move(r));
    it = std::prev(records.end());
  }
  if (d.action == JobAction::RequestCheckpoint) {
    it->request_id = in.request_id;
    it->requested_ms = in.now_ms;
    it->deadline_ms = d.deadline_ms;
    return;
  }
  it->disrupted_ms = in.now_ms;
  it->reason = d.reason;
  it->pods.clear();
  // The whole gang as it stands: the node's pods (drained by the node's drain) and the rest.
  std::set<std::string> seen;
  for (const core::Value* p : in.pods) {
    if (p == nullptr || !p->is_map() || pod::terminal(*p)) continue;
    auto key = gang_key_of(*p);
    if (!key || !(*key == d.key)) continue;
    PodRef r = ref_of(*p);
    if (seen.insert(r.name).second) it->pods.push_back(std::move(r));
  }
  std::sort(it->pods.begin(), it->pods.end(),
            [](const PodRef& a, const PodRef& b) { return a.name < b.name; });
}

core::Value job_records_value(const std::vector<JobRecord>& records) {
  core::Value list = core::Value::list();
  for (const auto& r : records) {
    core::Value v = core::Value::map();
    v["namespace"] = r.key.ns;
    v["label"] = r.key.label;
    v["name"] = r.key.name;
    if (!r.request_id.empty()) v["requestId"] = r.request_id;
    if (r.requested_ms > 0) v["requestedAt"] = rfc3339_ms(r.requested_ms);
    if (r.deadline_ms > 0) v["deadline"] = rfc3339_ms(r.deadline_ms);
    if (r.disrupted_ms > 0) v["disruptedAt"] = rfc3339_ms(r.disrupted_ms);
    if (!r.reason.empty()) v["reason"] = r.reason;
    if (!r.pods.empty()) {
      core::Value pods = core::Value::list();
      for (const auto& p : r.pods) {
        core::Value pv = core::Value::map();
        pv["name"] = p.name;
        if (!p.uid.empty()) pv["uid"] = p.uid;
        if (!p.node.empty()) pv["node"] = p.node;
        pods.push_back(std::move(pv));
      }
      v["pods"] = std::move(pods);
    }
    list.push_back(std::move(v));
  }
  return list;
}

std::vector<JobRecord> read_job_records(const core::Value* list) {
  std::vector<JobRecord> out;
  if (list == nullptr || !list->is_list()) return out;
  for (const auto& v : list->as_list()) {
    if (!v.is_map() || v.get_string({"name"}).empty() || v.get_string({"label"}).empty()) continue;
    JobRecord r;
    r.key = {std::string(v.get_string({"namespace"})), std::string(v.get_string({"label"})),
             std::string(v.get_string({"name"}))};
    r.request_id = std::string(v.get_string({"requestId"}));
    r.requested_ms = ms_of(v.get_string({"requestedAt"}));
    r.deadline_ms = ms_of(v.get_string({"deadline"}));
    r.disrupted_ms = ms_of(v.get_string({"disruptedAt"}));
    r.reason = std::string(v.get_string({"reason"}));
    if (const core::Value* pods = v.find("pods"); pods != nullptr && pods->is_list()) {
      for (const auto& p : pods->as_list()) {
        if (!p.is_map() || p.get_string({"name"}).empty()) continue;
        r.pods.push_back({r.key.ns, std::string(p.get_string({"name"})),
                          std::string(p.get_string({"uid"})), std::string(p.get_string({"node"}))});
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

core::Value checkpoint_request_patch(std::string_view request_id, std::int64_t deadline_ms) {
  core::Value patch = core::Value::map();
  core::Value& a = patch["metadata"]["annotations"];
  a[kCheckpointRequestedAnnotation] = std::string(request_id);
  a[kCheckpointDeadlineAnnotation] = rfc3339_ms(deadline_ms);
  return patch;
}

std::int64_t next_job_deadline(const std::vector<JobDecision>& decisions) {
  std::int64_t next = 0;
  for (const auto& d : decisions)
    if ((d.action == JobAction::RequestCheckpoint || d.action == JobAction::Wait) &&
        (next == 0 || d.deadline_ms < next))
      next = d.deadline_ms;
  return next;
}

}  // namespace gpufleet::kube
