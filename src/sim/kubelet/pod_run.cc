#include "sim/kubelet/pod_run.h"

#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

std::string hex64(std::uint64_t seed) {
  static constexpr char kHex[] = "0123456789abcdef";
  Rng rng(seed);
  std::string out;
  for (int w = 0; w < 4; ++w) {
    std::uint64_t v = rng.next();
    for (int i = 0; i < 16; ++i) out.push_back(kHex[(v >> (4 * i)) & 0xf]);
  }
  return out;
}

core::Value condition(std::string_view type, bool status, std::string_view since,
                      std::string_view reason = {}) {
  core::Value c;
  c["type"] = type;
  c["status"] = status ? "True" : "False";
  c["lastProbeTime"] = nullptr;
  c["lastTransitionTime"] = since;
  if (!reason.empty()) c["reason"] = reason;
  return c;
}

core::Value terminated_value(const ContainerTermination& t) {
  core::Value v;
  v["exitCode"] = t.exit_code;
  v["reason"] = t.reason;
  if (!t.message.empty()) v["message"] = t.message;
  v["startedAt"] = t.started_at;
  v["finishedAt"] = t.finished_at;
  v["containerID"] = t.container_id;
  return v;
}

std::string container_image_digest(const std::string& image) {
  return hex64(derive_seed(0, image));
}

}  // namespace

std::string PodRun::container_id(int run) const {
  return "containerd://" + hex64(derive_seed(0, uid + "/" + std::to_string(run)));
}

PodRun make_pod_run(const core::Value& pod, PodPlan plan, std::string host_ip, std::string pod_ip) {
  PodRun r;
  r.ns = std::string(pod.get_string({"metadata", "namespace"}, "default"));
  r.name = std::string(pod.get_string({"metadata", "name"}));
  r.uid = std::string(pod.get_string({"metadata", "uid"}));
  r.node = std::string(pod.get_string({"spec", "nodeName"}));
  r.restart_policy = std::string(pod.get_string({"spec", "restartPolicy"}, "Always"));
  if (const core::Value* cs = pod.get({"spec", "containers"}); cs != nullptr && cs->is_list()) {
    for (const auto& c : cs->as_list()) {
      r.containers.emplace_back(std::string(c.get_string({"name"})),
                                std::string(c.get_string({"image"})));
    }
  }
  r.plan = std::move(plan);
  r.host_ip = std::move(host_ip);
  r.pod_ip = std::move(pod_ip);
  return r;
}

ContainerTermination finish_container(const PodRun& run, int exit_code, std::string message,
                                      std::string_view now) {
  ContainerTermination t;
  t.exit_code = exit_code;
  t.reason = exit_code == 0 ? "Completed" : exit_code == 137 ? "Error" : "Error";
  t.message = std::move(message);
  t.started_at = run.running_since.empty() ? std::string(now) : run.running_since;
  t.finished_at = std::string(now);
  t.container_id = run.container_id(run.restart_count);
  return t;
}

core::Value pod_status(const PodRun& run, std::string_view now) {
  core::Value s;
  const char* phase = run.stage == PodStage::Pending     ? "Pending"
                      : run.stage == PodStage::Running   ? "Running"
                      : run.stage == PodStage::Succeeded ? "Succeeded"
                                                         : "Failed";
  s["phase"] = phase;
  s["hostIP"] = run.host_ip;
  s["hostIPs"].push_back(core::Value(core::Map{{"ip", run.host_ip}}));
  if (!run.pod_ip.empty() && run.stage != PodStage::Pending) {
    s["podIP"] = run.pod_ip;
    s["podIPs"].push_back(core::Value(core::Map{{"ip", run.pod_ip}}));
  }
  s["startTime"] = run.start_time.empty() ? std::string(now) : run.start_time;
  s["qosClass"] = "BestEffort";

  bool running = run.stage == PodStage::Running;
  std::string since = run.ready_transition.empty() ? std::string(now) : run.ready_transition;
  core::Value conds = core::Value::list();
  conds.push_back(condition("PodReadyToStartContainers",
                            run.stage != PodStage::Pending || !run.pod_ip.empty(), since));
  conds.push_back(
      condition("Initialized", true, run.start_time.empty() ? std::string(now) : run.start_time));
  bool terminal = run.stage == PodStage::Succeeded || run.stage == PodStage::Failed;
  conds.push_back(condition("Ready", running, since,
                            running    ? ""
                            : terminal ? "PodCompleted"
                                       : "ContainersNotReady"));
  conds.push_back(condition("ContainersReady", running, since,
                            running    ? ""
                            : terminal ? "PodCompleted"
                                       : "ContainersNotReady"));
  conds.push_back(
      condition("PodScheduled", true, run.start_time.empty() ? std::string(now) : run.start_time));
  s["conditions"] = std::move(conds);

  core::Value statuses = core::Value::list();
  for (const auto& [name, image] : run.containers) {
    core::Value c;
    c["name"] = name;
    c["image"] = image;
    c["imageID"] = image + "@sha256:" + container_image_digest(image);
    c["restartCount"] = run.restart_count;
    c["ready"] = running;
    c["started"] = running;
    core::Value state;
    if (run.terminated) {
      state["terminated"] = terminated_value(*run.terminated);
      c["containerID"] = run.terminated->container_id;
    } else if (running) {
      state["running"]["startedAt"] = run.running_since;
      c["containerID"] = run.container_id(run.restart_count);
    } else {
      state["waiting"]["reason"] = run.restart_count > 0 ? "CrashLoopBackOff" : "ContainerCreating";
    }
    c["state"] = std::move(state);
    if (run.last_state) {
      c["lastState"]["terminated"] = terminated_value(*run.last_state);
    } else {
      c["lastState"] = core::Value::map();
    }
    statuses.push_back(std::move(c));
  }
  s["containerStatuses"] = std::move(statuses);
  return s;
}

}  // namespace gpufleet::sim
