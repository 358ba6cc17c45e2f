#include "sim/behaviour.h"

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
  b.termination_message = r.string("terminationMessage", "");
  if (b.termination_message.size() > 4096) {
    fail_field(source, r.field("terminationMessage"), "is longer than 4096 bytes",
               "Kubernetes keeps at most 4096 bytes; shorten it");
  }
  b.output = r.string("output", "");
  b.nccl = r.boolean("nccl", false);
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

}  // namespace

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
  r.done();
  if (list == nullptr) fail_field(source, "behaviours", "is required", "list behaviours");
  return parse_list(*list, source, "behaviours");
}

BehaviourTable BehaviourTable::load_file(const std::string& path) {
  const std::string text = read_text_file(path);
  core::DocumentScope scope(path, text);
  return parse(core::parse_yaml(text, path), path);
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
      if (!b.restart_policy.empty() && b.restart_policy != restart) continue;
      bool ok = true;
      for (const auto& e : b.annotations) {
        const std::string* have = annotation(e.key);
        if (have == nullptr || *have != e.value.as_string()) ok = false;
      }
      if (!ok) continue;
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
  plan.exit_code = chosen->exit_code;
  plan.termination_message = chosen->termination_message;
  plan.output = chosen->output;
  plan.nccl = chosen->nccl;

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
      plan.nccl_config = parse_nccl_test_args(args);
    } catch (const core::InvalidInput& e) {
      plan.error = std::string("gpufleet sim: ") + e.what();
    }
  }
  if (!plan.error.empty()) {
    plan.exit_code = 2;
    plan.duration_s = 0;
    plan.nccl = false;
    plan.termination_message = plan.error;
    plan.output = plan.error + "\n";
  }
  return plan;
}

// Shared by callers that turn nccl output into a termination message.
std::string termination_tail(const std::string& text) { return tail_lines(text, 4096); }

}  // namespace gpufleet::sim
