#include "hostpkg/stage_plan.h"

#include <openssl/evp.h>

#include <algorithm>

namespace gpufleet::hostpkg {

std::string short_hash(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(16);
  for (unsigned i = 0; i < 8; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

DesiredState digest(const HostPackageSet& set) {
  DesiredState d;
  d.set = &set;
  std::string all;
  for (const Package& p : set.packages) {
    std::map<std::string, std::string> hashes;
    std::string joined;
    for (const auto& [k, content] : p.config_map) {
      std::string h = short_hash(content);
      joined += k + "=" + h + "\n";
      hashes.emplace(k, std::move(h));
    }
    std::string ph = short_hash(joined);
    all += p.name + " " + p.version_text + " " + p.image + " " + ph + "\n";
    d.config_hashes.push_back(std::move(hashes));
    d.package_config_hash.push_back(std::move(ph));
  }
  d.target = short_hash(all);
  return d;
}

std::string PlannedStep::key() const {
  return (package.empty() ? std::string("*") : package) + "/" + std::string(stage_name(stage)) +
         "/" + version + "/" + config_hash + "/" + change();
}

namespace {

std::vector<std::string> changed_keys(const std::map<std::string, std::string>& want,
                                      const std::map<std::string, std::string>& have) {
  std::vector<std::string> out;
  for (const auto& [k, h] : want) {
    auto it = have.find(k);
    if (it == have.end() || it->second != h) out.push_back(k);
  }
  for (const auto& [k, _] : have) {
    if (!want.contains(k)) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A step of a package in the set, at its desired version.
PlannedStep desired_step(const Package& p, Stage stage) {
  PlannedStep s;
  s.package = p.name;
  s.stage = stage;
  s.version = p.version_text;
  s.image = p.image;
  s.env = p.env;
  s.resources = p.resources;
  s.interrupt = p.interrupt;
  s.timeout = p.timeout(stage);
  return s;
}

// A step of a package as the node has it installed (removing it).
PlannedStep installed_step(const std::string& name, const InstalledPackage& inst, Stage stage) {
  PlannedStep s;
  s.package = name;
  s.stage = stage;
  s.version = inst.version;
  s.image = inst.image;
  s.env = inst.env;
  s.resources = inst.resources;
  s.interrupt = inst.interrupt;
  return s;
}

// What plan_node gathers before it orders the steps.
struct PlanParts {
  std::vector<PlannedStep> uninstalls;            // packages that left the set
  std::vector<PlannedStep> downgrade_uninstalls;  // uninstallFirst downgrades, dependsOn order
  std::vector<PlannedStep> changes;               // applies, upgrades, configs, dependsOn order
  std::vector<std::string> touched;               // packages whose post-interrupt check will be due
};

// Packages that left the set. Their dependents are unknown (they left too), so they go in
// reverse name order, which is at least deterministic.
void plan_departures(const HostPackageSet& set, const NodeRecord& record, NodePlan& plan,
                     PlanParts& parts) {
  for (auto it = record.installed.rbegin(); it != record.installed.rend(); ++it) {
    const auto& [name, inst] = *it;
    if (set.find(name) != nullptr) continue;
    if (!inst.uninstall_supported) {
      plan.kept.push_back(name);
      continue;
    }
    parts.uninstalls.push_back(installed_step(name, inst, Stage::Uninstall));
  }
}

// The version step of package `p` (apply, upgrade, or uninstall-then-apply); false when it is
// blocked (recorded in `plan`). `config_from_scratch` is set when its configuration must be
// applied whole.
bool plan_version(const Package& p, const InstalledPackage* inst, NodePlan& plan, PlanParts& parts,
                  bool& config_from_scratch) {
  config_from_scratch = inst == nullptr;
  if (inst == nullptr) {
    parts.changes.push_back(desired_step(p, Stage::Apply));
    return true;
  }
  auto installed = core::SemVer::try_parse(inst->version, true);
  const int cmp = installed ? core::compare(p.version, *installed) : 1;
  if (cmp > 0 || (cmp < 0 && p.downgrade == DowngradeRule::InPlace)) {
    PlannedStep s = desired_step(p, Stage::Upgrade);
    s.from_version = inst->version;
    s.downgrade = cmp < 0;
    parts.changes.push_back(std::move(s));
  } else if (cmp < 0 && p.downgrade == DowngradeRule::Refuse) {
    plan.blocked.push_back("package " + p.name + ": installed " + inst->version +
                           " is newer than the desired " + p.version_text +
                           " and its downgrade rule is refuse; raise the version or set "
                           "downgrade: inPlace or uninstallFirst");
    return false;
  } else if (cmp < 0) {  // UninstallFirst: remove the installed version, then apply
    PlannedStep u = installed_step(p.name, *inst, Stage::Uninstall);
    u.timeout = p.timeout(Stage::Uninstall);
    u.downgrade = true;
    parts.downgrade_uninstalls.push_back(std::move(u));
    PlannedStep s = desired_step(p, Stage::Apply);
    s.from_version = inst->version;
    s.downgrade = true;
    parts.changes.push_back(std::move(s));
    config_from_scratch = true;
  }
  return true;
}

// Package `i` of the set: its version step and its config step, as the record needs them.
void plan_package(const DesiredState& desired, std::size_t i, const NodeRecord& record,
                  NodePlan& plan, PlanParts& parts) {
  const Package& p = desired.set->packages[i];
  auto it = record.installed.find(p.name);
  // A drifted package sent back by onDrift: Reapply is applied again from scratch.
  const InstalledPackage* inst =
      it == record.installed.end() || record.reapply.contains(p.name) ? nullptr : &it->second;
  bool config_from_scratch = false;
  if (!plan_version(p, inst, plan, parts, config_from_scratch)) return;
  static const std::map<std::string, std::string> kNone;
  const auto& have = config_from_scratch || inst == nullptr ? kNone : inst->config_hashes;
  std::vector<std::string> keys = changed_keys(desired.config_hashes[i], have);
  bool version_step = !parts.changes.empty() && parts.changes.back().package == p.name;
  if (!keys.empty()) {
    PlannedStep s = desired_step(p, Stage::Config);
    s.interrupt = {};  // only what the changed keys ask for
    s.config_hash = desired.package_config_hash[i];
    for (const std::string& k : keys) s.interrupt = coalesce(s.interrupt, p.interrupt_for_key(k));
    s.changed_keys = std::move(keys);
    parts.changes.push_back(std::move(s));
    version_step = true;
  }
  if (version_step) parts.touched.push_back(p.name);
}

// One pod for every package of the node: the set's packages in dependsOn order, then the
// ones leaving it (as recorded); an env name set twice keeps the first value.
PlannedStep interrupt_step(const DesiredState& desired, const NodeRecord& record,
                           const Interrupt& interrupt) {
  const HostPackageSet& set = *desired.set;
  PlannedStep s;
  s.stage = Stage::Interrupt;
  s.interrupt = interrupt;
  s.version = desired.target;
  std::chrono::seconds t{0};
  for (const Package& p : set.packages) t = std::max(t, p.timeout(Stage::Interrupt));
  s.timeout = t;
  auto add = [&s](const std::map<std::string, std::string>& env, const PodResources& r) {
    for (const auto& [k, v] : env) s.env.emplace(k, v);
    s.resources = merge_pod_resources(s.resources, r);
  };
  for (const Package& p : set.packages) add(p.env, p.resources);
  for (const auto& [name, inst] : record.installed)
    if (set.find(name) == nullptr) add(inst.env, inst.resources);
  return s;
}

// Post-interrupt checks: packages already waiting on one, then the ones changing now.
void plan_post_interrupt(const HostPackageSet& set, const NodeRecord& record,
                         const std::vector<std::string>& touched, bool interrupting,
                         NodePlan& plan) {
  std::set<std::string> post(record.pending_post.begin(), record.pending_post.end());
  post.insert(touched.begin(), touched.end());
  if (post.empty() || !(interrupting || record.interrupted)) return;
  for (const Package& p : set.packages) {
    if (!post.contains(p.name)) continue;
    PlannedStep s = desired_step(p, Stage::PostInterrupt);
    s.interrupt = {};
    plan.steps.push_back(std::move(s));
  }
}

}  // namespace

NodePlan plan_node(const DesiredState& desired, const NodeRecord& record) {
  NodePlan plan;
  const HostPackageSet& set = *desired.set;
  PlanParts parts;
  plan_departures(set, record, plan, parts);
  for (std::size_t i = 0; i < set.packages.size(); ++i)
    plan_package(desired, i, record, plan, parts);
  if (!plan.blocked.empty()) return plan;  // a blocked node runs nothing at all

  // Dependents are uninstalled before what they depend on: reverse dependsOn order.
  std::reverse(parts.downgrade_uninstalls.begin(), parts.downgrade_uninstalls.end());
  for (auto& s : parts.downgrade_uninstalls) parts.uninstalls.push_back(std::move(s));

  Interrupt interrupt = record.pending_interrupt;
  for (const PlannedStep& s : parts.uninstalls) interrupt = coalesce(interrupt, s.interrupt);
  for (const PlannedStep& s : parts.changes) interrupt = coalesce(interrupt, s.interrupt);
  plan.interrupt = interrupt;

  for (auto& s : parts.uninstalls) plan.steps.push_back(std::move(s));
  for (auto& s : parts.changes) plan.steps.push_back(std::move(s));
  const bool interrupting = interrupt.kind != InterruptKind::None;
  if (interrupting) plan.steps.push_back(interrupt_step(desired, record, interrupt));
  plan_post_interrupt(set, record, parts.touched, interrupting, plan);
  for (PlannedStep& s : plan.steps) s.generation = record.generation;
  return plan;
}

NodeNeed node_need(const DesiredState& desired, const NodeRecord& record, std::string* reason) {
  const HostPackageSet& set = *desired.set;
  bool work = record.pending_interrupt.kind != InterruptKind::None ||
              (record.interrupted && !record.pending_post.empty());
  for (const std::string& name : record.reapply) {
    if (set.find(name) != nullptr) work = true;
  }
  for (const auto& [name, inst] : record.installed) {
    if (inst.uninstall_supported && set.find(name) == nullptr) work = true;
  }
  for (std::size_t i = 0; i < set.packages.size(); ++i) {
    const Package& p = set.packages[i];
    auto it = record.installed.find(p.name);
    if (it == record.installed.end()) {
      work = true;
      continue;
    }
    const InstalledPackage& inst = it->second;
    if (inst.version != p.version_text) {
      auto installed = core::SemVer::try_parse(inst.version, true);
      if (installed && core::compare(p.version, *installed) < 0 &&
          p.downgrade == DowngradeRule::Refuse) {
        // The same decision and message as plan_node's.
        if (reason != nullptr) *reason = plan_node(desired, record).blocked.front();
        return NodeNeed::Blocked;
      }
      if (!installed || core::compare(p.version, *installed) != 0) work = true;
    }
    if (inst.config_hashes != desired.config_hashes[i]) work = true;
  }
  return work ? NodeNeed::Work : NodeNeed::UpToDate;
}

void record_step_done(NodeRecord& record, const DesiredState& desired, const PlannedStep& step) {
  const HostPackageSet& set = *desired.set;
  // A validation asked before this step was for an earlier state of the node: ask again.
  record.validation.clear();
  const Package* p = step.package.empty() ? nullptr : set.find(step.package);
  // A drifted package whose apply, upgrade, config or uninstall just passed its check (or
  // is gone) is no longer drifted.
  if (record.drift && record.drift->package == step.package && step.stage != Stage::PostInterrupt)
    record.drift.reset();
  switch (step.stage) {
    case Stage::Apply:
    case Stage::Upgrade: {
      InstalledPackage& inst = record.installed[step.package];
      inst.version = step.version;
      inst.image = step.image;
      if (step.stage == Stage::Apply) {
        inst.config_hashes.clear();
        record.reapply.erase(step.package);
      }
      if (p != nullptr) {
        inst.uninstall_supported = p->uninstall_supported;
        inst.interrupt = p->interrupt;
      }
      inst.env = step.env;
      inst.resources = step.resources;
      record.pending_interrupt = coalesce(record.pending_interrupt, step.interrupt);
      record.pending_post.insert(step.package);
      break;
    }
    case Stage::Uninstall:
      record.installed.erase(step.package);
      record.pending_interrupt = coalesce(record.pending_interrupt, step.interrupt);
      record.pending_post.erase(step.package);
      break;
    case Stage::Config: {
      InstalledPackage& inst = record.installed[step.package];
      for (std::size_t i = 0; i < set.packages.size(); ++i) {
        if (set.packages[i].name == step.package) inst.config_hashes = desired.config_hashes[i];
      }
      inst.env = step.env;
      inst.resources = step.resources;
      record.pending_interrupt = coalesce(record.pending_interrupt, step.interrupt);
      record.pending_post.insert(step.package);
      break;
    }
    case Stage::Interrupt:
      record.pending_interrupt = Interrupt{};
      record.interrupted = true;
      break;
    case Stage::PostInterrupt: record.pending_post.erase(step.package); break;
  }
}

void mark_node_done(NodeRecord& record, const DesiredState& desired) {
  record.state = NodeState::Done;
  record.rollout = desired.target;
  record.failure.clear();
  record.boot_id.clear();
  // Without an interrupt there is no post-interrupt check; nothing stays due.
  record.pending_post.clear();
  record.interrupted = false;
  record.reapply.clear();
  record.validation.clear();
}

}  // namespace gpufleet::hostpkg
