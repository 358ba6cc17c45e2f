#include "goodput/job.h"

#include "kube/api/job_disruption.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/quantity.h"
#include "core/text.h"
#include "core/time.h"

namespace gpufleet::goodput {

namespace {

std::string pod_name(const core::Value& pod) {
  return std::string(pod.get_string({"metadata", "namespace"})) + "/" +
         std::string(pod.get_string({"metadata", "name"}));
}

[[noreturn]] void fail_pod(const core::Value& pod, const std::string& field, std::string_view what,
                           std::string_view fix) {
  throw core::InvalidInput("pod " + core::quoted(pod_name(pod)) + ": " + field + ": " +
                           std::string(what) + " (" + std::string(fix) + ")");
}

// GPUs of one container: its limit of nvidia.com/gpu, else its request (for an extended
// resource the two are equal when both are given).
std::int64_t container_gpus(const core::Value& pod, const core::Value& c, const std::string& path) {
  for (const char* kind : {"limits", "requests"}) {
    const core::Value* q = c.get({"resources", kind, kGpuResource});
    if (q == nullptr) continue;
    const std::string field =
        path + ".resources." + kind + "[\"" + std::string(kGpuResource) + "\"]";
    std::optional<core::Quantity> parsed;
    if (q->is_string()) {
      parsed = core::Quantity::try_parse(core::trim(q->as_string()));
    } else if (q->is_int() || q->is_uint()) {
      parsed = core::Quantity::from_value(*q, field);
    }
    const std::optional<std::int64_t> n =
        parsed ? parsed->as_exact_int64() : std::optional<std::int64_t>{};
    if (!n || *n < 0)
      fail_pod(pod, field, "value " + core::describe_value(*q) + " is not a whole number of GPUs",
               "write a non-negative whole number, e.g. \"8\"");
    return *n;
  }
  return 0;
}

struct PodFacts {
  std::string name;
  std::string phase;
  bool terminating = false;
  bool ready = false;
  bool has_run = false;
  std::string created;  // metadata.creationTimestamp (RFC 3339 in UTC sorts as text)
  std::string node;
};

PodFacts facts_of(const core::Value& pod) {
  PodFacts f;
  f.name = std::string(pod.get_string({"metadata", "name"}));
  f.phase = std::string(pod.get_string({"status", "phase"}, "Pending"));
  f.terminating = pod.get({"metadata", "deletionTimestamp"}) != nullptr;
  f.created = std::string(pod.get_string({"metadata", "creationTimestamp"}));
  f.node = std::string(pod.get_string({"spec", "nodeName"}));
  if (const core::Value* conds = pod.get({"status", "conditions"}); conds && conds->is_list()) {
    for (const auto& c : conds->as_list())
      if (c.get_string({"type"}) == "Ready") f.ready = c.get_string({"status"}) == "True";
  }
  f.has_run = f.phase == "Running" || f.phase == "Succeeded" || f.phase == "Failed";
  if (const core::Value* cs = pod.get({"status", "containerStatuses"}); cs && cs->is_list()) {
    for (const auto& c : cs->as_list()) {
      const core::Value* rc = c.find("restartCount");
      if (rc != nullptr && rc->is_int() && rc->as_int() > 0) f.has_run = true;
    }
  }
  return f;
}

bool terminal(const PodFacts& f) { return f.phase == "Succeeded" || f.phase == "Failed"; }

JobState state_of(const std::vector<PodFacts>& pods) {
  std::vector<const PodFacts*> active;
  for (const auto& p : pods)
    if (!terminal(p)) active.push_back(&p);
  if (active.empty()) {
    // Failed pods still being deleted were evicted (a drain takes a job's whole gang at once)
    // or deleted: the job's controller replaces them, so the job is interrupted, not over.
    if (std::any_of(pods.begin(), pods.end(), [](const PodFacts& p) {
          return p.phase == "Failed" && p.terminating && p.has_run;
        }))
      return JobState::Interrupted;
    // Failed pods of earlier attempts linger (a batch Job with restartPolicy Never keeps
    // them): the job succeeded when some pod succeeded and every failed pod was created
    // before the first successful one.
    std::optional<std::string> first_success;
    for (const auto& p : pods)
      if (p.phase == "Succeeded" && (!first_success || p.created < *first_success))
        first_success = p.created;
    if (!first_success) return JobState::Failed;
    for (const auto& p : pods)
      if (p.phase == "Failed" && !(p.created < *first_success)) return JobState::Failed;
    return JobState::Succeeded;
  }
  const bool all_running = std::all_of(active.begin(), active.end(), [](const PodFacts* p) {
    return p->phase == "Running" && p->ready && !p->terminating;
  });
  if (all_running) return JobState::Running;
  const bool ran =
      std::any_of(pods.begin(), pods.end(), [](const PodFacts& p) { return p.has_run; });
  return ran ? JobState::Interrupted : JobState::Pending;
}

}  // namespace

// One list for goodput and for the disruption decision: a job is the same gang to both.
std::vector<std::string> default_gang_label_keys() { return kube::default_gang_label_keys(); }

std::vector<std::string> default_excluded_label_keys() {
  return kube::default_excluded_job_label_keys();
}

std::string_view state_name(JobState s) noexcept {
  switch (s) {
    case JobState::Pending: return "Pending";
    case JobState::Running: return "Running";
    case JobState::Interrupted: return "Interrupted";
    case JobState::Succeeded: return "Succeeded";
    case JobState::Failed: return "Failed";
  }
  return "Pending";
}

std::optional<JobState> parse_state(std::string_view name) noexcept {
  for (JobState s : {JobState::Pending, JobState::Running, JobState::Interrupted,
                     JobState::Succeeded, JobState::Failed})
    if (state_name(s) == name) return s;
  return std::nullopt;
}

std::int64_t pod_gpus(const core::Value& pod) {
  std::int64_t containers = 0;
  if (const core::Value* cs = pod.get({"spec", "containers"}); cs && cs->is_list()) {
    for (std::size_t i = 0; i < cs->size(); ++i)
      containers += container_gpus(pod, (*cs)[i], "spec.containers[" + std::to_string(i) + "]");
  }
  // Kubernetes' effective request: init containers run one at a time, each beside the
  // sidecars (restartPolicy Always) started before it; sidecars keep running beside the
  // containers.
  std::int64_t sidecars = 0;
  std::int64_t init_peak = 0;
  if (const core::Value* ics = pod.get({"spec", "initContainers"}); ics && ics->is_list()) {
    for (std::size_t i = 0; i < ics->size(); ++i) {
      const core::Value& c = (*ics)[i];
      const std::int64_t n =
          container_gpus(pod, c, "spec.initContainers[" + std::to_string(i) + "]");
      if (c.get_string({"restartPolicy"}) == "Always") {
        sidecars += n;
        init_peak = std::max(init_peak, sidecars);
      } else {
        init_peak = std::max(init_peak, sidecars + n);
      }
    }
  }
  return std::max(init_peak, containers + sidecars);
}

std::optional<std::int64_t> pod_last_checkpoint(const core::Value& pod) {
  const core::Value* a = pod.get({"metadata", "annotations", kCheckpointAnnotation});
  if (a == nullptr) return std::nullopt;
  const std::string field = "metadata.annotations[\"" + std::string(kCheckpointAnnotation) + "\"]";
  if (!a->is_string())
    fail_pod(pod, field, "value " + core::describe_value(*a) + " is not a string",
             "write the RFC 3339 time of the last completed checkpoint, or \"none\"");
  const std::string_view text = core::trim(a->as_string());
  if (text == "none") return std::nullopt;
  const auto t = core::Timestamp::try_parse_rfc3339(text);
  if (!t)
    fail_pod(pod, field, "value " + core::quoted(text) + " is not an RFC 3339 time",
             "write the time of the last completed checkpoint, e.g. \"2025-03-01T12:00:00Z\", or "
             "\"none\"");
  return t->seconds;
}

namespace {

std::optional<double> pod_step_time(const core::Value& pod) {
  const core::Value* a = pod.get({"metadata", "annotations", kStepTimeAnnotation});
  if (a == nullptr) return std::nullopt;
  const std::string field = "metadata.annotations[\"" + std::string(kStepTimeAnnotation) + "\"]";
  const std::string text(a->is_string() ? core::trim(a->as_string()) : "");
  double d = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(d) ||
      d <= 0)
    fail_pod(pod, field, "value " + core::describe_value(*a) + " is not a positive number",
             "write the seconds one training step takes, e.g. \"2.5\"");
  return d;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> gang_of(const core::Value& pod,
                                                           const std::vector<std::string>& keys) {
  const core::Value* labels = pod.get({"metadata", "labels"});
  if (labels == nullptr) return std::nullopt;
  for (const auto& k : keys) {
    const core::Value* v = labels->find(k);
    if (v != nullptr && v->is_string() && !v->as_string().empty())
      return std::make_pair(k, v->as_string());
  }
  return std::nullopt;
}

std::vector<Job> group_jobs(const std::vector<core::Value>& pods, const GroupOptions& options) {
  struct Building {
    Job job;
    std::vector<PodFacts> facts;
    std::int64_t live_gpus = 0;
    std::int64_t all_gpus = 0;
    std::set<std::string> nodes;
  };
  std::map<JobKey, Building> jobs;
  for (const auto& pod : pods) {
    if (!pod.is_map() || pod.get_string({"metadata", "name"}).empty()) continue;
    if (const core::Value* labels = pod.get({"metadata", "labels"}); labels && labels->is_map()) {
      bool own = std::any_of(options.excluded_label_keys.begin(), options.excluded_label_keys.end(),
                             [&](const std::string& k) { return labels->find(k) != nullptr; });
      if (own) continue;
    }
    std::optional<std::int64_t> gpus;
    std::optional<std::string> gpu_error;
    try {
      gpus = pod_gpus(pod);
    } catch (const core::InvalidInput& e) {
      gpu_error = e.what();
    }
    JobKey key;
    key.ns = std::string(pod.get_string({"metadata", "namespace"}));
    if (auto gang = gang_of(pod, options.gang_label_keys)) {
      key.label = gang->first;
      key.name = gang->second;
    } else if (gpu_error || (gpus && *gpus > 0)) {
      key.name = std::string(pod.get_string({"metadata", "name"}));
    } else {
      continue;
    }
    Building& b = jobs[key];
    b.job.key = key;
    PodFacts f = facts_of(pod);
    if (gpu_error) b.job.errors.push_back(*gpu_error);
    b.all_gpus += gpus.value_or(0);
    if (!terminal(f)) {
      b.live_gpus += gpus.value_or(0);
      if (!f.node.empty()) b.nodes.insert(f.node);
    }
    if (pod.get({"metadata", "annotations", kCheckpointAnnotation}) != nullptr)
      b.job.reports_checkpoints = true;
    try {
      if (auto c = pod_last_checkpoint(pod))
        b.job.last_checkpoint = std::max(b.job.last_checkpoint.value_or(*c), *c);
    } catch (const core::InvalidInput& e) {
      b.job.errors.emplace_back(e.what());
    }
    try {
      if (auto s = pod_step_time(pod)) b.job.step_time_seconds = s;
    } catch (const core::InvalidInput& e) {
      b.job.errors.emplace_back(e.what());
    }
    b.job.pods.push_back(f.name);
    b.facts.push_back(std::move(f));
  }
  std::vector<Job> out;
  out.reserve(jobs.size());
  for (auto& [key, b] : jobs) {
    std::sort(b.job.pods.begin(), b.job.pods.end());
    b.job.nodes.assign(b.nodes.begin(), b.nodes.end());
    b.job.state = state_of(b.facts);
    const bool any_live =
        std::any_of(b.facts.begin(), b.facts.end(), [](const PodFacts& f) { return !terminal(f); });
    b.job.gpus = any_live ? b.live_gpus : b.all_gpus;
    out.push_back(std::move(b.job));
  }
  return out;
}

}  // namespace gpufleet::goodput
