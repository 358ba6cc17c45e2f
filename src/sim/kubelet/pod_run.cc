#include "sim/kubelet/pod_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/errors.h"
#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

using Clock = std::chrono::steady_clock;

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

// Go's time.Duration.String() for the back-off message: "10s", "2m40s", "5m0s", "500ms".
std::string go_duration(double seconds) {
  char buf[48];
  if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%gms", std::round(seconds * 1000));
  } else if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%gs", seconds);
  } else {
    double minutes = std::floor(seconds / 60);
    std::snprintf(buf, sizeof buf, "%gm%gs", minutes, seconds - minutes * 60);
  }
  return buf;
}

// Go's %s of a []string, as the kubelet writes container lists in condition messages.
std::string go_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? " " : "") + names[i];
  return out + "]";
}

core::Value terminated_value(const ContainerTermination& t) {
  core::Value v;
  v["containerID"] = t.container_id;
  v["exitCode"] = t.exit_code;
  v["finishedAt"] = t.finished_at;
  if (!t.message.empty()) v["message"] = t.message;
  v["reason"] = t.reason;
  v["startedAt"] = t.started_at;
  return v;
}

ContainerTermination termination(const PodRun& run, const ContainerRun& c, int exit_code,
                                 std::string message, std::string_view now) {
  ContainerTermination t;
  t.exit_code = exit_code;
  t.reason = exit_code == 0 ? "Completed" : "Error";
  t.message = std::move(message);
  t.started_at = c.running_since.empty() ? std::string(now) : c.running_since;
  t.finished_at = std::string(now);
  t.container_id = run.container_id(c, c.instances - 1);
  return t;
}

// The repository part of a normalized image (no tag), for imageID.
std::string image_repository(const std::string& normalized) {
  std::string name = normalized.substr(0, normalized.find('@'));
  auto slash = name.rfind('/');
  auto colon = name.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    name.resize(colon);
  }
  return name;
}

std::string image_id(const std::string& normalized) {
  auto at = normalized.find('@');
  if (at != std::string::npos) return image_repository(normalized) + normalized.substr(at);
  return image_repository(normalized) + "@sha256:" + hex64(derive_seed(0, normalized));
}

void start_container(PodRun& run, ContainerRun& c, Clock::time_point now, std::string_view now_rfc,
                     const PodEnv& env) {
  run.sandbox = true;
  c.state = ContainerState::Running;
  c.running_since = std::string(now_rfc);
  c.waiting_reason.clear();
  c.waiting_message.clear();
  ++c.instances;
  std::optional<double> duration = c.plan.duration_s;
  if (c.plan.nccl && env.nccl_duration) {
    try {
      duration = env.nccl_duration(run, c);
    } catch (const core::InvalidInput& e) {
      // A group the model cannot place fails the container, as a bad launch would.
      c.plan.nccl = false;
      c.plan.exit_codes = {2};
      c.plan.termination_message = std::string("gpufleet sim: ") + e.what();
      c.plan.output = c.plan.termination_message + "\n";
      duration = 0;
    }
  }
  c.has_due = duration.has_value();
  if (duration) c.due = now + env.wall(*duration);
}

bool restarts(const PodRun& run, const ContainerRun& c, int exit_code) {
  if (c.sidecar) return true;  // sidecars restart whatever the pod's policy says
  if (c.init && exit_code == 0) return false;
  if (run.restart_policy == "Always") return true;
  if (run.restart_policy == "OnFailure") return exit_code != 0;
  return false;
}

void exit_container(PodRun& run, ContainerRun& c, Clock::time_point now, std::string_view now_rfc,
                    const PodEnv& env) {
  int exit_code = c.plan.exit_code(c.instances - 1);
  std::string message = c.plan.termination_message;
  std::string output = c.plan.output;
  if (c.plan.nccl && env.nccl_result) {
    try {
      std::tie(exit_code, output) = env.nccl_result(run, c);
    } catch (const core::InvalidInput& e) {
      exit_code = 2;
      output = std::string("gpufleet sim: ") + e.what() + "\n";
    }
    message = termination_tail(output);
  }
  if (env.log) env.log(run, c, output);
  if (!output.empty()) {
    // Kept for the log endpoint; older instances go, as the runtime garbage-collects them.
    if (c.logs.size() >= 2) c.logs.erase(c.logs.begin());
    auto written = core::Timestamp::try_parse_rfc3339(now_rfc);
    c.logs.push_back({run.container_id(c, c.instances - 1), output,
                      written ? *written : core::Timestamp::now()});
  }
  ContainerTermination done = termination(run, c, exit_code, std::move(message), now_rfc);
  c.has_due = false;
  if (!restarts(run, c, exit_code)) {
    c.state = ContainerState::Terminated;
    c.terminated = std::move(done);
    c.finished = true;
    return;
  }
  c.last_state = std::move(done);
  c.terminated.reset();
  double delay = run.back_off.delay(c.instances);
  if (delay <= 0) {
    start_container(run, c, now, now_rfc, env);
    return;
  }
  c.state = ContainerState::Waiting;
  c.waiting_reason = "CrashLoopBackOff";
  c.waiting_message = "back-off " + go_duration(delay) + " restarting failed container=" + c.name +
                      " pod=" + run.name + "_" + run.ns + "(" + run.uid + ")";
  c.has_due = true;
  c.due = now + env.wall(delay);
}

// One container's due action; `eligible`: it may start (earlier init containers are done).
bool step_container(PodRun& run, ContainerRun& c, bool eligible, Clock::time_point now,
                    std::string_view now_rfc, const PodEnv& env) {
  if (c.finished) return false;
  if (c.state == ContainerState::Waiting) {
    if (!eligible) return false;
    if (!c.has_due) {
      c.has_due = true;
      c.due = now + env.wall(c.plan.start_delay_s);
    }
    if (now < c.due) return false;
    start_container(run, c, now, now_rfc, env);
    return true;
  }
  if (c.state == ContainerState::Running && c.has_due && now >= c.due) {
    exit_container(run, c, now, now_rfc, env);
    return true;
  }
  return false;
}

bool init_done(const ContainerRun& c) {
  if (c.sidecar) return c.running();
  return c.state == ContainerState::Terminated && c.terminated && c.terminated->exit_code == 0;
}

bool any_main_started(const PodRun& run) {
  return std::any_of(run.main.begin(), run.main.end(),
                     [](const ContainerRun& c) { return c.instances > 0; });
}

// kubelet's getPhase (pkg/kubelet/kubelet_pods.go) over the simulated states.
PodStage phase_of(const PodRun& run) {
  int pending_init = 0, failed_init = 0, pending_sidecar = 0;
  int running = 0, waiting = 0, stopped = 0, succeeded = 0;
  for (const auto& c : run.init) {
    if (c.sidecar) {
      if (c.running()) {
        ++running;
      } else if (c.state == ContainerState::Waiting && !c.last_state) {
        ++pending_sidecar;
        ++waiting;
      }
      continue;
    }
    if (c.running()) {
      ++pending_init;
    } else if (c.state == ContainerState::Terminated) {
      failed_init += c.terminated->exit_code != 0 ? 1 : 0;
    } else if (c.last_state) {
      failed_init += c.last_state->exit_code != 0 ? 1 : 0;
    } else {
      ++pending_init;
    }
  }
  for (const auto& c : run.main) {
    if (c.running()) {
      ++running;
    } else if (c.state == ContainerState::Terminated) {
      ++stopped;
      succeeded += c.terminated->exit_code == 0 ? 1 : 0;
    } else if (c.last_state) {
      ++stopped;
    } else {
      ++waiting;
    }
  }
  if (failed_init > 0 && run.restart_policy == "Never") return PodStage::Failed;
  if (pending_init > 0 || (pending_sidecar > 0 && !any_main_started(run)) || waiting > 0) {
    return PodStage::Pending;
  }
  if (running > 0) return PodStage::Running;
  if (stopped > 0) {
    if (run.restart_policy == "Always") return PodStage::Running;
    if (stopped == succeeded) return PodStage::Succeeded;
    if (run.restart_policy == "Never") return PodStage::Failed;
    return PodStage::Running;
  }
  return PodStage::Pending;
}

// Ends every running container (sidecars when the pod is done, or all on SIGTERM/reboot).
void terminate_running(PodRun& run, std::vector<ContainerRun>& list, int exit_code,
                       const std::string& message, std::string_view now_rfc) {
  for (auto& c : list) {
    if (c.running()) {
      c.terminated = termination(run, c, exit_code, message, now_rfc);
      c.state = ContainerState::Terminated;
    }
    c.finished = true;
    c.has_due = false;
  }
}

bool set_condition(PodRun& run, std::string_view type, bool status, std::string reason,
                   std::string message, std::string_view now_rfc) {
  std::string value = status ? "True" : "False";
  auto it = std::find_if(run.conditions.begin(), run.conditions.end(),
                         [&](const ConditionState& c) { return c.type == type; });
  if (it == run.conditions.end()) {
    run.conditions.push_back(
        {std::string(type), value, std::move(reason), std::move(message), std::string(now_rfc)});
    return true;
  }
  bool changed = it->status != value || it->reason != reason || it->message != message;
  if (it->status != value) it->since = std::string(now_rfc);
  it->status = value;
  it->reason = std::move(reason);
  it->message = std::move(message);
  return changed;
}

// The kubelet's condition generators (pkg/kubelet/status/generate.go).
bool update_conditions(PodRun& run, std::string_view now_rfc) {
  bool changed = set_condition(run, "PodReadyToStartContainers", run.sandbox && !run.terminal(), "",
                               "", now_rfc);
  if (run.stage == PodStage::Succeeded) {
    changed |= set_condition(run, "Initialized", true, "PodCompleted", "", now_rfc);
  } else if (any_main_started(run)) {
    changed |= set_condition(run, "Initialized", true, "", "", now_rfc);
  } else {
    std::vector<std::string> incomplete;
    for (const auto& c : run.init) {
      if (!init_done(c)) incomplete.push_back(c.name);
    }
    changed |=
        incomplete.empty()
            ? set_condition(run, "Initialized", true, "", "", now_rfc)
            : set_condition(run, "Initialized", false, "ContainersNotInitialized",
                            "containers with incomplete status: " + go_list(incomplete), now_rfc);
  }
  bool ready = false;
  std::string reason, message;
  if (run.terminal()) {
    reason = run.stage == PodStage::Succeeded ? "PodCompleted" : "PodFailed";
  } else {
    std::vector<std::string> unready;
    for (const auto& c : run.init) {
      if (c.sidecar && !c.running()) unready.push_back(c.name);
    }
    for (const auto& c : run.main) {
      if (!c.running()) unready.push_back(c.name);
    }
    ready = unready.empty();
    if (!ready) {
      reason = "ContainersNotReady";
      message = "containers with unready status: " + go_list(unready);
    }
  }
  changed |= set_condition(run, "Ready", ready, reason, message, now_rfc);
  changed |= set_condition(run, "ContainersReady", ready, reason, message, now_rfc);
  return changed;
}

core::Value condition_value(const ConditionState& c) {
  core::Value v;
  v["type"] = c.type;
  v["status"] = c.status;
  v["lastProbeTime"] = nullptr;
  v["lastTransitionTime"] = c.since;
  if (!c.reason.empty()) v["reason"] = c.reason;
  if (!c.message.empty()) v["message"] = c.message;
  return v;
}

core::Value volume_mounts_status(const core::Value& spec_mounts) {
  core::Value out = core::Value::list();
  if (!spec_mounts.is_list()) return out;
  for (const auto& m : spec_mounts.as_list()) {
    core::Value v;
    v["name"] = m.get_string({"name"});
    v["mountPath"] = m.get_string({"mountPath"});
    const core::Value* ro = m.find("readOnly");
    if (ro != nullptr && ro->is_bool() && ro->as_bool()) {
      v["readOnly"] = true;
      v["recursiveReadOnly"] = "Disabled";
    }
    out.push_back(std::move(v));
  }
  return out;
}

core::Value container_status(const PodRun& run, const ContainerRun& c, bool has_init) {
  core::Value s;
  s["name"] = c.name;
  bool created = c.instances > 0;
  std::string image = normalize_image(c.image);
  // A container never created reports the spec's image and no IDs, as the kubelet does.
  s["image"] = created ? image : c.image;
  s["imageID"] = created ? image_id(image) : "";
  if (created) s["containerID"] = run.container_id(c, c.instances - 1);
  s["restartCount"] = c.restart_count();
  bool ready = c.init && !c.sidecar ? init_done(c) : c.running();
  s["ready"] = ready;
  s["started"] = c.running();
  core::Value state;
  if (c.state == ContainerState::Running) {
    state["running"]["startedAt"] = c.running_since;
  } else if (c.state == ContainerState::Terminated && c.terminated) {
    state["terminated"] = terminated_value(*c.terminated);
  } else {
    std::string reason = !c.waiting_reason.empty() ? c.waiting_reason
                         : has_init                ? "PodInitializing"
                                                   : "ContainerCreating";
    state["waiting"]["reason"] = reason;
    if (!c.waiting_message.empty()) state["waiting"]["message"] = c.waiting_message;
  }
  s["state"] = std::move(state);
  s["lastState"] = core::Value::map();
  if (c.last_state) s["lastState"]["terminated"] = terminated_value(*c.last_state);
  // RecursiveReadOnlyMounts (beta, on by default since 1.31) makes the kubelet report mounts.
  if (c.volume_mounts.is_list() && c.volume_mounts.size() > 0) {
    s["volumeMounts"] = volume_mounts_status(c.volume_mounts);
  }
  return s;
}

}  // namespace

std::string normalize_image(std::string_view image) {
  std::string s(image);
  auto at = s.find('@');
  std::string name = s.substr(0, at);
  std::string digest = at == std::string::npos ? "" : s.substr(at);
  auto slash = name.find('/');
  std::string first = slash == std::string::npos ? "" : name.substr(0, slash);
  bool has_domain =
      !first.empty() && (first.find('.') != std::string::npos ||
                         first.find(':') != std::string::npos || first == "localhost");
  if (!has_domain) name = (slash == std::string::npos ? "docker.io/library/" : "docker.io/") + name;
  auto last = name.rfind('/');
  if (digest.empty() && name.find(':', last == std::string::npos ? 0 : last) == std::string::npos) {
    name += ":latest";
  }
  return name + digest;
}

std::string PodRun::container_id(const ContainerRun& c, int instance) const {
  return "containerd://" +
         hex64(derive_seed(0, uid + "/" + c.name + "/" + std::to_string(std::max(0, instance))));
}

PodRun make_pod_run(const core::Value& pod, PodPlan plan, BackOff back_off, std::string host_ip,
                    std::string pod_ip) {
  PodRun r;
  r.ns = std::string(pod.get_string({"metadata", "namespace"}, "default"));
  r.name = std::string(pod.get_string({"metadata", "name"}));
  r.uid = std::string(pod.get_string({"metadata", "uid"}));
  r.node = std::string(pod.get_string({"spec", "nodeName"}));
  r.restart_policy = std::string(pod.get_string({"spec", "restartPolicy"}, "Always"));
  auto add = [&](const char* key, bool init, std::vector<ContainerRun>& out,
                 const std::vector<ContainerPlan>& plans) {
    const core::Value* cs = pod.get({"spec", key});
    if (cs == nullptr || !cs->is_list()) return;
    for (std::size_t i = 0; i < cs->size(); ++i) {
      const core::Value& c = (*cs)[i];
      ContainerRun cr;
      cr.name = std::string(c.get_string({"name"}));
      cr.image = std::string(c.get_string({"image"}));
      cr.init = init;
      cr.sidecar = init && c.get_string({"restartPolicy"}) == "Always";
      if (i < plans.size()) cr.plan = plans[i];
      if (const core::Value* vm = c.find("volumeMounts")) cr.volume_mounts = *vm;
      out.push_back(std::move(cr));
    }
  };
  add("initContainers", true, r.init, plan.init_containers);
  add("containers", false, r.main, plan.containers);
  r.plan = std::move(plan);
  r.back_off = back_off;
  r.host_ip = std::move(host_ip);
  r.pod_ip = std::move(pod_ip);
  return r;
}

bool advance_pod(PodRun& run, Clock::time_point now, std::string_view now_rfc, const PodEnv& env) {
  if (run.start_time.empty()) run.start_time = std::string(now_rfc);
  if (run.scheduled_since.empty()) run.scheduled_since = run.start_time;
  bool changed = false;
  PodStage before = run.stage;
  // Each pass may unblock the next container (an init container completing, an immediate
  // restart); every pass ends a run or starts one, so the loop is bounded by the due actions.
  for (int pass = 0; pass < 64 && !run.terminal(); ++pass) {
    bool progressed = false;
    bool earlier_done = true;
    for (auto& c : run.init) {
      progressed |=
          step_container(run, c, earlier_done || any_main_started(run), now, now_rfc, env);
      earlier_done = earlier_done && init_done(c);
    }
    bool initialized = earlier_done || any_main_started(run);
    for (auto& c : run.main) progressed |= step_container(run, c, initialized, now, now_rfc, env);
    // Regular containers all done for good: the kubelet stops the sidecars, then the pod ends.
    bool mains_finished =
        !run.main.empty() && std::all_of(run.main.begin(), run.main.end(),
                                         [](const ContainerRun& c) { return c.finished; });
    if (mains_finished) terminate_running(run, run.init, 0, "", now_rfc);
    run.stage = phase_of(run);
    if (run.terminal()) {
      terminate_running(run, run.init, 0, "", now_rfc);
      terminate_running(run, run.main, 0, "", now_rfc);
    }
    changed |= progressed;
    if (!progressed) break;
  }
  changed |= run.stage != before;
  changed |= update_conditions(run, now_rfc);
  return changed;
}

std::optional<Clock::time_point> next_due(const PodRun& run) {
  std::optional<Clock::time_point> next;
  for (const auto* list : {&run.init, &run.main}) {
    for (const auto& c : *list) {
      if (!c.finished && c.has_due && (!next || c.due < *next)) next = c.due;
    }
  }
  return next;
}

void stop_pod(PodRun& run, int exit_code, const std::string& message, std::string_view now_rfc) {
  terminate_running(run, run.main, exit_code, message, now_rfc);
  terminate_running(run, run.init, exit_code, message, now_rfc);
  bool all_ok = std::all_of(run.main.begin(), run.main.end(), [](const ContainerRun& c) {
    return c.state == ContainerState::Terminated && c.terminated && c.terminated->exit_code == 0;
  });
  // A pod the kubelet terminates ends in a terminal phase (kubelet: podIsTerminal).
  run.stage = all_ok ? PodStage::Succeeded : PodStage::Failed;
  update_conditions(run, now_rfc);
}

void kill_for_restart(PodRun& run, const std::string& message, std::string_view now_rfc) {
  for (auto* list : {&run.init, &run.main}) {
    for (auto& c : *list) {
      if (c.running()) {
        c.last_state = termination(run, c, 137, message, now_rfc);
      } else if (c.terminated) {
        c.last_state = c.terminated;
      }
      c.terminated.reset();
      c.state = ContainerState::Waiting;
      c.waiting_reason.clear();
      c.waiting_message.clear();
      c.finished = false;
      c.has_due = false;
    }
  }
  run.sandbox = false;
  run.stage = phase_of(run);
  update_conditions(run, now_rfc);
}

core::Value pod_status(const PodRun& run, std::string_view now_rfc, const core::Value* current) {
  core::Value s;
  const char* phase = run.stage == PodStage::Pending     ? "Pending"
                      : run.stage == PodStage::Running   ? "Running"
                      : run.stage == PodStage::Succeeded ? "Succeeded"
                                                         : "Failed";
  s["phase"] = phase;
  s["hostIP"] = run.host_ip;
  s["hostIPs"].push_back(core::Value(core::Map{{"ip", run.host_ip}}));
  bool had_sandbox =
      run.sandbox ||
      std::any_of(run.main.begin(), run.main.end(),
                  [](const auto& c) { return c.instances > 0; }) ||
      std::any_of(run.init.begin(), run.init.end(), [](const auto& c) { return c.instances > 0; });
  if (!run.pod_ip.empty() && had_sandbox) {
    s["podIP"] = run.pod_ip;
    s["podIPs"].push_back(core::Value(core::Map{{"ip", run.pod_ip}}));
  }
  s["startTime"] = run.start_time.empty() ? std::string(now_rfc) : run.start_time;
  // No qosClass: the API server set it at creation and refuses any other value.

  core::Value conds = core::Value::list();
  const core::Value* theirs = current != nullptr ? current->find("conditions") : nullptr;
  auto ours = [](std::string_view t) {
    return t == "PodReadyToStartContainers" || t == "Initialized" || t == "Ready" ||
           t == "ContainersReady";
  };
  for (const auto& c : run.conditions) conds.push_back(condition_value(c));
  bool scheduled = false;
  if (theirs != nullptr && theirs->is_list()) {
    for (const auto& c : theirs->as_list()) {
      std::string_view type = c.get_string({"type"});
      if (ours(type)) continue;
      scheduled = scheduled || type == "PodScheduled";
      conds.push_back(c);  // the scheduler's PodScheduled, DisruptionTarget, readiness gates
    }
  }
  if (!scheduled) {
    conds.push_back(condition_value({"PodScheduled", "True", "", "", run.scheduled_since}));
  }
  s["conditions"] = std::move(conds);

  bool has_init = !run.init.empty();
  if (has_init) {
    core::Value list = core::Value::list();
    for (const auto& c : run.init) list.push_back(container_status(run, c, true));
    s["initContainerStatuses"] = std::move(list);
  }
  // The kubelet sorts regular container statuses by name.
  std::vector<std::size_t> order(run.main.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return run.main[a].name < run.main[b].name; });
  core::Value list = core::Value::list();
  for (std::size_t i : order) {
    list.push_back(container_status(run, run.main[i], has_init));
  }
  s["containerStatuses"] = std::move(list);
  return s;
}

}  // namespace gpufleet::sim
