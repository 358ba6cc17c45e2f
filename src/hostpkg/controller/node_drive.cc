// One node in progress, one transition at a time: observe the Node, its pods and its plan's
// next step; decide_node_step (node_step.h) says what comes next; act (cordon, evict, create
// the stage pod, record the step, finish or fail the node); observe again.
#include <algorithm>

#include "api/resources.h"
#include "core/log.h"
#include "core/time.h"
#include "hostpkg/controller/node_step.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/set_reconciler.h"
#include "hostpkg/controller/stage_pod.h"
#include "kube/api/conditions.h"
#include "kube/api/cordon.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/selector.h"
#include "kube/errors.h"

namespace gpufleet::hostpkg::detail {

namespace {

namespace log = core::log;

}  // namespace

bool HostPkgReconciler::evictable(const core::Value& pod) const {
  if (kube::pod::terminal(pod) || kube::pod::owned_by_daemon_set(pod) || kube::pod::mirror(pod))
    return false;
  return !(kube::namespace_of(pod) == settings_.namespace_ &&
           !kube::label_of(pod, kSetLabel).empty());  // our own stage pods
}

// Most nodes in progress wait on a running stage pod. Tell that from the pass's scan and the
// compact pod, without rebuilding the Node (and the pod) as Values: at 5,000 nodes with 500
// in progress that rebuild was most of a pass. Anything else takes drive_node's full path.
bool HostPkgReconciler::waits_on_stage_pod(Pass& p, const std::string& node_name) {
  auto it = p.index.find(node_name);
  if (it == p.index.end() || p.set.has_protected_pods) return false;
  const NodeRecord* rec = p.inputs[it->second].record;
  if (rec == nullptr || rec->state != NodeState::InProgress || !p.nodes[it->second].unschedulable)
    return false;
  NodePlan plan = plan_node(p.desired, *rec);
  const bool reboot = !plan.steps.empty() && plan.steps.front().stage == Stage::Interrupt &&
                      plan.steps.front().interrupt.kind == InterruptKind::Reboot;
  if (!plan.blocked.empty() || plan.steps.empty() || reboot) return false;
  const PlannedStep& step = plan.steps.front();
  kube::CompactPtr pod = stage_pods_.get_compact(
      kube::object_key(settings_.namespace_, stage_pod_name(p.set.name, node_name, step)));
  if (pod == nullptr) return false;
  std::string_view phase = pod->root().get_string({"status", "phase"});
  auto created = kube::parse_rfc3339(pod->root().get_string({"metadata", "creationTimestamp"}));
  bool overdue = created && clock_.now() > *created + step.timeout + kStagePodGrace;
  bool drained = true;
  for (const auto& other : pods_.by_index("node", node_name))
    drained = drained && !evictable(*other);
  return phase != "Succeeded" && phase != "Failed" && !overdue && drained;
}

// Only what the decision can reach is looked up: nothing past an unmet cordon, protected pod
// or drain (decide_node_step answers those first), so a round costs what it did inline.
NodeStepFacts HostPkgReconciler::observe_step(Pass& p, const core::Value& node,
                                              const NodeRecord& rec,
                                              std::vector<kube::ObjectPtr>& to_evict) {
  const std::string node_name(kube::name_of(node));
  NodeStepFacts f;
  f.now = clock_.now();
  f.cordoned = kube::cordon_state(node).unschedulable;
  if (!f.cordoned) return f;
  f.started = rec.started;
  f.protected_wait = p.set.protected_pod_wait;
  std::vector<kube::ObjectPtr> on_node = pods_.by_index("node", node_name);
  f.plan = plan_node(p.desired, rec);
  // Everything applied, only certify's verdict left: its validation pods run on this node, so
  // neither protected pods nor the drain apply any more (a drain would evict the validation).
  const bool only_validation =
      f.plan.blocked.empty() && f.plan.steps.empty() && p.set.validation.required(rec.interrupted);
  if (!only_validation) {
    if (p.set.has_protected_pods) {
      for (const auto& pod : on_node) {
        if (kube::pod::terminal(*pod)) continue;
        Labels labels;
        if (const core::Value* l = pod->get({"metadata", "labels"}); l && l->is_map()) {
          for (const auto& [k, v] : l->as_map())
            if (v.is_string()) labels.emplace(k, v.as_string());
        }
        if (p.set.protected_pods.matches(labels))
          f.protected_running.push_back(kube::object_key(*pod));
      }
      if (!f.protected_running.empty()) return f;
    }
    for (const auto& pod : on_node) {
      if (evictable(*pod)) to_evict.push_back(pod);
    }
    f.evictions_left = !to_evict.empty();
    if (f.evictions_left) return f;
  }
  if (!f.plan.blocked.empty()) return f;
  if (f.plan.steps.empty()) {
    f.validate_when = p.set.validation.when;
    f.interrupted = rec.interrupted;
    if (!p.set.validation.required(rec.interrupted)) return f;
    f.validation = rec.validation;
    f.validation_name = validation_request_name(p.set.name, node_name, rec.generation);
    if (!f.validation.empty()) {
      if (kube::ObjectPtr vr = validation_requests_.get(f.validation)) {
        f.validation_exists = true;
        f.validation_state = validation_seen(*vr, node_name);
      }
    }
    return f;
  }
  const PlannedStep& step = f.plan.steps.front();
  f.recorded_boot = rec.boot_id;
  f.boot = std::string(node.get_string({"status", "nodeInfo", "bootID"}));
  f.ready = kube::node::ready(node);
  f.pod_name = stage_pod_name(p.set.name, node_name, step);
  if (kube::ObjectPtr pod = stage_pods_.get(kube::object_key(settings_.namespace_, f.pod_name))) {
    f.pod_exists = true;
    f.outcome = stage_outcome(*pod);
    f.pod_created = kube::parse_rfc3339(pod->get_string({"metadata", "creationTimestamp"}));
  }
  return f;
}

HostPkgReconciler::Drive HostPkgReconciler::drive_node(Pass& p, const std::string& node_name,
                                                       std::stop_token stop) {
  if (waits_on_stage_pod(p, node_name)) return Drive::Waiting;
  kube::ObjectPtr cached = nodes_.get(node_name);
  if (cached == nullptr) return Drive::Done;  // the Node is gone; its record went with it
  core::Value node = *cached;
  const std::string& set_name = p.set.name;
  // A handful of transitions per pass; each write returns the new Node, so no waiting on the
  // cache between them.
  for (int round = 0; round < 12 && !stop.stop_requested(); ++round) {
    RecordRead rr = read_record(node, set_name);
    if (!rr.record || rr.record->state != NodeState::InProgress) return Drive::Done;
    NodeRecord rec = *rr.record;
    std::vector<kube::ObjectPtr> to_evict;
    const NodeStepFacts f = observe_step(p, node, rec, to_evict);
    const NodeStep step = decide_node_step(f);
    auto count_result = [&] {
      if (step.result.empty()) return;
      const std::string stage(stage_name(f.plan.steps.front().stage));
      metrics_.steps->with({set_name, stage, step.result}).inc();
      if (f.pod_created && f.now >= *f.pod_created)
        metrics_.stage_duration->with({set_name, stage})
            .observe(std::chrono::duration<double>(f.now - *f.pod_created).count());
    };
    switch (step.kind) {
      case NodeStep::Kind::Cordon: {
        core::Value patch;
        if (auto cp = kube::cordon_patch(node, kOwner)) {
          patch = std::move(*cp);
        } else {
          patch["spec"]["unschedulable"] = true;
          patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(node));
        }
        node = patch_node(node_name, patch, "cordon");
        continue;
      }
      case NodeStep::Kind::WaitProtected:
        if (step.report) {
          std::lock_guard lock(p.mu);
          ++p.protected_wait;
          p.node_messages.push_back(node_name + ": " + step.why);
        }
        return Drive::Waiting;
      case NodeStep::Kind::Drain: evict(p, node_name, to_evict); return Drive::Waiting;
      case NodeStep::Kind::Fail:
        if (!step.count_after_write) count_result();
        fail_node(p, node, rec, step.why);
        if (step.count_after_write) count_result();
        return Drive::Failed;
      case NodeStep::Kind::Finish: finish_node(p, node, std::move(rec)); return Drive::Done;
      case NodeStep::Kind::RememberBoot:
        rec.boot_id = step.boot_id;
        node = patch_node(node_name, record_patch(node, set_name, rec), "record");
        continue;
      case NodeStep::Kind::CreatePod:
        create_stage_pod(p, node_name, f.plan.steps.front(), f.pod_name);
        return Drive::Waiting;
      case NodeStep::Kind::Wait:
        if (step.validating) note_validating(p, node_name, rec.validation);
        return Drive::Waiting;
      case NodeStep::Kind::AskValidation:
        // Named in the record first: killed after this write, the next controller creates
        // the same request; killed before it, nothing was asked yet.
        rec.validation = step.validation;
        node = patch_node(node_name, record_patch(node, set_name, rec), "record");
        continue;
      case NodeStep::Kind::CreateValidation:
        create_validation_request(p, node_name, rec.validation);
        note_validating(p, node_name, rec.validation);
        return Drive::Waiting;
      case NodeStep::Kind::StepDone: break;
    }
    // StepDone.
    if (!step.interrupt.empty()) metrics_.interrupts->with({set_name, step.interrupt}).inc();
    count_result();
    record_step_done(rec, p.desired, f.plan.steps.front());
    if (step.reboot) rec.boot_id.clear();
    // The step was the node's last: its record and Done go in one write (the same Node patch
    // with the same resourceVersion precondition; killed before it, the next controller reads
    // the step's finished pod again and gets here again).
    NodePlan next = plan_node(p.desired, rec);
    if (next.blocked.empty() && next.steps.empty()) {
      if (!p.set.validation.required(rec.interrupted)) {
        finish_node(p, node, std::move(rec));
        return Drive::Done;
      }
      // Validation before the uncordon: asked in the step's write, named from the generation
      // read (as AskValidation names it), so a lost write is re-derived with the same name.
      rec.validation = validation_request_name(set_name, node_name, rec.generation);
    }
    node = patch_node(node_name, record_patch(node, set_name, rec), "record");
  }
  return Drive::Waiting;
}

// Drain by eviction; the API server enforces PodDisruptionBudgets.
void HostPkgReconciler::evict(Pass& p, const std::string& node_name,
                              const std::vector<kube::ObjectPtr>& pods) {
  for (const auto& pod : pods) {
    if (pod->get({"metadata", "deletionTimestamp"}) != nullptr) continue;
    try {
      metrics_.writes->with({"eviction"}).inc();
      client_.evict(kube::namespace_of(*pod), kube::name_of(*pod));
    } catch (const kube::ApiError& e) {
      if (e.is(kube::Reason::NotFound)) continue;
      if (!e.is(kube::Reason::EvictionBlocked) && !e.is(kube::Reason::TooManyRequests)) throw;
      // Name the budget that said no (the API's message does not).
      std::string pdb_name = "a PodDisruptionBudget";
      for (const auto& b : pdbs_.list()) {
        if (kube::namespace_of(*b) != kube::namespace_of(*pod)) continue;
        const core::Value* sel = b->get({"spec", "selector"});
        const core::Value* labels = pod->get({"metadata", "labels"});
        static const core::Value kNoLabels = core::Value::map();
        if (sel != nullptr && kube::selector_matches(*sel, labels ? *labels : kNoLabels)) {
          pdb_name = "PodDisruptionBudget " + kube::object_key(*b);
          break;
        }
      }
      std::lock_guard lock(p.mu);
      ++p.drain_blocked;
      p.node_messages.push_back(node_name + ": DrainBlocked: " + pdb_name + " forbids evicting " +
                                kube::object_key(*pod));
      record_event(*p.object, kube::EventType::Warning, "DrainBlocked",
                   node_name + ": " + pdb_name + " forbids evicting " + kube::object_key(*pod));
      break;
    }
  }
}

void HostPkgReconciler::create_stage_pod(Pass& p, const std::string& node_name,
                                         const PlannedStep& step, const std::string& pod_name) {
  StagePodOptions o{settings_.namespace_, settings_.runner_image, ""};
  if (step.stage == Stage::Config) {
    const Package* pkg = p.set.find(step.package);
    if (pkg != nullptr) {
      core::Value cm = config_map(p.set, *pkg, step.config_hash, settings_.namespace_);
      o.config_map = std::string(cm.get_string({"metadata", "name"}));
      // Named by content hash: one that exists has these files. Created by the first node
      // of the rollout; the others find it in the cache or among this pass's creates.
      const std::string key = kube::object_key(settings_.namespace_, o.config_map);
      std::lock_guard lock(written_mu_);
      if (config_maps_.get_compact(key) == nullptr &&
          std::find(created_config_maps_.begin(), created_config_maps_.end(), key) ==
              created_config_maps_.end()) {
        try {
          metrics_.writes->with({"configmap"}).inc();
          client_.create(kube::resources::config_maps(), cm, kFieldManager);
        } catch (const kube::ApiError& e) {
          if (!e.is(kube::Reason::AlreadyExists)) throw;
        }
        created_config_maps_.push_back(key);
      }
    }
  }
  try {
    metrics_.writes->with({"pod-create"}).inc();
    client_.create(kube::resources::pods(), stage_pod(p.set, node_name, step, o), kFieldManager);
  } catch (const kube::ApiError& e) {
    if (!e.is(kube::Reason::AlreadyExists)) throw;  // created before a restart
  }
  std::lock_guard lock(written_mu_);
  created_pods_.push_back(kube::object_key(settings_.namespace_, pod_name));
}

// The status counts the node Validating and names its request.
void HostPkgReconciler::note_validating(Pass& p, const std::string& node_name,
                                        const std::string& request) {
  std::lock_guard lock(p.mu);
  ++p.validating;
  p.node_messages.push_back(node_name + ": Validating: waiting for certify (ValidationRequest " +
                            request + ")");
}

// The node's validation by certify (spec.validation): one request for the node, owned by the
// set (deleted with it), labelled with the set and the node. Its name is in the record, so
// creating it again after a restart, or after someone deleted it, is the same request.
void HostPkgReconciler::create_validation_request(Pass& p, const std::string& node_name,
                                                  const std::string& name) {
  core::Value v;
  v["apiVersion"] = "gpufleet.io/v1alpha1";
  v["kind"] = "ValidationRequest";
  v["metadata"]["name"] = name;
  v["metadata"]["labels"][std::string(kSetLabel)] = label_safe(p.set.name);
  v["metadata"]["labels"][std::string(kValidationNodeLabel)] = label_safe(node_name);
  v["metadata"]["annotations"][std::string(kNodeAnnotation)] = node_name;
  core::Value owner;
  owner["apiVersion"] = std::string(p.object->get_string({"apiVersion"}));
  owner["kind"] = "HostPackageSet";
  owner["name"] = p.set.name;
  owner["uid"] = std::string(p.object->get_string({"metadata", "uid"}));
  v["metadata"]["ownerReferences"].push_back(std::move(owner));
  v["spec"]["nodeNames"].push_back(node_name);
  core::Value cats = core::Value::list();
  for (const auto& c : p.set.validation.categories) cats.push_back(c);
  v["spec"]["categories"] = std::move(cats);
  v["spec"]["requester"] = "hostpkg";
  v["spec"]["reason"] =
      ("HostPackageSet " + p.set.name + " rollout " + p.desired.target).substr(0, 256);
  v["spec"]["deadline"] = kube::format_rfc3339(clock_.now() + p.set.validation.deadline);
  try {
    metrics_.writes->with({"validationrequest"}).inc();
    client_.create(api::validation_requests(), v, kFieldManager);
  } catch (const kube::ApiError& e) {
    if (!e.is(kube::Reason::AlreadyExists)) throw;  // asked before a restart
  }
  log::info("hostpkg: validation asked",
            {{"set", p.set.name}, {"node", node_name}, {"request", name}});
  record_event(*p.object, kube::EventType::Normal, "NodeValidating",
               node_name + ": waiting for certify (ValidationRequest " + name + ")");
}

void HostPkgReconciler::fail_node(Pass& p, const core::Value& node, NodeRecord rec,
                                  const std::string& why) {
  rec.state = NodeState::Failed;
  rec.failure = why.substr(0, 1000);
  patch_node(std::string(kube::name_of(node)), record_patch(node, p.set.name, rec), "record");
  record_event(*p.object, kube::EventType::Warning, "NodeFailed",
               std::string(kube::name_of(node)) + ": " + rec.failure +
                   " (the node stays cordoned; fix it, then raise " +
                   std::string(kResetAnnotation) + " to retry)");
}

// The node's plan is empty: the record says Done and hostpkg's cordon share is released in
// one write, then the node's stage and verify pods of this set go in one collection delete.
void HostPkgReconciler::finish_node(Pass& p, const core::Value& node, NodeRecord rec) {
  const std::string& set_name = p.set.name;
  const std::string node_name(kube::name_of(node));
  mark_node_done(rec, p.desired);
  rec.started = 0;
  // The change's checks just ran: the next re-verification is an interval from now.
  if (p.set.reverify.enabled()) rec.verified = clock_.unix_seconds();
  core::Value base = kube::uncordon_patch(node, kOwner).value_or(core::Value::map());
  patch_node(node_name, record_patch(node, set_name, rec, std::move(base)), "done");
  // The node's stage pods have served their purpose: one DELETE of the collection (this set's
  // label, the node's name) instead of one per pod. Only when the cache still shows one, so a
  // restarted controller re-finishing a node sends nothing more.
  // Read in place: list() would rebuild every stage pod of every running node as a Value,
  // once per finished node (the top of a 5,000-node profile).
  bool any = false;
  stage_pods_.for_each_compact([&](const kube::CompactObject& sp) {
    if (any) return;
    kube::CompactView m = sp.root();
    any = m.get_string({"metadata", "labels", kSetLabel}) == set_name &&
          m.get_string({"metadata", "annotations", kNodeAnnotation}) == node_name &&
          !m.get({"metadata", "deletionTimestamp"});
  });
  if (any) {
    kube::ListOptions sel;
    sel.label_selector = std::string(kSetLabel) + "=" + set_name;
    sel.field_selector = "spec.nodeName=" + node_name;
    metrics_.writes->with({"pod-delete-collection"}).inc();
    client_.remove_collection(kube::resources::pods(), settings_.namespace_, sel);
  }
  log::info("hostpkg: node done", {{"set", set_name}, {"node", node_name}, {"batch", rec.batch}});
  record_event(*p.object, kube::EventType::Normal, "NodeDone",
               node_name + ": " + std::to_string(p.set.packages.size()) + " package(s) at target " +
                   p.desired.target);
}

}  // namespace gpufleet::hostpkg::detail
