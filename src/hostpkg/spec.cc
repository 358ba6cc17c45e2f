#include "hostpkg/spec.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "core/errors.h"
#include "core/time.h"
#include "hostpkg/strict.h"

namespace gpufleet::hostpkg {

namespace {

using core::InvalidInput;
using std::chrono::seconds;

constexpr seconds kMaxStageTimeout{24 * 3600};

// Default stage timeouts: steps are usually quick; an interrupt includes a reboot.
constexpr std::array<seconds, kStageCount> kDefaultTimeouts{
    seconds(600), seconds(600), seconds(600), seconds(300), seconds(1800), seconds(600)};

bool is_dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// ConfigMap keys become file names in the step container.
bool is_config_key(std::string_view s) {
  if (s.empty() || s.size() > 253 || s == "." || s == "..") return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool is_env_name(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

void check_object_header(const core::Value& object, std::string_view kind, std::string& name) {
  const core::Map& top =
      strict_map(object, std::string(kind), {"apiVersion", "kind", "metadata", "spec", "status"});
  std::string api = optional_string(top, "", "apiVersion").value_or("");
  if (api != "gpufleet.io/v1alpha1") {
    throw InvalidInput("apiVersion: \"" + api + "\" is not served for " + std::string(kind) +
                       "; use gpufleet.io/v1alpha1");
  }
  std::string k = optional_string(top, "", "kind").value_or("");
  if (k != kind) {
    throw InvalidInput("kind: \"" + k + "\" where " + std::string(kind) + " was expected; pass a " +
                       std::string(kind) + " object");
  }
  const core::Value* meta = top.find("metadata");
  if (meta == nullptr || !meta->is_map()) {
    throw InvalidInput("metadata: required; set metadata.name");
  }
  name = required_string(meta->as_map(), "metadata", "name");
  if (name.size() > 253) {
    throw InvalidInput("metadata.name: longer than 253 characters; shorten it");
  }
}

std::string resolve_image(const std::string& image, const std::string& version,
                          const std::string& field) {
  if (image.find_first_of(" \t\n") != std::string::npos) {
    throw InvalidInput(
        field + ": \"" + image +
        "\" contains white space; write an image reference such as registry.example/sysctl");
  }
  auto at = image.find('@');
  if (at != std::string::npos) {
    std::string digest = image.substr(at + 1);
    bool ok = digest.rfind("sha256:", 0) == 0 && digest.size() == 7 + 64 &&
              std::all_of(digest.begin() + 7, digest.end(),
                          [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!ok || at == 0) {
      throw InvalidInput(field + ": \"" + image +
                         "\" has a malformed digest; write repo@sha256:<64 lower-case hex digits>");
    }
    return image;
  }
  auto slash = image.rfind('/');
  auto colon = image.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    std::string tag = image.substr(colon + 1);
    if (tag != version && tag != "v" + version) {
      throw InvalidInput(
          field + ": tag \"" + tag + "\" differs from the package version \"" + version +
          "\"; drop the tag (it is set to the version) or pin a digest with @sha256:");
    }
    return image;
  }
  if (image.empty()) throw InvalidInput(field + ": required; set the package image repository");
  return image + ":" + version;
}

std::vector<std::string> topo_order(const std::map<std::string, std::vector<std::string>>& deps) {
  // Depth-first; a back edge is a cycle and is reported as the path around it.
  std::map<std::string, int> color;  // 0 new, 1 on stack, 2 done
  std::vector<std::string> stack, order;
  std::function<void(const std::string&)> visit = [&](const std::string& n) {
    color[n] = 1;
    stack.push_back(n);
    for (const std::string& d : deps.at(n)) {
      if (color[d] == 1) {
        auto it = std::find(stack.begin(), stack.end(), d);
        std::string cycle;
        for (; it != stack.end(); ++it) cycle += *it + " -> ";
        throw InvalidInput("spec.packages: dependsOn cycle " + cycle + d +
                           "; remove one of these dependsOn entries");
      }
      if (color[d] == 0) visit(d);
    }
    stack.pop_back();
    color[n] = 2;
    order.push_back(n);
  };
  for (const auto& [n, _] : deps) {
    if (color[n] == 0) visit(n);
  }
  return order;
}

Package parse_package(const std::string& name, const core::Value& v) {
  std::string f = "spec.packages." + name;
  if (!is_dns_label(name)) {
    throw InvalidInput(f + ": package name \"" + name +
                       "\" is not a DNS label; use lower-case letters, digits and '-', at most 63");
  }
  const core::Map& m =
      strict_map(v, f,
                 {"version", "image", "dependsOn", "configMap", "configInterrupts", "interrupt",
                  "env", "resources", "timeouts", "uninstall", "downgrade"});
  Package p;
  p.name = name;
  p.version_text = required_string(m, f, "version");
  if (!core::is_exact_pin(p.version_text)) {
    throw InvalidInput(
        f + ".version: \"" + p.version_text +
        "\" is not an exact semantic version; write MAJOR.MINOR.PATCH such as 1.2.0");
  }
  // Lenient only about leading zeros (is_exact_pin wants all three parts): NVIDIA's driver
  // versions pad the last part (535.230.02, 570.148.08), and those are a package's version.
  p.version = core::SemVer::parse(p.version_text, true);
  if (!p.version_text.empty() && (p.version_text[0] == 'v' || p.version_text[0] == 'V')) {
    p.version_text = p.version_text.substr(1);
  }
  p.image = resolve_image(required_string(m, f, "image"), p.version_text, f + ".image");
  p.depends_on = string_list(m.find("dependsOn"), f + ".dependsOn");
  if (const core::Value* cm = m.find("configMap"); cm && !cm->is_null()) {
    for (const auto& [k, val] : strict_map(*cm, f + ".configMap", {})) {
      if (!is_config_key(k)) {
        throw InvalidInput(f + ".configMap: key \"" + k +
                           "\" is not a file name; use letters, digits, '-', '_' and '.'");
      }
      if (!val.is_string()) {
        throw InvalidInput(f + ".configMap." + k + ": expected file content as a string, got " +
                           describe(val));
      }
      p.config_map[k] = val.as_string();
    }
  }
  if (const core::Value* ci = m.find("configInterrupts"); ci && !ci->is_null()) {
    for (const auto& [glob, val] : strict_map(*ci, f + ".configInterrupts", {})) {
      std::string gf = f + ".configInterrupts." + glob;
      ConfigInterrupt c{glob, parse_interrupt(val, gf)};
      bool any = false;
      for (const auto& [k, _] : p.config_map) any = any || fnmatch(glob.c_str(), k.c_str(), 0) == 0;
      if (!any) {
        throw InvalidInput(gf +
                           ": the pattern matches no configMap key; fix the pattern or remove it");
      }
      p.config_interrupts.push_back(std::move(c));
    }
  }
  if (const core::Value* i = m.find("interrupt"))
    p.interrupt = parse_interrupt(*i, f + ".interrupt");
  if (const core::Value* e = m.find("env"); e && !e->is_null()) {
    for (const auto& [k, val] : strict_map(*e, f + ".env", {})) {
      if (!is_env_name(k) || k.rfind("GPUFLEET_", 0) == 0) {
        throw InvalidInput(
            f + ".env." + k +
            ": not a usable variable name; use letters, digits and '_' (GPUFLEET_ is reserved)");
      }
      if (!val.is_string()) {
        throw InvalidInput(f + ".env." + k + ": expected a string, got " + describe(val) +
                           "; quote it");
      }
      p.env[k] = val.as_string();
    }
  }
  if (const core::Value* r = m.find("resources"); r && !r->is_null()) {
    p.resources = parse_pod_resources(*r, f + ".resources");
  }
  p.timeouts = kDefaultTimeouts;
  if (const core::Value* t = m.find("timeouts"); t && !t->is_null()) {
    const core::Map& tm =
        strict_map(*t, f + ".timeouts",
                   {"apply", "upgrade", "uninstall", "config", "interrupt", "postInterrupt"});
    const char* keys[kStageCount] = {"apply",  "upgrade",   "uninstall",
                                     "config", "interrupt", "postInterrupt"};
    for (std::size_t s = 0; s < kStageCount; ++s) {
      p.timeouts[s] =
          optional_duration(tm, f + ".timeouts", keys[s], kDefaultTimeouts[s], kMaxStageTimeout);
    }
  }
  if (const core::Value* u = m.find("uninstall"); u && !u->is_null()) {
    p.uninstall_supported = optional_bool(strict_map(*u, f + ".uninstall", {"supported"}),
                                          f + ".uninstall", "supported", false);
  }
  p.downgrade = p.uninstall_supported ? DowngradeRule::UninstallFirst : DowngradeRule::Refuse;
  if (auto d = optional_string(m, f, "downgrade")) {
    if (*d == "uninstallFirst") {
      if (!p.uninstall_supported) {
        throw InvalidInput(f +
                           ".downgrade: uninstallFirst needs uninstall.supported: true; enable "
                           "uninstall or use inPlace or refuse");
      }
      p.downgrade = DowngradeRule::UninstallFirst;
    } else if (*d == "inPlace") {
      p.downgrade = DowngradeRule::InPlace;
    } else if (*d == "refuse") {
      p.downgrade = DowngradeRule::Refuse;
    } else {
      throw InvalidInput(f + ".downgrade: \"" + *d +
                         "\" is not a rule; use uninstallFirst, inPlace or refuse");
    }
  }
  return p;
}

}  // namespace

std::string_view validate_when_name(ValidateWhen w) noexcept {
  switch (w) {
    case ValidateWhen::Interrupting: return "Interrupting";
    case ValidateWhen::Always: return "Always";
    case ValidateWhen::Never: return "Never";
  }
  return "Interrupting";
}

// {when: Interrupting|Always|Never, categories: [diagnostics/dcgm-r1], deadlineSeconds: 1800}.
Validation parse_validation(const core::Value& v, const std::string& f) {
  const core::Map& m = strict_map(v, f, {"when", "categories", "deadlineSeconds"});
  Validation out;
  std::string when = optional_string(m, f, "when").value_or("Interrupting");
  if (when == "Interrupting") {
    out.when = ValidateWhen::Interrupting;
  } else if (when == "Always") {
    out.when = ValidateWhen::Always;
  } else if (when == "Never") {
    out.when = ValidateWhen::Never;
  } else {
    throw InvalidInput(f + ".when: \"" + when +
                       "\" is not a policy; use Interrupting (validate nodes whose change "
                       "delivered an interrupt), Always or Never");
  }
  if (const core::Value* c = m.find("categories"); c && !c->is_null()) {
    std::vector<std::string> cats = string_list(c, f + ".categories");
    if (cats.empty() || cats.size() > Validation::kMaxCategories) {
      throw InvalidInput(f + ".categories: " + std::to_string(cats.size()) +
                         " categories; give 1 to " + std::to_string(Validation::kMaxCategories) +
                         " certify catalog ids, e.g. [diagnostics/dcgm-r1] (when: Never turns "
                         "validation off)");
    }
    for (std::size_t i = 0; i < cats.size(); ++i) {
      const std::string& cat = cats[i];
      const std::size_t slash = cat.find('/');
      bool ok = slash != std::string::npos && slash > 0 && slash + 1 < cat.size() &&
                cat.size() <= 128 && cat.find('/', slash + 1) == std::string::npos;
      for (std::size_t k = 0; ok && k < cat.size(); ++k) {
        const char ch = cat[k];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '/' ||
             (ch == '.' && k > slash);
      }
      if (!ok) {
        throw InvalidInput(f + ".categories[" + std::to_string(i) + "]: \"" + cat +
                           "\" is not a certify catalog id; write group/name in lower case, "
                           "e.g. diagnostics/dcgm-r1 or communication/nccl-all-reduce");
      }
    }
    out.categories = std::move(cats);
  }
  out.deadline = seconds(optional_int(m, f, "deadlineSeconds", out.deadline.count(),
                                      Validation::kMinDeadline, Validation::kMaxDeadline));
  return out;
}

namespace {

// {interval: 6h, onDrift: Report|Reapply}. interval "0" (or absent) turns it off.
Reverify parse_reverify(const core::Value& v, const std::string& f) {
  const core::Map& m = strict_map(v, f, {"interval", "onDrift"});
  Reverify r;
  if (auto text = optional_string(m, f, "interval")) {
    auto d = core::try_parse_duration(*text);
    if (!d || *d < std::chrono::nanoseconds::zero()) {
      throw InvalidInput(f + ".interval: \"" + *text +
                         "\" is not a duration; write e.g. \"6h\" or \"30m\" (0 turns it off)");
    }
    auto secs = std::chrono::duration_cast<seconds>(*d);
    if (d->count() != 0 && (secs < Reverify::kMinInterval || secs > Reverify::kMaxInterval)) {
      throw InvalidInput(f + ".interval: \"" + *text + "\" is outside " +
                         core::format_duration(Reverify::kMinInterval) + " to " +
                         core::format_duration(Reverify::kMaxInterval) +
                         "; checks run on every selected node, so re-verify at most every "
                         "minute (0 turns it off)");
    }
    r.interval = d->count() == 0 ? seconds(0) : secs;
  }
  std::string action = optional_string(m, f, "onDrift").value_or("Report");
  if (action == "Report") {
    r.on_drift = DriftAction::Report;
  } else if (action == "Reapply") {
    r.on_drift = DriftAction::Reapply;
  } else {
    throw InvalidInput(f + ".onDrift: \"" + action +
                       "\" is not a drift action; use Report (only report) or Reapply (roll the "
                       "package out again on the drifted node)");
  }
  return r;
}

Budget parse_budget(const core::Value& v, const std::string& f) {
  const core::Map& m = strict_map(v, f, {"count", "percent"});
  bool has_count = m.contains("count"), has_percent = m.contains("percent");
  if (has_count == has_percent) {
    throw InvalidInput(f + ": set exactly one of count or percent");
  }
  if (has_count) return Budget{false, optional_int(m, f, "count", 1, 1, 1000000)};
  return Budget{true, optional_int(m, f, "percent", 1, 1, 100)};
}

Strategy parse_strategy(const core::Value& v, const std::string& f) {
  const core::Map& m = strict_map(v, f, {"fixed", "linear", "exponential"});
  if (m.size() != 1) {
    throw InvalidInput(f + ": set exactly one of fixed, linear or exponential");
  }
  const auto& [kind, body] = *m.begin();
  std::string bf = f + "." + kind;
  Strategy s;
  std::initializer_list<std::string_view> common = {"initialBatch", "batchThreshold",
                                                    "failureThreshold", "safetyLimit"};
  if (kind == "fixed") {
    s.kind = StrategyKind::Fixed;
    strict_map(body, bf, common);
  } else if (kind == "linear") {
    s.kind = StrategyKind::Linear;
    strict_map(body, bf,
               {"initialBatch", "batchThreshold", "failureThreshold", "safetyLimit", "step"});
  } else {
    s.kind = StrategyKind::Exponential;
    strict_map(
        body, bf,
        {"initialBatch", "batchThreshold", "failureThreshold", "safetyLimit", "growthFactor"});
  }
  const core::Map& b = body.as_map();
  s.initial_batch = optional_int(b, bf, "initialBatch", 1, 1, 1000000);
  s.batch_threshold = optional_number(b, bf, "batchThreshold", 100, 1, 100);
  s.failure_threshold = optional_int(b, bf, "failureThreshold", 3, 1, 1000);
  s.safety_limit = optional_number(b, bf, "safetyLimit", 50, 0, 100);
  if (s.kind == StrategyKind::Linear) s.step = optional_int(b, bf, "step", 1, 1, 1000000);
  if (s.kind == StrategyKind::Exponential) {
    s.growth_factor = optional_number(b, bf, "growthFactor", 2.0, 1.01, 100);
  }
  return s;
}

Compartment parse_compartment(const core::Value& v, const std::string& f, bool is_default) {
  const core::Map& m = is_default ? strict_map(v, f, {"budget", "strategy"})
                                  : strict_map(v, f, {"name", "selector", "budget", "strategy"});
  Compartment c;
  c.name = is_default ? "default" : required_string(m, f, "name");
  if (!is_default) {
    if (!is_dns_label(c.name)) {
      throw InvalidInput(f + ".name: \"" + c.name +
                         "\" is not a DNS label; use lower-case letters, digits and '-'");
    }
    const core::Value* sel = m.find("selector");
    if (sel == nullptr || sel->is_null()) {
      throw InvalidInput(f + ".selector: required; a compartment selects its nodes by labels");
    }
    c.selector = LabelSelector::parse(*sel, f + ".selector");
    if (c.selector.empty()) {
      throw InvalidInput(
          f +
          ".selector: empty, so it would select every node; use the default compartment for that");
    }
  }
  const core::Value* b = m.find("budget");
  if (b == nullptr) throw InvalidInput(f + ".budget: required; set {count: N} or {percent: P}");
  c.budget = parse_budget(*b, f + ".budget");
  const core::Value* s = m.find("strategy");
  if (s == nullptr) throw InvalidInput(f + ".strategy: required; set fixed, linear or exponential");
  c.strategy = parse_strategy(*s, f + ".strategy");
  return c;
}

}  // namespace

std::string_view stage_name(Stage s) noexcept {
  switch (s) {
    case Stage::Apply: return "apply";
    case Stage::Upgrade: return "upgrade";
    case Stage::Uninstall: return "uninstall";
    case Stage::Config: return "config";
    case Stage::Interrupt: return "interrupt";
    case Stage::PostInterrupt: return "post-interrupt";
  }
  return "?";
}

bool parse_stage(std::string_view name, Stage& out) noexcept {
  for (std::size_t i = 0; i < kStageCount; ++i) {
    if (stage_name(static_cast<Stage>(i)) == name) {
      out = static_cast<Stage>(i);
      return true;
    }
  }
  return false;
}

std::string_view interrupt_name(InterruptKind k) noexcept {
  switch (k) {
    case InterruptKind::None: return "none";
    case InterruptKind::RestartServices: return "restartServices";
    case InterruptKind::RestartAllServices: return "restartAllServices";
    case InterruptKind::Reboot: return "reboot";
  }
  return "?";
}

std::string_view downgrade_name(DowngradeRule r) noexcept {
  switch (r) {
    case DowngradeRule::UninstallFirst: return "uninstallFirst";
    case DowngradeRule::InPlace: return "inPlace";
    case DowngradeRule::Refuse: return "refuse";
  }
  return "?";
}

std::string_view drift_action_name(DriftAction a) noexcept {
  switch (a) {
    case DriftAction::Report: return "Report";
    case DriftAction::Reapply: return "Reapply";
  }
  return "?";
}

std::string_view strategy_name(StrategyKind k) noexcept {
  switch (k) {
    case StrategyKind::Fixed: return "fixed";
    case StrategyKind::Linear: return "linear";
    case StrategyKind::Exponential: return "exponential";
  }
  return "?";
}

Interrupt parse_interrupt(const core::Value& v, const std::string& f) {
  const core::Map& m = strict_map(v, f, {"type", "services"});
  std::string type = required_string(m, f, "type");
  Interrupt i;
  std::vector<std::string> services = string_list(m.find("services"), f + ".services");
  if (type == "none")
    i.kind = InterruptKind::None;
  else if (type == "reboot")
    i.kind = InterruptKind::Reboot;
  else if (type == "restartServices")
    i.kind = InterruptKind::RestartServices;
  else if (type == "restartAllServices")
    i.kind = InterruptKind::RestartAllServices;
  else {
    throw InvalidInput(
        f + ".type: \"" + type +
        "\" is not an interrupt; use none, reboot, restartServices or restartAllServices");
  }
  if (i.kind == InterruptKind::RestartServices) {
    if (services.empty()) {
      throw InvalidInput(
          f +
          ".services: restartServices needs the services to restart (e.g. [containerd.service])");
    }
    for (const std::string& s : services) {
      if (s.empty() || s.find_first_of(" /\t\n") != std::string::npos) {
        throw InvalidInput(f + ".services: \"" + s + "\" is not a systemd unit name");
      }
    }
    std::sort(services.begin(), services.end());
    services.erase(std::unique(services.begin(), services.end()), services.end());
    i.services = std::move(services);
  } else if (!services.empty()) {
    throw InvalidInput(f + ".services: only restartServices takes services; remove them");
  }
  return i;
}

core::Value interrupt_to_value(const Interrupt& i) {
  core::Value v = core::Value::map();
  v["type"] = std::string(interrupt_name(i.kind));
  if (!i.services.empty()) {
    core::Value l = core::Value::list();
    for (const std::string& s : i.services) l.push_back(s);
    v["services"] = std::move(l);
  }
  return v;
}

Interrupt coalesce(const Interrupt& a, const Interrupt& b) {
  Interrupt out;
  out.kind = std::max(a.kind, b.kind);
  if (out.kind == InterruptKind::RestartServices) {
    std::set<std::string> all(a.services.begin(), a.services.end());
    all.insert(b.services.begin(), b.services.end());
    out.services.assign(all.begin(), all.end());
  }
  return out;
}

Interrupt Package::interrupt_for_key(const std::string& key) const {
  Interrupt out;
  for (const ConfigInterrupt& c : config_interrupts) {
    if (fnmatch(c.key_glob.c_str(), key.c_str(), 0) == 0) out = coalesce(out, c.interrupt);
  }
  return out;
}

const Package* HostPackageSet::find(std::string_view package) const noexcept {
  for (const Package& p : packages) {
    if (p.name == package) return &p;
  }
  return nullptr;
}

HostPackageSet parse_host_package_set(const core::Value& object) {
  HostPackageSet set;
  check_object_header(object, "HostPackageSet", set.name);
  const core::Value* spec = object.find("spec");
  if (spec == nullptr) throw InvalidInput("spec: required; a HostPackageSet needs spec.packages");
  const core::Map& m =
      strict_map(*spec, "spec",
                 {"nodeSelector", "packages", "priority", "sequencing", "runtimeRequired",
                  "autoTaintNewNodes", "additionalTolerations", "protectedPods", "pause", "disable",
                  "deploymentPolicy", "reverify", "validation"});
  if (const core::Value* ns = m.find("nodeSelector")) {
    set.node_selector = LabelSelector::parse(*ns, "spec.nodeSelector");
  }
  set.priority = optional_int(m, "spec", "priority", 100, 0, 1000000);
  std::string seq = optional_string(m, "spec", "sequencing").value_or("node");
  if (seq == "node")
    set.sequencing = Sequencing::Node;
  else if (seq == "all")
    set.sequencing = Sequencing::All;
  else
    throw InvalidInput("spec.sequencing: \"" + seq + "\" is not a sequencing; use node or all");
  set.runtime_required = optional_bool(m, "spec", "runtimeRequired", false);
  set.auto_taint_new_nodes = optional_bool(m, "spec", "autoTaintNewNodes", false);
  if (set.auto_taint_new_nodes && !set.runtime_required) {
    throw InvalidInput(
        "spec.autoTaintNewNodes: the taint is lifted when runtime-required sets complete, so it "
        "needs spec.runtimeRequired: true");
  }
  set.pause = optional_bool(m, "spec", "pause", false);
  set.disable = optional_bool(m, "spec", "disable", false);
  set.deployment_policy = optional_string(m, "spec", "deploymentPolicy").value_or("");
  if (const core::Value* t = m.find("additionalTolerations"); t && !t->is_null()) {
    if (!t->is_list())
      throw InvalidInput("spec.additionalTolerations: expected a list of tolerations");
    for (std::size_t i = 0; i < t->size(); ++i) {
      std::string f = "spec.additionalTolerations[" + std::to_string(i) + "]";
      const core::Map& tm =
          strict_map((*t)[i], f, {"key", "operator", "value", "effect", "tolerationSeconds"});
      std::string op = optional_string(tm, f, "operator").value_or("Equal");
      if (op != "Equal" && op != "Exists") {
        throw InvalidInput(f + ".operator: \"" + op + "\"; use Equal or Exists");
      }
    }
    set.additional_tolerations = *t;
  }
  if (const core::Value* pp = m.find("protectedPods"); pp && !pp->is_null()) {
    const core::Map& pm = strict_map(*pp, "spec.protectedPods", {"selector", "waitTimeout"});
    const core::Value* sel = pm.find("selector");
    if (sel == nullptr)
      throw InvalidInput(
          "spec.protectedPods.selector: required; select the pods that must not be interrupted");
    set.protected_pods = LabelSelector::parse(*sel, "spec.protectedPods.selector");
    set.has_protected_pods = true;
    set.protected_pod_wait =
        optional_duration(pm, "spec.protectedPods", "waitTimeout", std::chrono::seconds(3600),
                          std::chrono::hours(24 * 7));
  }
  if (const core::Value* rv = m.find("reverify"); rv && !rv->is_null()) {
    set.reverify = parse_reverify(*rv, "spec.reverify");
  }
  if (const core::Value* va = m.find("validation"); va && !va->is_null()) {
    set.validation = parse_validation(*va, "spec.validation");
  }
  const core::Value* pk = m.find("packages");
  if (pk == nullptr || !pk->is_map() || pk->as_map().empty()) {
    throw InvalidInput(
        "spec.packages: required; give at least one package as name: {version, image}");
  }
  if (pk->size() > 64) {
    throw InvalidInput("spec.packages: " + std::to_string(pk->size()) +
                       " packages; a set holds at most 64, split it into several sets");
  }
  std::map<std::string, Package> by_name;
  std::map<std::string, std::vector<std::string>> deps;
  for (const auto& [name, v] : pk->as_map()) {
    Package p = parse_package(name, v);
    deps[name] = p.depends_on;
    by_name.emplace(name, std::move(p));
  }
  for (const auto& [name, ds] : deps) {
    for (const std::string& d : ds) {
      if (!by_name.contains(d)) {
        throw InvalidInput("spec.packages." + name + ".dependsOn: \"" + d +
                           "\" is not a package of this set; add it or remove the dependency");
      }
    }
  }
  for (const std::string& n : topo_order(deps)) set.packages.push_back(std::move(by_name.at(n)));
  return set;
}

std::int64_t Budget::resolve(std::int64_t size) const noexcept {
  if (size <= 0) return 0;
  if (!percent) return value;
  return std::max<std::int64_t>(1, size * value / 100);
}

std::int64_t Strategy::batch_size(std::int64_t streak) const noexcept {
  constexpr std::int64_t kCap = 1000000;
  switch (kind) {
    case StrategyKind::Fixed: return initial_batch;
    case StrategyKind::Linear: return std::min(kCap, initial_batch + step * streak);
    case StrategyKind::Exponential: {
      double size =
          static_cast<double>(initial_batch) * std::pow(growth_factor, static_cast<double>(streak));
      return size >= static_cast<double>(kCap)
                 ? kCap
                 : std::max<std::int64_t>(1, static_cast<std::int64_t>(size));
    }
  }
  return initial_batch;
}

DeploymentPolicy parse_deployment_policy(const core::Value& object) {
  DeploymentPolicy p;
  check_object_header(object, "DeploymentPolicy", p.name);
  const core::Value* spec = object.find("spec");
  if (spec == nullptr) throw InvalidInput("spec: required; a DeploymentPolicy needs spec.default");
  const core::Map& m = strict_map(*spec, "spec", {"default", "compartments"});
  const core::Value* d = m.find("default");
  if (d == nullptr) {
    throw InvalidInput(
        "spec.default: required; give the budget and strategy for nodes no compartment selects");
  }
  p.fallback = parse_compartment(*d, "spec.default", true);
  if (const core::Value* cs = m.find("compartments"); cs && !cs->is_null()) {
    if (!cs->is_list()) throw InvalidInput("spec.compartments: expected a list");
    std::set<std::string> names{"default"};
    for (std::size_t i = 0; i < cs->size(); ++i) {
      std::string f = "spec.compartments[" + std::to_string(i) + "]";
      Compartment c = parse_compartment((*cs)[i], f, false);
      if (!names.insert(c.name).second) {
        throw InvalidInput(f + ".name: \"" + c.name +
                           "\" is used twice (or is the reserved name default); rename it");
      }
      p.compartments.push_back(std::move(c));
    }
  }
  return p;
}

DeploymentPolicy conservative_policy() {
  DeploymentPolicy p;
  p.name = "";
  p.fallback.name = "default";
  p.fallback.budget = Budget{false, 1};
  p.fallback.strategy = Strategy{};
  return p;
}

ClusterBudget parse_cluster_budget(const core::Value& v, const std::string& f) {
  const core::Map& m =
      strict_map(v, f, {"topologyKey", "maxUnavailablePerDomain", "maxUnavailable"});
  ClusterBudget b;
  b.topology_key = optional_string(m, f, "topologyKey").value_or("");
  b.max_per_domain = optional_int(m, f, "maxUnavailablePerDomain", 1, 1, 1000000);
  if (const core::Value* t = m.find("maxUnavailable")) {
    Budget v = parse_budget(*t, f + ".maxUnavailable");
    b.max_total = kube::IntOrPercent{v.percent, v.value};
  }
  return b;
}

ClusterBudget cluster_budget_from(const kube::DisruptionBudgetSpec& spec) {
  ClusterBudget b;
  b.topology_key = spec.topology_key;
  // Without a key every node is in the domain "": no per-domain limit then.
  b.max_per_domain = spec.topology_key.empty() ? INT64_MAX : spec.max_per_domain;
  b.max_total = spec.max_unavailable;
  return b;
}

}  // namespace gpufleet::hostpkg
