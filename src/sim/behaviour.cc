#include "sim/behaviour.h"

#include <algorithm>
#include <charconv>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/text.h"
#include "core/time.h"
#include "core/yaml.h"
#include "sim/atomic_file.h"

namespace gpufleet::sim {

using core::describe_value;
using core::fail_field;
using core::FieldReader;
using core::seconds_from;
namespace {

Behaviour parse_behaviour(const core::Value& v, const std::string& source,
                          const std::string& path) {
  FieldReader r(v, source, path);
  Behaviour b;
  b.name = r.required_string("name", "name the behaviour, e.g. fail-fast");
  if (const core::Value* mv = r.get("match")) {
    FieldReader m(*mv, source, r.field("match"));
    b.image = m.string("image", "");
    b.container = m.string("container", "");
    b.init_container = m.string("initContainer", "");
    if (!b.container.empty() && !b.init_container.empty()) {
      m.fail("initContainer", core::Value(b.init_container), "is given together with container",
             "a behaviour targets either containers or init containers; write two behaviours");
    }
    b.annotations = m.string_map("annotations");
    b.restart_policy = m.one_of("restartPolicy", "", {"", "Always", "OnFailure", "Never"});
    m.done();
  }
  if (const core::Value* d = r.get("startDelay")) {
    b.start_delay_s = seconds_from(*d, source, r.field("startDelay"));
  }
  if (const core::Value* d = r.get("duration")) {
    if (d->is_string() && d->as_string() == "forever") {
      b.duration_s.reset();
    } else {
      b.duration_s = seconds_from(*d, source, r.field("duration"));
    }
  } else {
    b.duration_s = 3.0;
  }
  b.exit_code = static_cast<int>(r.integer("exitCode", 0, 0, 255, "an exit status 0..255"));
  if (const core::Value* codes = r.get("exitCodes")) {
    std::string field = r.field("exitCodes");
    if (r.has("exitCode")) {
      fail_field(source, field, "is given together with exitCode", "keep one of the two");
    }
    if (!codes->is_list() || codes->size() == 0) {
      fail_field(source, field, "value " + describe_value(*codes) + " is not a non-empty list",
                 "list one exit code per run, e.g. [1, 1, 0] (the last one repeats)");
    }
    for (std::size_t i = 0; i < codes->size(); ++i) {
      const core::Value& c = (*codes)[i];
      if (!c.is_int() || c.as_int() < 0 || c.as_int() > 255) {
        fail_field(source, field + "[" + std::to_string(i) + "]",
                   "value " + describe_value(c) + " is not an exit status", "write 0..255");
      }
      b.exit_codes.push_back(static_cast<int>(c.as_int()));
    }
  }
  b.termination_message = r.string("terminationMessage", "");
  if (b.termination_message.size() > 4096) {
    fail_field(source, r.field("terminationMessage"), "is longer than 4096 bytes",
               "Kubernetes keeps at most 4096 bytes; shorten it");
  }
  b.output = r.string("output", "");
  b.nccl = r.boolean("nccl", false);
  if (const core::Value* hs = r.get("hostStep")) {
    b.host_step = parse_host_step(*hs, source, r.field("hostStep"));
  }
  b.dcgm = r.boolean("dcgm", false);
  b.training = r.boolean("training", false);
  r.done();
  return b;
}

int parse_exit_code(const std::string& text) {
  int n = -1;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p != text.data() + text.size() || n < 0 || n > 255) return -1;
  return n;
}

// The last whole lines of `text` that fit in Kubernetes' 4096-byte termination message.
std::string tail_lines(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t start = text.size() - limit;
  auto nl = text.find('\n', start);
  return nl == std::string::npos ? text.substr(start) : text.substr(nl + 1);
}

ContainerPlan container_plan(const Behaviour& b) {
  ContainerPlan p;
  p.behaviour = b.name;
  p.start_delay_s = b.start_delay_s;
  p.duration_s = b.duration_s;
  p.exit_codes = b.exit_codes.empty() ? std::vector<int>{b.exit_code} : b.exit_codes;
  p.termination_message = b.termination_message;
  p.output = b.output;
  p.nccl = b.nccl;
  return p;
}

bool annotations_match(const Behaviour& b, const core::Value& pod) {
  const core::Value* annotations = pod.get({"metadata", "annotations"});
  for (const auto& e : b.annotations) {
    const core::Value* have = annotations != nullptr ? annotations->find(e.key) : nullptr;
    if (have == nullptr || !have->is_string() || have->as_string() != e.value.as_string()) {
      return false;
    }
  }
  return true;
}

// Built-in plans for init containers no behaviour names: a regular init container runs 1 s
// and exits 0; a sidecar (restartPolicy Always) runs until the pod stops.
ContainerPlan default_init_plan(bool sidecar) {
  ContainerPlan p;
  p.behaviour = sidecar ? "sidecar" : "init";
  p.start_delay_s = 1.0;
  if (!sidecar) p.duration_s = 1.0;
  return p;
}

}  // namespace

int ContainerPlan::exit_code(int run) const {
  if (exit_codes.empty()) return 0;
  std::size_t i =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(0, run)), exit_codes.size() - 1);
  return exit_codes[i];
}

double BackOff::delay(int restart) const {
  if (restart <= 1) return 0;  // the kubelet restarts a container's first crash at once
  double d = initial_s;
  for (int i = 2; i < restart && d < max_s; ++i) d *= 2;
  return std::min(d, max_s);
}

BehaviourTable BehaviourTable::defaults() {
  BehaviourTable t;
  Behaviour nccl;
  nccl.name = "nccl-tests";
  nccl.image = "*nccl-test*";
  nccl.start_delay_s = 2.0;
  nccl.nccl = true;
  t.items_.push_back(nccl);
  Behaviour hpc = nccl;
  hpc.name = "hpc-benchmarks";
  hpc.image = "*hpc-benchmarks*";
  t.items_.push_back(hpc);
  // certify's diagnostics and training categories (data/certify): run-to-completion pods
  // only, so a dcgm-exporter DaemonSet stays a service.
  Behaviour dcgm;
  dcgm.name = "dcgm-diag";
  dcgm.image = "*cloud-native/dcgm:*";
  dcgm.restart_policy = "Never";
  dcgm.start_delay_s = 2.0;
  dcgm.dcgm = true;
  t.items_.push_back(dcgm);
  Behaviour nemo = dcgm;
  nemo.name = "nemo-training";
  nemo.image = "*nvidia/nemo:*";
  nemo.dcgm = false;
  nemo.training = true;
  t.items_.push_back(nemo);
  Behaviour service;
  service.name = "service";
  service.restart_policy = "Always";
  service.duration_s.reset();
  t.items_.push_back(service);
  Behaviour batch;
  batch.name = "batch";
  batch.duration_s = 3.0;
  t.items_.push_back(batch);
  return t;
}

BehaviourTable BehaviourTable::parse_list(const core::Value& list, std::string_view source,
                                          std::string_view path) {
  if (!list.is_list()) {
    fail_field(source, path, "value " + describe_value(list) + " is not a list",
               "list behaviours as - name: ...");
  }
  BehaviourTable t;
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string p = std::string(path) + "[" + std::to_string(i) + "]";
    Behaviour b = parse_behaviour(list[i], std::string(source), p);
    for (const auto& other : t.items_) {
      if (other.name == b.name) {
        fail_field(source, p + ".name", "value \"" + b.name + "\" repeats another behaviour",
                   "give every behaviour a unique name");
      }
    }
    t.items_.push_back(std::move(b));
  }
  for (auto& d : defaults().items_) {
    bool shadowed = false;
    for (const auto& b : t.items_) shadowed = shadowed || b.name == d.name;
    if (!shadowed) t.items_.push_back(std::move(d));
  }
  return t;
}

BehaviourTable BehaviourTable::parse(const core::Value& doc, std::string_view source) {
  if (doc.is_list()) return parse_list(doc, source, "behaviours");
  FieldReader r(doc, std::string(source), "");
  std::string api = r.required_string("apiVersion", "write apiVersion: gpufleet.io/v1alpha1");
  if (api != "gpufleet.io/v1alpha1") {
    r.fail("apiVersion", core::Value(api), "is not supported", "write gpufleet.io/v1alpha1");
  }
  std::string kind = r.required_string("kind", "write kind: BehaviourTable");
  if (kind != "BehaviourTable") {
    r.fail("kind", core::Value(kind), "is not BehaviourTable", "write kind: BehaviourTable");
  }
  r.get("metadata");
  const core::Value* list = r.get("behaviours");
  BackOff back_off;
  if (const core::Value* bv = r.get("crashLoopBackOff")) {
    FieldReader b(*bv, std::string(source), r.field("crashLoopBackOff"));
    if (const core::Value* v = b.get("initial")) {
      back_off.initial_s = seconds_from(*v, source, b.field("initial"));
    }
    if (const core::Value* v = b.get("max")) {
      back_off.max_s = seconds_from(*v, source, b.field("max"));
    }
    b.done();
    if (back_off.initial_s <= 0 || back_off.max_s < back_off.initial_s) {
      fail_field(source, r.field("crashLoopBackOff"),
                 "initial " + std::to_string(back_off.initial_s) + "s and max " +
                     std::to_string(back_off.max_s) + "s are not 0 < initial <= max",
                 "write e.g. {initial: 10s, max: 5m} (the kubelet's values)");
    }
  }
  r.done();
  if (list == nullptr) fail_field(source, "behaviours", "is required", "list behaviours");
  BehaviourTable t = parse_list(*list, source, "behaviours");
  t.back_off_ = back_off;
  return t;
}

BehaviourTable BehaviourTable::load_file(const std::string& path) {
  const std::string text = read_text_file(path);
  core::DocumentScope scope(path, text);
  return parse(core::parse_yaml(text, path), path);
}

const HostStepBehaviour* BehaviourTable::host_step(const core::Value& pod) const {
  std::vector<std::string_view> images;
  for (const char* list : {"initContainers", "containers"}) {
    if (const core::Value* cs = pod.get({"spec", list}); cs != nullptr && cs->is_list()) {
      for (const auto& c : cs->as_list()) images.push_back(c.get_string({"image"}));
    }
  }
  for (const auto& b : items_) {
    if (!b.host_step) continue;
    bool hit = b.image.empty();
    for (std::string_view i : images) hit = hit || core::glob_match(b.image, i);
    if (hit) return &*b.host_step;
  }
  return nullptr;
}

PodPlan BehaviourTable::plan(const core::Value& pod) const {
  const core::Value* annotations = pod.get({"metadata", "annotations"});
  auto annotation = [&](std::string_view key) -> const std::string* {
    if (annotations == nullptr) return nullptr;
    const core::Value* v = annotations->find(key);
    return v != nullptr ? v->if_string() : nullptr;
  };
  std::vector<const core::Value*> containers;
  if (const core::Value* cs = pod.get({"spec", "containers"}); cs != nullptr && cs->is_list()) {
    for (const auto& c : cs->as_list()) containers.push_back(&c);
  }
  std::string restart = std::string(pod.get_string({"spec", "restartPolicy"}, "Always"));

  const Behaviour* chosen = nullptr;
  const core::Value* matched_container = containers.empty() ? nullptr : containers.front();
  PodPlan plan;
  if (const std::string* name = annotation(kBehaviourAnnotation)) {
    for (const auto& b : items_) {
      if (b.name == *name) chosen = &b;
    }
    if (chosen == nullptr) {
      plan.error = "gpufleet sim: pod annotation " + std::string(kBehaviourAnnotation) + "=\"" +
                   *name + "\" names no behaviour (known: ";
      for (std::size_t i = 0; i < items_.size(); ++i)
        plan.error += (i ? ", " : "") + items_[i].name;
      plan.error += ")";
    }
  }
  if (chosen == nullptr) {
    for (const auto& b : items_) {
      if (b.targets_container()) continue;
      if (!b.restart_policy.empty() && b.restart_policy != restart) continue;
      if (!annotations_match(b, pod)) continue;
      if (!b.image.empty()) {
        const core::Value* hit = nullptr;
        for (const auto* c : containers) {
          if (core::glob_match(b.image, c->get_string({"image"}))) {
            hit = c;
            break;
          }
        }
        if (hit == nullptr) continue;
        matched_container = hit;
      }
      chosen = &b;
      break;
    }
  }
  if (chosen == nullptr) chosen = &items_.back();
  plan.behaviour = chosen->name;
  plan.start_delay_s = chosen->start_delay_s;
  plan.duration_s = chosen->duration_s;
  plan.exit_code = chosen->exit_codes.empty() ? chosen->exit_code : chosen->exit_codes.front();
  std::vector<int> exit_codes =
      chosen->exit_codes.empty() ? std::vector<int>{chosen->exit_code} : chosen->exit_codes;
  plan.termination_message = chosen->termination_message;
  plan.output = chosen->output;
  plan.nccl = chosen->nccl || chosen->dcgm || chosen->training;
  plan.generator = chosen->dcgm ? "dcgm" : chosen->training ? "training" : "nccl";

  if (const std::string* d = annotation(kDurationAnnotation)) {
    if (*d == "forever") {
      plan.duration_s.reset();
    } else if (auto parsed = core::try_parse_duration(*d); parsed && parsed->count() >= 0) {
      plan.duration_s = std::chrono::duration<double>(*parsed).count();
    } else {
      plan.error = "gpufleet sim: annotation " + std::string(kDurationAnnotation) + "=\"" + *d +
                   "\" is not a duration (write e.g. 30s, 2m or forever)";
    }
  }
  if (const std::string* e = annotation(kExitCodeAnnotation)) {
    int code = parse_exit_code(*e);
    if (code < 0) {
      plan.error = "gpufleet sim: annotation " + std::string(kExitCodeAnnotation) + "=\"" + *e +
                   "\" is not an exit code 0..255";
    } else {
      plan.exit_code = code;
      exit_codes = {code};
    }
  }
  if (const std::string* m = annotation(kMessageAnnotation))
    plan.termination_message = tail_lines(*m, 4096);
  if (const std::string* o = annotation(kOutputAnnotation)) plan.output = *o;
  if (const std::string* hosts = annotation(kNcclHostsAnnotation)) {
    std::string_view rest = *hosts;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string_view h = rest.substr(0, comma);
      while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
      while (!h.empty() && h.back() == ' ') h.remove_suffix(1);
      if (!h.empty()) plan.nccl_hosts.emplace_back(h);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (plan.nccl && matched_container != nullptr) {
    std::vector<std::string> args;
    for (const char* key : {"command", "args"}) {
      if (const core::Value* list = matched_container->find(key);
          list != nullptr && list->is_list()) {
        for (const auto& a : list->as_list()) {
          if (a.is_string()) args.push_back(a.as_string());
        }
      }
    }
    try {
      if (plan.generator == "nccl") {
        plan.nccl_config = parse_nccl_test_args(args);
        std::string debug, subsys;
        if (const core::Value* env = matched_container->find("env"); env && env->is_list()) {
          for (const auto& e : env->as_list()) {
            if (e.get_string({"name"}) == "NCCL_DEBUG") debug = e.get_string({"value"});
            if (e.get_string({"name"}) == "NCCL_DEBUG_SUBSYS") subsys = e.get_string({"value"});
          }
        }
        plan.nccl_config.nccl_info = nccl_info_env(debug, subsys);
      } else
        plan.generator_args = args;
      plan.generator_image = std::string(matched_container->get_string({"image"}));
    } catch (const core::InvalidInput& e) {
      plan.error = std::string("gpufleet sim: ") + e.what();
    }
  }
  if (!plan.error.empty()) {
    plan.exit_code = 2;
    exit_codes = {2};
    plan.duration_s = 0;
    plan.nccl = false;
    plan.termination_message = plan.error;
    plan.output = plan.error + "\n";
  }

  add_container_plans(plan, pod, containers, matched_container, exit_codes);
  return plan;
}

void BehaviourTable::add_container_plans(PodPlan& plan, const core::Value& pod,
                                         const std::vector<const core::Value*>& containers,
                                         const core::Value* matched_container,
                                         const std::vector<int>& exit_codes) const {
  // Per container: a behaviour naming the container wins; regular containers otherwise do
  // what the pod's behaviour (with its annotation overrides) says, the NCCL run only in the
  // container whose image matched.
  if (const core::Value* inits = pod.get({"spec", "initContainers"});
      inits != nullptr && inits->is_list()) {
    for (const auto& c : inits->as_list()) {
      bool sidecar = c.get_string({"restartPolicy"}) == "Always";
      const Behaviour* b = container_behaviour(pod, true, c);
      plan.init_containers.push_back(b != nullptr ? container_plan(*b)
                                                  : default_init_plan(sidecar));
    }
  }
  for (const auto* c : containers) {
    if (const Behaviour* b = container_behaviour(pod, false, *c)) {
      plan.containers.push_back(container_plan(*b));
      continue;
    }
    ContainerPlan p;
    p.behaviour = plan.behaviour;
    p.start_delay_s = plan.start_delay_s;
    p.duration_s = plan.duration_s;
    p.exit_codes = exit_codes;
    p.termination_message = plan.termination_message;
    p.output = plan.output;
    p.nccl = plan.nccl && c == matched_container;
    plan.containers.push_back(std::move(p));
  }
}

const Behaviour* BehaviourTable::container_behaviour(const core::Value& pod, bool init,
                                                     const core::Value& container) const {
  std::string restart = std::string(pod.get_string({"spec", "restartPolicy"}, "Always"));
  std::string_view name = container.get_string({"name"});
  std::string_view image = container.get_string({"image"});
  for (const auto& b : items_) {
    const std::string& glob = init ? b.init_container : b.container;
    if (glob.empty() || !core::glob_match(glob, name)) continue;
    if (!b.image.empty() && !core::glob_match(b.image, image)) continue;
    if (!b.restart_policy.empty() && b.restart_policy != restart) continue;
    if (!annotations_match(b, pod)) continue;
    return &b;
  }
  return nullptr;
}

// Shared by callers that turn nccl output into a termination message.
std::string termination_tail(const std::string& text) { return tail_lines(text, 4096); }

}  // namespace gpufleet::sim
