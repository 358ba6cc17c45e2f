#include "hostpkg/controller/reconciler.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <charconv>
#include <thread>

#include "api/resources.h"
#include "controller/budget.h"
#include "controller/disruption_reservation.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "core/text.h"
#include "core/time.h"
#include "hostpkg/controller/node_condition.h"
#include "hostpkg/controller/policy_admission.h"
#include "hostpkg/controller/record_store.h"
#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/reverify.h"
#include "hostpkg/rollout.h"
#include "hostpkg/stage_plan.h"
#include "kube/api/conditions.h"
#include "kube/api/cordon.h"
#include "kube/api/disruption.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/selector.h"
#include "kube/errors.h"

namespace gpufleet::hostpkg {
namespace {

namespace log = core::log;
using Clock = std::chrono::system_clock;
using controller::Request;
using controller::Result;

using kube::incident_open;  // the one definition of "out": kube/api/disruption.h
using kube::kIncidentNodeLabel;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
}

bool is(const kube::ApiError& e, kube::Reason r) { return e.is(r); }

// Nodes in progress driven at once in a pass (reconcile_pass says why); the client's own
// rate limit (--kube-qps) still caps the writes.
constexpr std::size_t kDriveWorkers = 8;

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// resourceVersions are opaque, but etcd-backed ones are increasing integers: a cache entry at
// or past the version we wrote has seen our write.
bool seen(std::string_view cached, std::string_view written) {
  if (cached == written) return true;
  auto c = parse_int(cached), w = parse_int(written);
  return c && w && *c >= *w;
}

std::string join(const std::vector<std::string>& v, std::string_view sep, std::size_t max = 20) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) {
    if (i > 0) out += sep;
    out += v[i];
  }
  if (v.size() > max) out += std::string(sep) + "... (" + std::to_string(v.size()) + " in all)";
  return out;
}

// What one pass knows about one Node, read from the compact cache without building a Value.
struct NodeScan {
  std::string name;
  Labels labels;  // moved into the pass's NodeInput once read (see reconcile_pass)
  bool ready = false;
  bool unschedulable = false;
  std::vector<std::string> owners;  // gpufleet cordon owners
  std::string boot_id;
  std::string created;
  bool runtime_taint = false;
  std::map<std::string, std::string, std::less<>> records;  // set -> annotation text
  NodeDriftCondition drift_condition;                       // kDriftCondition as shown now
};

// The label keys a pass reads: only those are copied out of the cache (a simulated node has
// ~25 labels; copying them all for 5,000 nodes set the controller's peak memory). A selector
// evaluated over the kept labels gives the same answer, since every key it names is kept.
// Any new reader of node labels in a pass must add its keys here.
using LabelKeys = std::set<std::string, std::less<>>;

void add_keys(LabelKeys& keys, const LabelSelector& sel) {
  for (const auto& r : sel.requirements()) keys.insert(r.key);
}

NodeScan scan_node(const kube::CompactObject& o, const LabelKeys* keys) {
  NodeScan n;
  kube::CompactView root = o.root();
  n.name = std::string(o.name());
  n.created = std::string(root.get_string({"metadata", "creationTimestamp"}));
  if (auto labels = root.get({"metadata", "labels"}); labels && labels->is_map()) {
    labels->for_each_entry([&](std::string_view k, kube::CompactView v) {
      if (keys != nullptr && !keys->contains(k)) return;
      if (auto s = v.string()) n.labels.emplace(std::string(k), std::string(*s));
    });
  }
  if (auto ann = root.get({"metadata", "annotations"}); ann && ann->is_map()) {
    ann->for_each_entry([&](std::string_view k, kube::CompactView v) {
      auto s = v.string();
      if (!s) return;
      if (k == kube::kCordonOwnersAnnotation) {
        for (std::string_view part : core::split_trimmed(*s, ','))
          if (!part.empty()) n.owners.emplace_back(part);
      } else if (k.starts_with(kRecordPrefix)) {
        n.records.emplace(std::string(k.substr(kRecordPrefix.size())), std::string(*s));
      }
    });
  }
  if (auto u = root.get({"spec", "unschedulable"}))
    n.unschedulable = u->bool_value().value_or(false);
  if (auto taints = root.get({"spec", "taints"}); taints && taints->is_list()) {
    taints->for_each_element([&](kube::CompactView t) {
      if (t.get_string({"key"}) == kRuntimeRequiredTaint) n.runtime_taint = true;
    });
  }
  if (auto conds = root.get({"status", "conditions"}); conds && conds->is_list()) {
    conds->for_each_element([&](kube::CompactView c) {
      std::string_view type = c.get_string({"type"});
      if (type == "Ready") {
        n.ready = c.get_string({"status"}) == "True";
      } else if (type == kDriftCondition) {
        n.drift_condition = {true, std::string(c.get_string({"status"})),
                             std::string(c.get_string({"reason"})),
                             std::string(c.get_string({"message"})),
                             std::string(c.get_string({"lastTransitionTime"}))};
      }
    });
  }
  n.boot_id = std::string(root.get_string({"status", "nodeInfo", "bootID"}));
  return n;
}

bool owned(const NodeScan& n) {
  return std::find(n.owners.begin(), n.owners.end(), kOwner) != n.owners.end();
}

// The state of a record text without a full parse, for other sets' records (hot path).
bool text_in_state(std::string_view text, std::string_view state) {
  std::string needle = "\"state\":\"" + std::string(state) + "\"";
  return text.find(needle) != std::string_view::npos;
}

struct Metrics {
  core::metrics::Gauge* nodes = nullptr;
  core::metrics::Gauge* stopped = nullptr;
  core::metrics::Counter* steps = nullptr;
  core::metrics::Counter* interrupts = nullptr;
  core::metrics::Counter* writes = nullptr;
  core::metrics::Counter* verifications = nullptr;
  core::metrics::Counter* drift = nullptr;
};

Metrics register_metrics(core::metrics::Registry& r) {
  Metrics m;
  m.nodes = &r.gauge("gpufleet_hostpkg_nodes",
                     "Nodes selected by a HostPackageSet, by rollout state.", {"set", "state"});
  m.stopped = &r.gauge("gpufleet_hostpkg_rollout_stopped",
                       "1 while a compartment of the set's rollout is stopped (reset resumes it).",
                       {"set"});
  m.steps = &r.counter("gpufleet_hostpkg_stage_results_total",
                       "Stage pods finished, by stage and result.", {"set", "stage", "result"});
  m.interrupts = &r.counter("gpufleet_hostpkg_interrupts_total",
                            "Interrupts delivered (reboots verified by boot ID).", {"set", "kind"});
  m.writes = &r.counter("gpufleet_hostpkg_api_writes_total",
                        "Writes the hostpkg controller sent to the API server, by kind.", {"kind"});
  m.verifications =
      &r.counter("gpufleet_hostpkg_verifications_total",
                 "Node re-verifications finished (spec.reverify), by result.", {"set", "result"});
  m.drift = &r.counter("gpufleet_hostpkg_drift_detected_total",
                       "Failed re-verifications: a package's checks failed on a finished node.",
                       {"set", "package"});
  return m;
}

class HostPkgReconciler : public controller::Reconciler {
 public:
  HostPkgReconciler(controller::Manager& m, ControllerSettings settings)
      : client_(m.client()),
        settings_(std::move(settings)),
        sets_(m.cache(api::host_package_sets(), full_cache_options())),
        policies_(m.cache(api::deployment_policies(), full_cache_options())),
        nodes_(m.cache(kube::resources::nodes())),
        pods_(m.cache(kube::resources::pods(), pod_cache_options())),
        stage_pods_(m.cache(kube::resources::pods(), stage_pod_cache_options(settings_))),
        config_maps_(m.cache(kube::resources::config_maps(), stage_pod_cache_options(settings_))),
        pdbs_(m.cache(kube::resources::pod_disruption_budgets())),
        remediations_(m.cache(api::remediations())),
        budget_(m.client()),
        claims_(m.client(), {.namespace_ = m.options().lease_namespace}),
        events_(m.event_recorder("hostpkg")),
        status_(m.client(), api::host_package_sets(), "HostPackageSet", std::string(kFieldManager)),
        metrics_(register_metrics(*m.options().registry)) {
    pods_.add_index("node", [](const core::Value& p) {
      std::string_view n = kube::pod::node_name(p);
      return n.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::string(n)};
    });
  }

  // Sets and policies are few and read whole: kept as Values.
  static controller::CacheOptions full_cache_options() {
    controller::CacheOptions o;
    o.compact = false;
    return o;
  }
  static controller::CacheOptions pod_cache_options() {
    controller::CacheOptions o;
    // Drains and protected-pod waits read only who runs where, labels and owners.
    o.shape.prune = {"spec.containers",   "spec.initContainers",
                     "spec.volumes",      "spec.tolerations",
                     "spec.affinity",     "status.containerStatuses",
                     "status.conditions", "status.initContainerStatuses"};
    return o;
  }
  static controller::CacheOptions stage_pod_cache_options(const ControllerSettings& s) {
    controller::CacheOptions o;
    o.namespace_ = s.namespace_;
    o.label_selector = std::string(kSetLabel);
    return o;
  }

  controller::Cache& sets() { return sets_; }
  controller::Cache& nodes() { return nodes_; }

  Result reconcile(const Request& req, std::stop_token stop) override {
    written_.clear();
    created_pods_.clear();
    created_config_maps_.clear();
    // Only this pass's answers: kept across passes (cleared only by a re-plan) they piled up
    // for every node written until a batch ended within one pass (RSS rose ~1 MB / 2 min in
    // a 500-node batch at 5,000), and an older one could hide a later change (someone else's
    // cordon) from a re-plan.
    fresh_.clear();
    try {
      Result r = reconcile_pass(req, stop);
      wait_for_cache();
      return r;
    } catch (...) {
      wait_for_cache();
      throw;
    }
  }
  // A pass's node scan handed to its re-plan, brought up to date with the pass's own writes.
  struct Rescan {
    LabelKeys keys;
    std::vector<NodeScan> nodes;
  };
  // `replan`: when the last nodes in progress finished in this pass, plan again at once (once),
  // from `reuse` when given instead of a new scan of the cache.
  Result reconcile_pass(const Request& req, std::stop_token stop, bool replan = true,
                        Rescan* reuse = nullptr);

 private:
  struct Pass;
  enum class Drive { Waiting, Done, Failed };
  void finish_node(Pass& p, const core::Value& node, NodeRecord rec);
  Drive drive_node(Pass& p, const std::string& node_name, std::stop_token stop);
  void start_node(Pass& p, const NodeStart& s, std::string_view claimed_rv);
  // Claims the plan's starts on the cluster budget (one write); returns the node -> Node
  // resourceVersion claimed for those granted.
  std::unordered_map<std::string, std::string> claim_starts(
      Pass& p, const RolloutPlan& plan, const ClusterBudget& cluster,
      const std::unordered_set<std::string>& incidents);
  core::Value patch_node(const std::string& name, const core::Value& patch, const char* kind);
  void wait_for_cache();
  void fail_node(Pass& p, const core::Value& node, NodeRecord rec, const std::string& why);
  bool ensure_finalizer(const core::Value& set, bool present);
  void write_status(Pass& p, const RolloutPlan* plan, const std::string& phase,
                    const std::string& message);
  void taints(Pass& p);
  // Brings every node's HostPackageDrifted condition in line with the records on it (one
  // nodes/status patch per node whose condition changes; none otherwise).
  void sync_drift_conditions(const std::vector<NodeScan>& nodes);
  // Re-verification of finished nodes; returns when the next node is due (0: none).
  std::int64_t reverify(Pass& p);
  std::chrono::seconds reverify_interval(const HostPackageSet& set) const {
    if (settings_.reverify_interval.count() > 0 && set.reverify.enabled())
      return std::max(std::chrono::seconds(1), std::chrono::duration_cast<std::chrono::seconds>(
                                                   settings_.reverify_interval));
    return set.reverify.interval;
  }
  void record_event(const core::Value& set, kube::EventType type, std::string_view reason,
                    std::string_view note) {
    events_.record(set, type, reason, "Rollout", note);
  }

  // The DisruptionBudget object wins over the --set hostpkg.* settings; those stay the
  // default where there is no object (or it cannot be read).
  const ClusterBudget* cluster_budget(ClusterBudget& storage) {
    controller::BudgetReader::Snapshot b = budget_.get();
    if (!b.present) {
      if (!b.error.empty() && b.error != warned_invalid_) {
        warned_invalid_ = b.error;
        log::warn(
            "hostpkg: DisruptionBudget default cannot be read; using the --set hostpkg.* "
            "budget settings",
            {{"error", b.error}});
      }
      return settings_.has_cluster_budget ? &settings_.cluster : nullptr;
    }
    if (settings_.has_cluster_budget && !warned_both_) {
      warned_both_ = true;
      log::warn(
          "hostpkg: both DisruptionBudget default and --set hostpkg.max-unavailable/"
          "topology-key/max-unavailable-per-domain are set; the DisruptionBudget wins",
          {});
    }
    storage = cluster_budget_from(b.spec);
    return &storage;
  }

  kube::Client& client_;
  ControllerSettings settings_;
  controller::Cache& sets_;
  controller::Cache& policies_;
  controller::Cache& nodes_;
  controller::Cache& pods_;
  controller::Cache& stage_pods_;
  controller::Cache& config_maps_;  // ours (set label, our namespace): create only when absent
  controller::Cache& pdbs_;
  controller::Cache& remediations_;           // sentinel's open incidents count as out
  controller::BudgetReader budget_;           // the DisruptionBudget object, when there is one
  controller::DisruptionReservation claims_;  // the lock shared with sentinel and other replicas
  bool warned_both_ = false;                  // one worker: no lock needed
  std::string warned_invalid_;
  kube::EventRecorder& events_;
  controller::StatusWriter status_;
  Metrics metrics_;
  // written_, fresh_, created_*: the drive workers write at once. Also held across a config
  // map's look-up and create, so two nodes reaching the config stage together create it once.
  std::mutex written_mu_;
  std::vector<std::pair<std::string, std::string>> written_;     // this pass's Node writes
  std::vector<std::string> created_pods_, created_config_maps_;  // this pass's creates (keys)
  // The Nodes as this pass's writes left them (the API's answers), newest per node: the
  // re-plan after a batch plans from these instead of waiting for the watch to bring them.
  std::unordered_map<std::string, kube::CompactPtr> fresh_;
};

// Everything one reconcile of one set works from.
struct HostPkgReconciler::Pass {
  kube::ObjectPtr object;
  HostPackageSet set;
  DesiredState desired;
  bool deleting = false;
  std::vector<NodeScan> nodes;
  std::deque<NodeRecord> records;  // stable addresses for NodeInput::record
  std::vector<NodeInput> inputs;
  std::unordered_map<std::string, std::size_t> index;  // node -> inputs/nodes position
  // Written by the drive workers (see kDriveWorkers), so under `mu`.
  std::mutex mu;
  std::vector<std::string> node_messages;  // "node: why" for blocked / failed nodes
  std::int64_t drain_blocked = 0, protected_wait = 0;
  bool waiting = false;
  // Re-verification: drifted nodes ("node: package: message"), verify pods running.
  std::int64_t drifted = 0;
  std::vector<std::string> drift_messages;
  bool verifying = false;
};

core::Value HostPkgReconciler::patch_node(const std::string& name, const core::Value& patch,
                                          const char* kind) {
  metrics_.writes->with({kind}).inc();
  core::Value out = client_.patch(kube::resources::nodes(), "", name, kube::PatchType::Merge, patch,
                                  {}, kFieldManager);
  // As the cache holds it (no managedFields), compact: up to a batch of these live at once.
  if (core::Value* meta = out.find("metadata"); meta != nullptr && meta->is_map())
    meta->as_map().erase("managedFields");
  kube::CompactPtr compact = kube::CompactObject::encode(out);
  std::lock_guard lock(written_mu_);
  written_.emplace_back(name, std::string(kube::resource_version_of(out)));
  fresh_[name] = std::move(compact);
  return out;
}

// The next pass plans from the cache: it must have seen this pass's Node writes, or a node
// started here would look free there and a budget could be exceeded; and the stage pods and
// config maps it created, or it creates them again (AlreadyExists: a wasted write each, seen
// once nodes were driven at once and their creates all landed at the end of a pass). Watch
// latency is milliseconds; the wait is bounded.
void HostPkgReconciler::wait_for_cache() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto wait_until = [&](const auto& done) {
    while (std::chrono::steady_clock::now() < deadline && !done())
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  for (const auto& [name, rv] : written_) {
    wait_until([&] {
      kube::CompactPtr n = nodes_.get_compact(name);
      return n == nullptr || seen(n->resource_version(), rv);
    });
  }
  for (const auto& key : created_pods_)
    wait_until([&] { return stage_pods_.get_compact(key) != nullptr; });
  for (const auto& key : created_config_maps_)
    wait_until([&] { return config_maps_.get_compact(key) != nullptr; });
  written_.clear();
  created_pods_.clear();
  created_config_maps_.clear();
}

bool HostPkgReconciler::ensure_finalizer(const core::Value& set, bool present) {
  const core::Value* fins = set.get({"metadata", "finalizers"});
  core::Value list = core::Value::list();
  bool has = false;
  if (fins != nullptr && fins->is_list()) {
    for (const auto& f : fins->as_list()) {
      if (f.is_string() && f.as_string() == kFinalizer) {
        has = true;
        if (!present) continue;
      }
      list.push_back(f);
    }
  }
  if (has == present) return false;
  if (present) list.push_back(std::string(kFinalizer));
  core::Value patch;
  patch["metadata"]["finalizers"] = std::move(list);
  patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(set));
  metrics_.writes->with({"finalizer"}).inc();
  client_.patch(api::host_package_sets(), "", kube::name_of(set), kube::PatchType::Merge, patch, {},
                kFieldManager);
  return true;
}

void HostPkgReconciler::start_node(Pass& p, const NodeStart& s, std::string_view claimed_rv) {
  kube::ObjectPtr node = nodes_.get(s.node);
  if (node == nullptr) return;
  // The claim counts on this write carrying the version it was decided on (a Node that moved
  // in between would free the claim while the start went ahead): start on the next pass.
  if (!claimed_rv.empty() && kube::resource_version_of(*node) != claimed_rv) return;
  RecordRead rr = read_record(*node, p.set.name);
  NodeRecord rec = rr.record.value_or(NodeRecord{});
  rec.state = NodeState::InProgress;
  rec.rollout = s.rollout;
  rec.batch = s.batch;
  rec.epoch = s.epoch;
  rec.failure.clear();
  rec.started = unix_now();
  // Record and cordon share in one write: a node is never out without a record saying why.
  core::Value base = kube::cordon_patch(*node, kOwner).value_or(core::Value::map());
  patch_node(s.node, record_patch(*node, p.set.name, rec, std::move(base)), "start");
  log::info(
      "hostpkg: node started",
      {{"set", p.set.name}, {"node", s.node}, {"compartment", s.compartment}, {"batch", s.batch}});
}

std::unordered_map<std::string, std::string> HostPkgReconciler::claim_starts(
    Pass& p, const RolloutPlan& plan, const ClusterBudget& cluster,
    const std::unordered_set<std::string>& incidents) {
  const std::string& key = cluster.topology_key;
  std::vector<kube::CountedNode> counted;
  std::size_t total = 0;
  nodes_.for_each_compact([&](const kube::CompactObject& o) {
    ++total;
    kube::NodeOutFacts f = kube::node_out_facts(o, key, incidents.contains(std::string(o.name())));
    if (kube::is_out(f)) counted.push_back({std::move(f.name), std::move(f.domain)});
  });
  auto lookup = [&](std::string_view name) {
    kube::ClaimedNodeView v;
    kube::CompactPtr o = nodes_.get_compact(std::string(name));
    if (o == nullptr) return v;
    v.present = true;
    v.rv = std::string(o->resource_version());
    v.out = kube::is_out(kube::node_out_facts(*o, key, incidents.contains(std::string(name))));
    return v;
  };
  std::vector<kube::ClaimRequest> requests;
  for (const NodeStart& s : plan.start) {
    kube::CompactPtr o = nodes_.get_compact(s.node);
    if (o == nullptr) continue;
    requests.push_back({s.node,
                        key.empty()
                            ? std::string()
                            : std::string(o->root().get_string({"metadata", "labels", key})),
                        "HostPackageSet/" + p.set.name, std::string(o->resource_version())});
  }
  kube::ClaimLimits limits;
  limits.total = cluster.max_total.resolve(static_cast<std::int64_t>(total));
  if (!key.empty()) limits.domain = cluster.max_per_domain;
  controller::DisruptionReservation::Outcome out =
      claims_.reserve(requests, counted, limits, lookup);
  if (out.writes > 0) metrics_.writes->with({"claim"}).inc(out.writes);
  std::unordered_map<std::string, std::string> granted;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (out.granted[i]) {
      granted.emplace(requests[i].node, requests[i].rv);
    } else {
      log::info("hostpkg: node start waits for the disruption budget's claims",
                {{"set", p.set.name}, {"node", requests[i].node}, {"why", out.why[i]}});
    }
  }
  return granted;
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
  if (p.set.reverify.enabled()) rec.verified = unix_now();
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

HostPkgReconciler::Drive HostPkgReconciler::drive_node(Pass& p, const std::string& node_name,
                                                       std::stop_token stop) {
  // A pod the drain must evict: not finished, not a DaemonSet's or mirror pod, not ours.
  auto evictable = [&](const core::Value& pod) {
    if (kube::pod::terminal(pod) || kube::pod::owned_by_daemon_set(pod) || kube::pod::mirror(pod))
      return false;
    return !(kube::namespace_of(pod) == settings_.namespace_ &&
             !kube::label_of(pod, kSetLabel).empty());  // our own stage pods
  };
  // Most nodes in progress wait on a running stage pod. Tell that from the pass's scan and the
  // compact pod, without rebuilding the Node (and the pod) as Values: at 5,000 nodes with 500
  // in progress that rebuild was most of a pass. Anything else takes the full path below.
  if (auto it = p.index.find(node_name); it != p.index.end() && !p.set.has_protected_pods) {
    const NodeRecord* rec = p.inputs[it->second].record;
    if (rec != nullptr && rec->state == NodeState::InProgress &&
        p.nodes[it->second].unschedulable) {
      NodePlan plan = plan_node(p.desired, *rec);
      const bool reboot = !plan.steps.empty() && plan.steps.front().stage == Stage::Interrupt &&
                          plan.steps.front().interrupt.kind == InterruptKind::Reboot;
      if (plan.blocked.empty() && !plan.steps.empty() && !reboot) {
        const PlannedStep& step = plan.steps.front();
        kube::CompactPtr pod = stage_pods_.get_compact(
            kube::object_key(settings_.namespace_, stage_pod_name(p.set.name, node_name, step)));
        if (pod != nullptr) {
          std::string_view phase = pod->root().get_string({"status", "phase"});
          auto created =
              kube::parse_rfc3339(pod->root().get_string({"metadata", "creationTimestamp"}));
          bool overdue =
              created && Clock::now() > *created + step.timeout + std::chrono::minutes(3);
          bool drained = true;
          for (const auto& other : pods_.by_index("node", node_name))
            drained = drained && !evictable(*other);
          if (phase != "Succeeded" && phase != "Failed" && !overdue && drained)
            return Drive::Waiting;
        }
      }
    }
  }
  kube::ObjectPtr cached = nodes_.get(node_name);
  if (cached == nullptr) return Drive::Done;  // the Node is gone; its record went with it
  core::Value node = *cached;
  const std::string& set_name = p.set.name;
  // A finished step that was the node's last: its record and Done go in one write (the same
  // Node patch with the same resourceVersion precondition; killed before it, the next
  // controller reads the step's finished pod again and gets here again).
  auto last_step = [&](NodeRecord& rec) {
    NodePlan next = plan_node(p.desired, rec);
    if (!next.blocked.empty() || !next.steps.empty()) return false;
    finish_node(p, node, std::move(rec));
    return true;
  };
  // A handful of transitions per pass; each write returns the new Node, so no waiting on the
  // cache between them.
  for (int round = 0; round < 12 && !stop.stop_requested(); ++round) {
    RecordRead rr = read_record(node, set_name);
    if (!rr.record || rr.record->state != NodeState::InProgress) return Drive::Done;
    NodeRecord rec = *rr.record;

    // 1. Cordon (re-cordon if a person uncordoned it between our steps).
    kube::CordonState cs = kube::cordon_state(node);
    if (!cs.unschedulable) {
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

    // 2. Protected pods: wait for them to finish; past the deadline, say which.
    std::vector<kube::ObjectPtr> on_node = pods_.by_index("node", node_name);
    if (p.set.has_protected_pods) {
      std::vector<std::string> running;
      for (const auto& pod : on_node) {
        if (kube::pod::terminal(*pod)) continue;
        Labels labels;
        if (const core::Value* l = pod->get({"metadata", "labels"}); l && l->is_map()) {
          for (const auto& [k, v] : l->as_map())
            if (v.is_string()) labels.emplace(k, v.as_string());
        }
        if (p.set.protected_pods.matches(labels)) running.push_back(kube::object_key(*pod));
      }
      if (!running.empty()) {
        std::int64_t waited = rec.started > 0 ? unix_now() - rec.started : 0;
        if (waited >= p.set.protected_pod_wait.count()) {
          std::lock_guard lock(p.mu);
          ++p.protected_wait;
          p.node_messages.push_back(node_name + ": ProtectedPods: still running after " +
                                    std::to_string(waited) + "s: " + join(running, ", ", 5));
        }
        return Drive::Waiting;
      }
    }

    // 3. Drain by eviction; the API server enforces PodDisruptionBudgets.
    std::vector<kube::ObjectPtr> to_evict;
    for (const auto& pod : on_node) {
      if (evictable(*pod)) to_evict.push_back(pod);
    }
    if (!to_evict.empty()) {
      for (const auto& pod : to_evict) {
        if (pod->get({"metadata", "deletionTimestamp"}) != nullptr) continue;
        try {
          metrics_.writes->with({"eviction"}).inc();
          client_.evict(kube::namespace_of(*pod), kube::name_of(*pod));
        } catch (const kube::ApiError& e) {
          if (is(e, kube::Reason::NotFound)) continue;
          if (!is(e, kube::Reason::EvictionBlocked) && !is(e, kube::Reason::TooManyRequests)) throw;
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
          p.node_messages.push_back(node_name + ": DrainBlocked: " + pdb_name +
                                    " forbids evicting " + kube::object_key(*pod));
          record_event(*p.object, kube::EventType::Warning, "DrainBlocked",
                       node_name + ": " + pdb_name + " forbids evicting " + kube::object_key(*pod));
          break;
        }
      }
      return Drive::Waiting;
    }

    // 4. The next step of the node's plan.
    NodePlan plan = plan_node(p.desired, rec);
    if (!plan.blocked.empty()) {
      fail_node(p, node, rec, "blocked: " + join(plan.blocked, "; "));
      return Drive::Failed;
    }
    if (plan.steps.empty()) {
      finish_node(p, node, std::move(rec));
      return Drive::Done;
    }
    const PlannedStep& step = plan.steps.front();
    const std::string stage(stage_name(step.stage));
    const bool reboot =
        step.stage == Stage::Interrupt && step.interrupt.kind == InterruptKind::Reboot;
    const std::string boot(node.get_string({"status", "nodeInfo", "bootID"}));
    if (reboot) {
      if (rec.boot_id.empty()) {
        // Remember the boot before asking for the reboot: after a restart, a changed boot ID
        // is the proof it happened, and the reboot is never asked for twice.
        rec.boot_id = boot.empty() ? "unknown" : boot;
        node = patch_node(node_name, record_patch(node, set_name, rec), "record");
        continue;
      }
      if (boot != rec.boot_id && !boot.empty() && kube::node::ready(node)) {
        record_step_done(rec, p.desired, step);
        rec.boot_id.clear();
        metrics_.interrupts->with({set_name, "reboot"}).inc();
        metrics_.steps->with({set_name, stage, "succeeded"}).inc();
        if (last_step(rec)) return Drive::Done;
        node = patch_node(node_name, record_patch(node, set_name, rec), "record");
        continue;
      }
    }
    const std::string pod_name = stage_pod_name(set_name, node_name, step);
    kube::ObjectPtr pod = stage_pods_.get(kube::object_key(settings_.namespace_, pod_name));
    if (pod == nullptr) {
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
              if (!is(e, kube::Reason::AlreadyExists)) throw;
            }
            created_config_maps_.push_back(key);
          }
        }
      }
      try {
        metrics_.writes->with({"pod-create"}).inc();
        client_.create(kube::resources::pods(), stage_pod(p.set, node_name, step, o),
                       kFieldManager);
      } catch (const kube::ApiError& e) {
        if (!is(e, kube::Reason::AlreadyExists)) throw;  // created before a restart
      }
      std::lock_guard lock(written_mu_);
      created_pods_.push_back(kube::object_key(settings_.namespace_, pod_name));
      return Drive::Waiting;
    }
    std::optional<StageOutcome> out = stage_outcome(*pod);
    auto created = kube::parse_rfc3339(pod->get_string({"metadata", "creationTimestamp"}));
    bool overdue = created && Clock::now() > *created + step.timeout + std::chrono::minutes(3);
    if (reboot) {
      // The runner asks for the reboot and the pod dies with the node: only the boot ID says
      // whether it happened. A step the runner itself reported failed is a failure.
      bool runner_failed = out && !out->ok && out->status != "pod-failed";
      if (runner_failed || overdue) {
        fail_node(p, node, rec,
                  "interrupt/reboot: " + (runner_failed ? out->message
                                                        : std::string("boot ID still ") + boot +
                                                              " after the interrupt timeout"));
        metrics_.steps->with({set_name, stage, "failed"}).inc();
        return Drive::Failed;
      }
      return Drive::Waiting;
    }
    if (!out) {
      if (overdue) {
        fail_node(p, node, rec,
                  step.package + "/" + stage + ": stage pod " + pod_name +
                      " did not finish within its timeout");
        return Drive::Failed;
      }
      return Drive::Waiting;
    }
    metrics_.steps->with({set_name, stage, out->status}).inc();
    if (!out->ok) {
      fail_node(p, node, rec,
                (step.package.empty() ? std::string("interrupt") : step.package) + "/" + stage +
                    ": " + out->status + ": " + out->message);
      return Drive::Failed;
    }
    if (step.stage == Stage::Interrupt) {
      metrics_.interrupts->with({set_name, std::string(interrupt_name(step.interrupt.kind))}).inc();
    }
    record_step_done(rec, p.desired, step);
    if (last_step(rec)) return Drive::Done;
    node = patch_node(node_name, record_patch(node, set_name, rec), "record");
  }
  return Drive::Waiting;
}

std::int64_t HostPkgReconciler::reverify(Pass& p) {
  const std::string& set_name = p.set.name;
  const bool enabled = p.set.reverify.enabled() && !p.deleting;
  const std::chrono::seconds interval = reverify_interval(p.set);
  const std::int64_t now = unix_now();
  std::int64_t next_due = 0;

  // The verify pods this set has now; the ones no current round expects are cleaned up below.
  // Picked out in place: only verify pods are rebuilt as Values, not every stage pod per pass.
  std::unordered_map<std::string, kube::ObjectPtr> pods;
  std::vector<std::string> verify_keys;
  stage_pods_.for_each_compact([&](const kube::CompactObject& sp) {
    kube::CompactView m = sp.root();
    if (m.get_string({"metadata", "labels", kSetLabel}) == set_name &&
        m.get_string({"metadata", "labels", kStageLabel}) == kVerifyStage)
      verify_keys.push_back(kube::object_key(sp.namespace_(), sp.name()));
  });
  for (const std::string& key : verify_keys) {
    if (kube::ObjectPtr sp = stage_pods_.get(key))
      pods.emplace(std::string(kube::name_of(*sp)), std::move(sp));
  }
  std::int64_t in_flight = 0;
  for (const auto& [_, pod] : pods) {
    if (!stage_outcome(*pod)) ++in_flight;
  }
  std::unordered_set<std::string> expected;
  auto remove_pod = [&](const std::string& name) {
    try {
      metrics_.writes->with({"pod-delete"}).inc();
      client_.remove(kube::resources::pods(), settings_.namespace_, name);
    } catch (const kube::ApiError& e) {
      if (!is(e, kube::Reason::NotFound)) throw;
    }
  };

  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeScan& n = p.nodes[i];
    const NodeRecord* seen_rec = p.inputs[i].record;
    if (seen_rec == nullptr || !p.set.node_selector.matches(p.inputs[i].facts.labels) || !enabled)
      continue;
    if (seen_rec->drift) {
      ++p.drifted;
      if (p.drift_messages.size() < kMaxNamedNodes)
        p.drift_messages.push_back(n.name + ": " + seen_rec->drift->package + ": " +
                                   seen_rec->drift->message);
    }
    if (!reverify_eligible(*seen_rec, p.desired)) continue;
    if (!pods.empty()) {
      // This round's pods are wanted even while the node is not due (yet, or any more after a
      // clock step): deleting one now would run its check a second time later.
      for (const Package& pkg : p.set.packages)
        expected.insert(
            verify_pod_name(set_name, n.name, verify_key(pkg, p.desired, seen_rec->verified)));
    }
    const bool reapply = p.set.reverify.on_drift == DriftAction::Reapply && seen_rec->drift &&
                         p.set.find(seen_rec->drift->package) != nullptr;
    std::int64_t due = reverify_due(*seen_rec, set_name, n.name, interval);
    if (!reapply && due > now) {
      next_due = next_due == 0 ? due : std::min(next_due, due);
      continue;
    }
    if (!n.ready && !reapply) continue;  // looked at again when it is Ready (a Node event)

    kube::ObjectPtr cached = nodes_.get(n.name);
    if (cached == nullptr) continue;
    RecordRead rr = read_record(*cached, set_name);
    if (!rr.record || !reverify_eligible(*rr.record, p.desired)) continue;
    NodeRecord rec = *rr.record;
    try {
      // onDrift: Reapply for a node drifted before the policy said so: straight to the rollout.
      if (reapply_drifted(rec, p.set)) {
        patch_node(n.name, record_patch(*cached, set_name, rec), "record");
        continue;
      }
      // One package at a time, in the set's order; the first failure decides.
      VerifyOutcome outcome;
      bool finished = true;
      std::vector<std::string> round_pods;
      for (const Package& pkg : p.set.packages) {
        std::string key = verify_key(pkg, p.desired, rec.verified);
        std::string name = verify_pod_name(set_name, n.name, key);
        expected.insert(name);
        round_pods.push_back(name);
        auto it = pods.find(name);
        if (it == pods.end()) {
          finished = false;
          if (in_flight >= settings_.reverify_max_in_flight) break;  // spread: next pass
          StagePodOptions o{settings_.namespace_, settings_.runner_image, ""};
          try {
            metrics_.writes->with({"pod-create"}).inc();
            client_.create(kube::resources::pods(),
                           verify_pod(p.set, p.desired, n.name, pkg, rec.verified, o),
                           kFieldManager);
          } catch (const kube::ApiError& e) {
            if (!is(e, kube::Reason::AlreadyExists)) throw;  // created before a restart
          }
          ++in_flight;
          break;
        }
        std::optional<StageOutcome> out = stage_outcome(*it->second);
        if (!out) {
          auto created =
              kube::parse_rfc3339(it->second->get_string({"metadata", "creationTimestamp"}));
          std::chrono::seconds limit{0};
          for (Stage st : verify_stages(pkg)) limit = std::max(limit, pkg.timeout(st));
          if (created && Clock::now() > *created + limit + std::chrono::minutes(3)) {
            outcome = {false, pkg.name,
                       "verify pod " + name + " did not finish within its timeout"};
            break;
          }
          finished = false;
          break;
        }
        if (!out->ok) {
          outcome = {false, pkg.name, out->status + ": " + out->message};
          break;
        }
      }
      if (!finished) {
        p.verifying = true;
        continue;
      }
      const bool was_drifted = rec.drift.has_value();
      record_verification(rec, now, outcome, p.set.reverify.on_drift);
      patch_node(n.name, record_patch(*cached, set_name, rec), "record");
      metrics_.verifications->with({set_name, outcome.ok ? "passed" : "drifted"}).inc();
      if (!outcome.ok) {
        metrics_.drift->with({set_name, outcome.package}).inc();
        record_event(*p.object, kube::EventType::Warning, "NodeDrifted",
                     n.name + ": " + outcome.package + ": " + outcome.message +
                         (p.set.reverify.on_drift == DriftAction::Reapply
                              ? " (re-applying it through the rollout)"
                              : " (onDrift: Report)"));
        if (!was_drifted) {
          ++p.drifted;
          if (p.drift_messages.size() < kMaxNamedNodes)
            p.drift_messages.push_back(n.name + ": " + outcome.package + ": " + outcome.message);
        }
        log::warn("hostpkg: node drifted",
                  {{"set", set_name}, {"node", n.name}, {"package", outcome.package}});
      } else if (was_drifted) {
        --p.drifted;
        std::erase_if(p.drift_messages,
                      [&](const std::string& m) { return m.starts_with(n.name + ": "); });
        record_event(*p.object, kube::EventType::Normal, "NodeVerified",
                     n.name + ": every package passed its checks again; no longer drifted");
      }
      // The round is recorded: its pods have served (a later pass cleans up any left over).
      for (const std::string& name : round_pods) {
        if (pods.contains(name)) remove_pod(name);
        expected.erase(name);
        pods.erase(name);
      }
      std::int64_t next = reverify_due(rec, set_name, n.name, interval);
      next_due = next_due == 0 ? next : std::min(next_due, next);
    } catch (const kube::ApiError& e) {
      if (!is(e, kube::Reason::Conflict)) throw;
      p.verifying = true;  // the Node changed under us: re-read it next pass
    }
  }
  // Verify pods of rounds already recorded, of nodes that left or started a change, of a
  // set that no longer re-verifies: adopted above when still wanted, removed here otherwise.
  for (const auto& [name, pod] : pods) {
    if (!expected.contains(name)) remove_pod(name);
  }
  return next_due;
}

void HostPkgReconciler::taints(Pass& p) {
  if (!p.set.runtime_required || p.deleting) return;
  // Other runtime-required sets: the taint goes only when all of them are done on the node.
  struct Other {
    HostPackageSet set;
    std::string target;
  };
  std::vector<Other> others;
  for (const auto& o : sets_.list()) {
    if (kube::name_of(*o) == p.set.name) continue;
    try {
      HostPackageSet s = parse_host_package_set(*o);
      if (!s.runtime_required || s.disable) continue;
      std::string target = digest(s).target;
      others.push_back({std::move(s), std::move(target)});
    } catch (const std::exception&) {
      // An invalid set reports itself; it holds no node back.
    }
  }
  auto created = kube::parse_rfc3339(p.object->get_string({"metadata", "creationTimestamp"}));
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeScan& n = p.nodes[i];
    const Labels& labels = p.inputs[i].facts.labels;  // moved there by the pass
    if (!p.set.node_selector.matches(labels)) continue;
    auto rit = n.records.find(p.set.name);
    bool done_here = rit != n.records.end() && text_in_state(rit->second, "Done") &&
                     rit->second.find(p.desired.target) != std::string::npos;
    if (n.runtime_taint && done_here) {
      bool all_done = true;
      for (const Other& o : others) {
        if (!o.set.node_selector.matches(labels)) continue;
        auto it = n.records.find(o.set.name);
        all_done = all_done && it != n.records.end() && text_in_state(it->second, "Done") &&
                   it->second.find(o.target) != std::string::npos;
      }
      if (!all_done) continue;
      kube::ObjectPtr node = nodes_.get(n.name);
      if (node == nullptr) continue;
      core::Value kept = core::Value::list();
      if (const core::Value* t = node->get({"spec", "taints"}); t && t->is_list()) {
        for (const auto& taint : t->as_list())
          if (taint.get_string({"key"}) != kRuntimeRequiredTaint) kept.push_back(taint);
      }
      core::Value patch;
      patch["spec"]["taints"] = std::move(kept);
      patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(*node));
      patch_node(n.name, patch, "taint");
      record_event(*p.object, kube::EventType::Normal, "RuntimeReady",
                   n.name + ": every runtime-required set is done; taint " +
                       std::string(kRuntimeRequiredTaint) + " removed");
    } else if (p.set.auto_taint_new_nodes && !n.runtime_taint && rit == n.records.end() &&
               created) {
      // A node that joined after the set and has never been touched by it.
      auto joined = kube::parse_rfc3339(n.created);
      if (!joined || *joined <= *created) continue;
      kube::ObjectPtr node = nodes_.get(n.name);
      if (node == nullptr) continue;
      core::Value taints = core::Value::list();
      if (const core::Value* t = node->get({"spec", "taints"}); t && t->is_list()) taints = *t;
      core::Value taint;
      taint["key"] = std::string(kRuntimeRequiredTaint);
      taint["effect"] = "NoSchedule";
      taints.push_back(std::move(taint));
      core::Value patch;
      patch["spec"]["taints"] = std::move(taints);
      patch["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(*node));
      patch_node(n.name, patch, "taint");
    }
  }
}

void HostPkgReconciler::sync_drift_conditions(const std::vector<NodeScan>& nodes) {
  // Drift counts while its set exists, is not being deleted and re-verifies (the set's own
  // Drifted condition follows the same rule), so every set's pass computes the same condition.
  std::unordered_set<std::string> reporting;
  for (const auto& o : sets_.list()) {
    if (o->get({"metadata", "deletionTimestamp"}) != nullptr) continue;
    const core::Value* rv = o->get({"spec", "reverify"});
    if (rv == nullptr || !rv->is_map()) continue;  // off: skip the parse
    try {
      if (parse_host_package_set(*o).reverify.enabled()) reporting.emplace(kube::name_of(*o));
    } catch (const std::exception&) {
      // An invalid set reports itself; its drift shows once it is valid again.
    }
  }
  const auto now = Clock::now();
  for (const NodeScan& n : nodes) {
    std::optional<core::Value> patch =
        drift_condition_patch(n.records, reporting, n.drift_condition, now);
    if (!patch) continue;
    metrics_.writes->with({"node-condition"}).inc();
    try {
      core::Value out =
          client_.patch(kube::resources::nodes(), "", n.name, kube::PatchType::StrategicMerge,
                        *patch, "status", kFieldManager);
      written_.emplace_back(n.name, std::string(kube::resource_version_of(out)));
    } catch (const kube::ApiError& e) {
      if (!is(e, kube::Reason::NotFound)) throw;
    }
  }
}

void HostPkgReconciler::write_status(Pass& p, const RolloutPlan* plan, const std::string& phase,
                                     const std::string& message) {
  const core::Value& obj = *p.object;
  core::Value st = core::Value::map();
  std::int64_t generation = 0;
  if (const core::Value* g = obj.get({"metadata", "generation"}); g && g->is_int())
    generation = g->as_int();
  st["observedGeneration"] = generation;
  st["phase"] = phase;
  st["message"] = message.substr(0, 1000);
  std::int64_t nodes = 0, done = 0, active = 0, failed = 0, pending = 0, blocked = 0;
  bool stopped = false;
  std::vector<std::string> failing;
  std::string stop_reason;
  if (plan != nullptr) {
    st["target"] = plan->target;
    core::Value comps = core::Value::list();
    for (const CompartmentStatus& c : plan->compartments) {
      nodes += c.nodes;
      done += c.done;
      active += c.in_progress;
      failed += c.failed;
      pending += c.pending;
      blocked += c.blocked;
      core::Value cv;
      cv["name"] = c.name;
      cv["nodes"] = c.nodes;
      cv["done"] = c.done;
      cv["inProgress"] = c.in_progress;
      cv["failed"] = c.failed;
      cv["pending"] = c.pending;
      cv["blocked"] = c.blocked;
      cv["budget"] = c.budget;
      cv["batch"] = c.batch;
      cv["batchSize"] = c.batch_size;
      cv["stopped"] = c.stopped;
      if (c.stopped) {
        stopped = true;
        stop_reason = c.name + ": " + c.stop_reason;
        cv["stopReason"] = c.stop_reason.substr(0, 1000);
        core::Value fl = core::Value::list();
        for (const auto& f : c.failing_nodes) {
          fl.push_back(f);
          failing.push_back(f);
        }
        cv["failingNodes"] = std::move(fl);
      }
      comps.push_back(std::move(cv));
    }
    st["compartments"] = std::move(comps);
    blocked += plan->malformed_count + p.drain_blocked + p.protected_wait;
  }
  st["nodes"] = nodes;
  st["done"] = done;
  st["inProgress"] = active;
  st["failed"] = failed;
  st["pending"] = pending;
  st["blocked"] = blocked;
  st["malformed"] = plan != nullptr ? plan->malformed_count : 0;
  st["drifted"] = p.drifted;
  st["progress"] = std::to_string(done) + "/" + std::to_string(nodes);
  std::int64_t epoch = 0;
  if (auto e = parse_int(kube::annotation_of(obj, kResetAnnotation))) epoch = *e;
  st["resetEpoch"] = epoch;
  std::vector<std::string> msgs = p.node_messages;
  for (const auto& m : p.drift_messages)
    msgs.push_back(m.substr(0, m.find(": ")) + ": Drifted: " + m.substr(m.find(": ") + 2));
  if (plan != nullptr) {
    for (const auto& m : plan->malformed) msgs.push_back(m);
    for (const auto& m : plan->blocked) msgs.push_back(m);
  }
  if (msgs.size() > 20) msgs.resize(20);
  core::Value nm = core::Value::list();
  for (auto& m : msgs) nm.push_back(m.substr(0, 1000));
  st["nodeMessages"] = std::move(nm);

  // Conditions, with Kubernetes semantics (transition time moves only on a status change).
  core::Value conds = core::Value::list();
  if (const core::Value* c = obj.get({"status", "conditions"}); c && c->is_list()) conds = *c;
  auto set_cond = [&](std::string type, bool status, std::string reason, std::string msg) {
    kube::Condition c{std::move(type),   status ? "True" : "False",
                      std::move(reason), msg.substr(0, 4000),
                      generation,        Clock::now()};
    kube::set_condition(conds, c);
  };
  bool complete = plan != nullptr && plan->complete && active == 0;
  bool is_blocked = blocked > 0 || phase == "Blocked" || phase == "Invalid";
  set_cond("Ready", complete && phase != "Invalid",
           complete ? "RolloutComplete" : (phase == "Invalid" ? "InvalidSpec" : phase),
           complete ? "every selected node is at target " + (plan ? plan->target : "") : message);
  bool progressing = plan != nullptr && !stopped && !complete && phase != "Paused" &&
                     phase != "Disabled" && phase != "Invalid";
  set_cond("Progressing", progressing,
           progressing ? "NodesUpdating" : (complete ? "Complete" : phase),
           std::to_string(done) + "/" + std::to_string(nodes) + " nodes done, " +
               std::to_string(active) + " in progress");
  set_cond("Paused", p.set.pause, p.set.pause ? "SpecPause" : "NotPaused",
           p.set.pause ? "spec.pause is true: started nodes finish, no new node starts"
                       : "spec.pause is false");
  set_cond("Stopped", stopped, stopped ? "FailureThreshold" : "NotStopped",
           stopped ? stop_reason + "; failing nodes: " + join(failing, ", ") + "; raise " +
                         std::string(kResetAnnotation) + " to resume"
                   : "no compartment is stopped");
  set_cond("Blocked", is_blocked,
           is_blocked ? (p.drain_blocked > 0    ? "DrainBlocked"
                         : p.protected_wait > 0 ? "ProtectedPods"
                         : phase == "Invalid"   ? "InvalidSpec"
                                                : "NodesBlocked")
                      : "NotBlocked",
           is_blocked ? (msgs.empty() ? message : join(msgs, "; ", 5)) : "nothing is blocked");
  std::vector<std::string> drift_msgs = p.drift_messages;
  set_cond("Drifted", p.drifted > 0,
           p.drifted > 0              ? "ChecksFailed"
           : p.set.reverify.enabled() ? "NoDrift"
                                      : "ReverifyDisabled",
           p.drifted > 0 ? std::to_string(p.drifted) + " node(s) failed re-verification (" +
                               (p.set.reverify.on_drift == DriftAction::Reapply
                                    ? "onDrift: Reapply, re-applying"
                                    : "onDrift: Report") +
                               "): " + join(drift_msgs, "; ", 5)
           : p.set.reverify.enabled() ? "every verified node passed its checks"
                                      : "spec.reverify is off");
  st["conditions"] = std::move(conds);

  // Events on transitions the status shows for the first time.
  const core::Value* old = obj.get({"status", "phase"});
  std::string old_phase = old != nullptr && old->is_string() ? old->as_string() : "";
  if (old_phase != phase) {
    record_event(obj,
                 phase == "Stopped" || phase == "Invalid" || phase == "Blocked"
                     ? kube::EventType::Warning
                     : kube::EventType::Normal,
                 "Rollout" + phase, message.empty() ? "phase " + phase : message);
  }
  // Metrics: bounded by sets x 5 states.
  const std::string& sn = p.set.name.empty() ? std::string(kube::name_of(obj)) : p.set.name;
  metrics_.nodes->with({sn, "done"}).set(static_cast<double>(done));
  metrics_.nodes->with({sn, "in_progress"}).set(static_cast<double>(active));
  metrics_.nodes->with({sn, "failed"}).set(static_cast<double>(failed));
  metrics_.nodes->with({sn, "pending"}).set(static_cast<double>(pending));
  metrics_.nodes->with({sn, "blocked"}).set(static_cast<double>(blocked));
  metrics_.nodes->with({sn, "drifted"}).set(static_cast<double>(p.drifted));
  metrics_.stopped->with({sn}).set(stopped ? 1 : 0);

  const core::Value* cur = obj.find("status");
  core::Value compare = st;
  if (cur != nullptr && *cur == compare) return;
  metrics_.writes->with({"status"}).inc();
  status_.apply("", kube::name_of(obj), st);
}

Result HostPkgReconciler::reconcile_pass(const Request& req, std::stop_token stop, bool replan,
                                         Rescan* reuse) {
  Pass p;
  p.object = sets_.get(req.key());
  if (p.object == nullptr) {
    // The set is gone (its finalizer let it go, or it was forced): its drift no longer shows.
    std::vector<NodeScan> scans;
    const LabelKeys none;  // the drift conditions read no labels
    nodes_.for_each_compact(
        [&](const kube::CompactObject& o) { scans.push_back(scan_node(o, &none)); });
    sync_drift_conditions(scans);
    return {};
  }
  const core::Value& obj = *p.object;
  p.deleting = obj.get({"metadata", "deletionTimestamp"}) != nullptr;
  try {
    p.set = parse_host_package_set(obj);
  } catch (const core::InvalidInput& e) {
    p.set.name = req.name;
    if (p.deleting) {
      ensure_finalizer(obj, false);  // nothing we can plan from: keep the records, let it go
      return {};
    }
    write_status(p, nullptr, "Invalid", e.what());
    return {};
  }
  if (!p.deleting && ensure_finalizer(obj, true)) return {};  // back through the watch
  if (p.deleting) {
    // Deletion: the same rollout with no packages, which plans the uninstall of whatever
    // supports it and keeps the records of what does not.
    p.set.packages.clear();
    p.set.pause = false;
    p.set.disable = false;
  }
  if (p.set.disable) {
    write_status(p, nullptr, "Disabled", "spec.disable is true: the set is ignored");
    return {};
  }
  DeploymentPolicy policy;
  const DeploymentPolicy* policy_ptr = nullptr;
  if (!p.set.deployment_policy.empty()) {
    kube::ObjectPtr pol = policies_.get(p.set.deployment_policy);
    if (pol == nullptr) {
      write_status(p, nullptr, "Blocked",
                   "DeploymentPolicy " + p.set.deployment_policy +
                       " not found; create it or clear spec.deploymentPolicy");
      return {};
    }
    try {
      policy = parse_deployment_policy(*pol);
      policy_ptr = &policy;
    } catch (const core::InvalidInput& e) {
      write_status(p, nullptr, "Blocked",
                   "DeploymentPolicy " + p.set.deployment_policy + ": " + e.what());
      return {};
    }
  }
  p.desired = digest(p.set);

  // Earlier sets (lower priority numbers) gate this one, per node or for all nodes.
  struct Earlier {
    HostPackageSet set;
    std::string target;
  };
  std::vector<Earlier> earlier;
  if (!p.deleting) {
    for (const auto& o : sets_.list()) {
      if (kube::name_of(*o) == p.set.name) continue;
      try {
        HostPackageSet s = parse_host_package_set(*o);
        if (s.disable || s.priority >= p.set.priority) continue;
        std::string target = digest(s).target;
        earlier.push_back({std::move(s), std::move(target)});
      } catch (const std::exception&) {
      }
    }
  }

  // One scan of the Nodes, after the nodes with an open sentinel incident: out even while
  // uncordoned (Detected before the cordon lands, or a validation that needs it schedulable).
  std::unordered_set<std::string> incidents;
  remediations_.for_each_compact([&](const kube::CompactObject& o) {
    const std::string_view node = o.root().get_string({"metadata", "labels", kIncidentNodeLabel});
    if (!node.empty() && incident_open(o.root().get_string({"status", "phase"})))
      incidents.emplace(node);
  });
  // Label keys read below: this set's, its policy's and the other sets' selectors (earlier
  // priorities gate, runtime-required sets share the taint), the cluster budget's topology.
  LabelKeys keys;
  add_keys(keys, p.set.node_selector);
  if (policy_ptr != nullptr) {
    add_keys(keys, policy_ptr->fallback.selector);
    for (const auto& c : policy_ptr->compartments) add_keys(keys, c.selector);
  }
  for (const auto& o : sets_.list()) {
    try {
      add_keys(keys, parse_host_package_set(*o).node_selector);
    } catch (const std::exception&) {
      // An invalid set plans nothing and gates nothing.
    }
  }
  // The budget in force (the DisruptionBudget object, else the --set settings), read once per
  // pass: its topology label must be among the keys copied out of the cache.
  ClusterBudget cluster_storage;
  const ClusterBudget* cluster = cluster_budget(cluster_storage);
  if (cluster != nullptr && !cluster->topology_key.empty()) keys.insert(cluster->topology_key);
  if (reuse != nullptr && reuse->keys == keys) {
    p.nodes = std::move(reuse->nodes);
  } else {
    p.nodes.reserve(nodes_.size());
    nodes_.for_each_compact(
        [&](const kube::CompactObject& o) { p.nodes.push_back(scan_node(o, &keys)); });
  }
  std::unordered_set<std::string> outside, gated;
  bool gated_all = false;
  p.inputs.reserve(p.nodes.size());
  std::vector<std::string> in_progress;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    NodeScan& n = p.nodes[i];
    NodeInput in;
    in.facts.name = n.name;
    in.facts.ready = n.ready;
    in.facts.unschedulable = n.unschedulable;
    bool ours_recorded = false;
    if (auto it = n.records.find(p.set.name); it != n.records.end()) {
      RecordRead rr = parse_record_text(p.set.name, it->second);
      if (rr.record) {
        p.records.push_back(std::move(*rr.record));
        in.record = &p.records.back();
        ours_recorded =
            in.record->state == NodeState::InProgress || in.record->state == NodeState::Failed;
        if (in.record->state == NodeState::InProgress) in_progress.push_back(n.name);
      } else {
        in.record_error = rr.error;
      }
    }
    // hostpkg's cordon share belongs to this set only where this set's record holds the node.
    in.facts.cordon_ours = owned(n) && ours_recorded;
    bool other_holds = false;
    for (const auto& [set, text] : n.records) {
      if (set != p.set.name && kube::record_holds(text, owned(n))) other_holds = true;
    }
    for (const auto& o : n.owners) {
      if (o != kOwner) other_holds = true;  // sentinel's quarantine and the like
    }
    if (incidents.contains(n.name)) other_holds = true;
    if (other_holds) outside.insert(n.name);
    for (const Earlier& e : earlier) {
      if (!e.set.node_selector.matches(n.labels)) continue;
      auto it = n.records.find(e.set.name);
      bool done = it != n.records.end() && text_in_state(it->second, "Done") &&
                  it->second.find(e.target) != std::string::npos;
      if (!done) {
        gated.insert(n.name);
        if (e.set.sequencing == Sequencing::All || p.set.sequencing == Sequencing::All)
          gated_all = true;
      }
    }
    // Moved, not copied: the labels are most of a pass's memory at 5,000 nodes. From here on
    // they are read as p.inputs[i].facts.labels.
    in.facts.labels = std::move(n.labels);
    p.index.emplace(n.name, p.inputs.size());
    p.inputs.push_back(std::move(in));
  }

  std::int64_t epoch = 0;
  if (auto e = parse_int(kube::annotation_of(obj, kResetAnnotation)); e && *e >= 0) epoch = *e;
  RolloutInput ri;
  ri.set = &p.set;
  ri.policy = policy_ptr;
  ri.cluster = cluster;
  ri.nodes = p.inputs;
  ri.outside = &outside;
  ri.reset_epoch = epoch;
  ri.gated = &gated;
  ri.gated_all = gated_all;
  RolloutPlan plan = plan_rollout(ri);

  // Drive the nodes already in progress, then start the new ones. Nodes go a few at a time:
  // each step is one write whose latency (an etcd commit; 0.1-0.25 s on a loaded API server)
  // set the pace when they went one by one (4.4 writes/s at 5,000 nodes: ~19 min a batch),
  // never the controller's CPU. Each node is one worker's; nothing here starts a node.
  std::atomic<bool> waiting{false};
  std::atomic<std::size_t> finished{0}, next{0};
  std::mutex error_mu;
  std::exception_ptr error;
  auto drive_some = [&] {
    for (std::size_t i; (i = next++) < in_progress.size();) {
      if (stop.stop_requested()) return;
      {
        std::lock_guard lock(error_mu);
        if (error) return;
      }
      try {
        Drive d = drive_node(p, in_progress[i], stop);
        if (d == Drive::Waiting) waiting = true;
        if (d == Drive::Done) ++finished;
      } catch (const kube::ApiError& e) {
        if (is(e, kube::Reason::Conflict)) {
          waiting = true;  // the Node changed under us: re-read it next pass
          continue;
        }
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      } catch (...) {
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t w = 1; w < std::min(kDriveWorkers, in_progress.size()); ++w)
      helpers.emplace_back(drive_some);
    drive_some();
  }
  if (error) std::rethrow_exception(error);
  if (stop.stop_requested()) return {};
  if (finished > 0 && finished.load() == in_progress.size() && plan.start.empty() && replan &&
      !p.deleting) {
    // Every node in progress finished in this pass and this plan (made before) started
    // nobody: the batch is over and the next one may start now. (Only then: a re-plan after
    // each node of a batch would cost a pass of CPU per node and start nothing.) The re-plan
    // (which also writes status, taints, re-verification) works from this pass's scan with the
    // nodes it wrote replaced by the API's answers to those writes: as new as the cache after
    // waiting for the watch (0.2-0.5 s of the batch overhead at 5,000 nodes under load), and no
    // second scan. A node changed elsewhere meanwhile is as stale as in any pass: its start
    // carries the Node's resourceVersion and gets 409.
    auto planned_from = std::chrono::steady_clock::now();
    Rescan rescan;
    rescan.keys = std::move(keys);
    rescan.nodes = std::move(p.nodes);
    for (std::size_t i = 0; i < rescan.nodes.size(); ++i) {
      NodeScan& n = rescan.nodes[i];
      if (auto it = fresh_.find(n.name); it != fresh_.end()) {
        n = scan_node(*it->second, &rescan.keys);
      } else {
        n.labels = std::move(p.inputs[i].facts.labels);  // moved there by this pass
      }
    }
    fresh_.clear();
    p.inputs = {};
    p.records.clear();
    p.index = {};
    plan = RolloutPlan{};
    Result r = reconcile_pass(req, stop, false, &rescan);
    log::info("hostpkg: batch over, planned the next",
              {{"set", p.set.name},
               {"replan_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - planned_from)
                                 .count()}});
    return r;
  }
  // The plan counted from this process's cache; the claims object counts what other
  // controllers and replicas decided in the same instant (controller/disruption_reservation.h).
  std::unordered_map<std::string, std::string> claimed;
  if (cluster != nullptr && !plan.start.empty() && !p.deleting && !stop.stop_requested())
    claimed = claim_starts(p, plan, *cluster, incidents);
  for (const NodeStart& s : plan.start) {
    if (stop.stop_requested()) return {};
    std::string_view rv;
    if (cluster != nullptr) {
      auto it = claimed.find(s.node);
      if (it == claimed.end()) {
        waiting = true;
        ++plan.waiting_on_cluster_budget;  // refused by the claims: the status says so
        continue;
      }
      rv = it->second;
    }
    try {
      start_node(p, s, rv);
      waiting = true;
    } catch (const kube::ApiError& e) {
      if (!is(e, kube::Reason::Conflict)) throw;
      waiting = true;
    }
  }
  taints(p);
  std::int64_t next_verify = 0;
  if (!stop.stop_requested()) next_verify = reverify(p);
  // From this pass's scan: a record written above shows on the next pass (its own Node event).
  if (!stop.stop_requested()) sync_drift_conditions(p.nodes);

  bool stopped = false;
  for (const auto& c : plan.compartments) stopped = stopped || c.stopped;
  std::string phase =
      p.deleting      ? "Deleting"
      : stopped       ? "Stopped"
      : p.set.pause   ? "Paused"  // also on a finished set: pausing shows at once
      : plan.complete ? "Complete"
      : (plan.blocked_count + plan.malformed_count + p.drain_blocked + p.protected_wait) > 0 &&
              in_progress.empty() && plan.start.empty()
          ? "Blocked"
          : "Progressing";
  std::string message;
  if (stopped) {
    for (const auto& c : plan.compartments) {
      if (c.stopped)
        message = "compartment " + c.name + " stopped: " + c.stop_reason +
                  "; failing nodes: " + join(c.failing_nodes, ", ");
    }
  } else if (p.set.pause) {
    message = "spec.pause is true: started nodes finish, no new node starts";
  } else if (plan.waiting_on_cluster_budget > 0) {
    message = std::to_string(plan.waiting_on_cluster_budget) +
              " node(s) wait for the cluster disruption budget";
  }
  if (p.deleting && plan.complete && in_progress.empty()) {
    // Everything that supports uninstall is uninstalled; records stay on the Nodes.
    ensure_finalizer(obj, false);
    // The set is gone: so are its series (a name that never comes back must not stay on
    // /metrics). Nothing of this set runs now, so nothing re-creates them.
    metrics_.nodes->remove_matching("set", p.set.name);
    metrics_.stopped->remove_matching("set", p.set.name);
    metrics_.steps->remove_matching("set", p.set.name);
    metrics_.interrupts->remove_matching("set", p.set.name);
    metrics_.verifications->remove_matching("set", p.set.name);
    metrics_.drift->remove_matching("set", p.set.name);
    return {};
  }
  write_status(p, &plan, phase, message);
  if (waiting.load() || !plan.start.empty() || p.verifying) return Result{settings_.poll, false};
  // Held by the cluster budget: Node and incident events wake the set, an edit of the
  // DisruptionBudget object (read, not watched: controller/budget.h) does not.
  if (plan.waiting_on_cluster_budget > 0)
    return Result{std::max<std::chrono::milliseconds>(settings_.poll, std::chrono::seconds(5)),
                  false};
  if (next_verify > 0) {
    // Wake when the next node is due (requeue_after, never a busy loop); a second of slack
    // so the node is past due when the pass runs.
    std::int64_t wait_s = std::max<std::int64_t>(1, next_verify - unix_now() + 1);
    return Result{std::chrono::milliseconds(wait_s * 1000), false};
  }
  return {};
}

}  // namespace

ControllerSettings settings_from(const controller::Context& context) {
  ControllerSettings s;
  // In a pod, the stage pods go to the controller's own namespace.
  if (std::ifstream f("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); f) {
    std::string ns;
    std::getline(f, ns);
    if (!ns.empty()) s.namespace_ = ns;
  }
  s.namespace_ = context.setting("hostpkg.namespace", s.namespace_);
  s.runner_image = context.setting("hostpkg.runner-image", s.runner_image);
  std::string poll = context.setting("hostpkg.poll", "2s");
  auto d = core::try_parse_duration(poll);
  if (!d || d->count() <= 0)
    throw core::InvalidInput("--set hostpkg.poll=" + poll +
                             " is not a positive duration (e.g. 2s, 500ms)");
  s.poll = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  std::string rv = context.setting("hostpkg.reverify-interval", "");
  if (!rv.empty()) {
    auto r = core::try_parse_duration(rv);
    if (!r || r->count() <= 0)
      throw core::InvalidInput("--set hostpkg.reverify-interval=" + rv +
                               " is not a positive duration (e.g. 5s; for tests and demos only)");
    s.reverify_interval = std::chrono::duration_cast<std::chrono::milliseconds>(*r);
  }
  std::string inflight = context.setting("hostpkg.reverify-max-in-flight", "");
  if (!inflight.empty()) {
    auto n = parse_int(inflight);
    if (!n || *n < 1)
      throw core::InvalidInput("--set hostpkg.reverify-max-in-flight=" + inflight +
                               " is not a positive whole number of verify pods");
    s.reverify_max_in_flight = *n;
  }
  std::string max = context.setting("hostpkg.max-unavailable", "");
  std::string topo = context.setting("hostpkg.topology-key", "");
  std::string per = context.setting("hostpkg.max-unavailable-per-domain", "");
  if (!max.empty() || !topo.empty() || !per.empty()) {
    core::Value v = core::Value::map();
    if (!topo.empty()) v["topologyKey"] = topo;
    if (!per.empty()) {
      auto n = parse_int(per);
      if (!n)
        throw core::InvalidInput("--set hostpkg.max-unavailable-per-domain=" + per +
                                 " is not a whole number of nodes");
      v["maxUnavailablePerDomain"] = *n;
    }
    if (!max.empty()) {
      bool pct = max.ends_with('%');
      auto n = parse_int(pct ? max.substr(0, max.size() - 1) : max);
      if (!n)
        throw core::InvalidInput("--set hostpkg.max-unavailable=" + max +
                                 " is neither a node count (5) nor a percentage (10%)");
      v["maxUnavailable"][pct ? "percent" : "count"] = *n;
    }
    s.cluster = parse_cluster_budget(v, "--set hostpkg.*");
    s.has_cluster_budget = true;
  }
  return s;
}

controller::Predicate node_event_filter() {
  namespace pr = controller::predicates;
  return pr::any_of({
      pr::fields_changed({{"metadata", "labels"},
                          {"metadata", "deletionTimestamp"},
                          {"spec", "unschedulable"},
                          {"spec", "taints"},
                          {"status", "nodeInfo", "bootID"}}),
      pr::annotations_changed_with_prefix(
          {std::string(kRecordPrefix), std::string(kube::kCordonOwnersAnnotation)}),
      pr::condition_changed("Ready", {"status"}),
      pr::condition_changed(std::string(kDriftCondition), {"status", "reason", "message"}),
  });
}

void setup_hostpkg(controller::Manager& manager, const controller::Context& context) {
  setup_hostpkg(manager, settings_from(context));
}

void setup_hostpkg(controller::Manager& manager, const ControllerSettings& settings) {
  // The admission webhook refuses what the CRD schema cannot check (a dependsOn cycle, a
  // version that is not semver, ...) with the parsers the reconciler uses.
  const std::string group = api::host_package_sets().group;
  manager.admission().add(group, "HostPackageSet", [](const controller::AdmissionRequest& r) {
    if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
      return controller::AdmissionResult::allow();
    (void)parse_host_package_set(r.object);  // InvalidInput: denied with its words
    return controller::AdmissionResult::allow();
  });
  kube::Client& client = manager.client();
  auto policy_admission = [&client](const controller::AdmissionRequest& r) {
    // Deleting a policy a set still names would leave that set Blocked mid-rollout.
    if (r.operation == "DELETE") return policy_delete_admission(client, r.name);
    if ((r.operation != "CREATE" && r.operation != "UPDATE") || r.spec_unchanged())
      return controller::AdmissionResult::allow();
    (void)parse_deployment_policy(r.object);
    return controller::AdmissionResult::allow();
  };
  manager.admission().add(group, "DeploymentPolicy", policy_admission);
  auto rec = std::make_shared<HostPkgReconciler>(manager, settings);
  controller::Cache& sets = rec->sets();
  // A Node event concerns every set selecting the node, and every set whose record is on it
  // (a node that left a set's selector mid-change still needs finishing).
  controller::MapFunc node_to_sets = [&sets](const core::Value& node) {
    std::vector<Request> out;
    const core::Value* labels = node.get({"metadata", "labels"});
    static const core::Value kNone = core::Value::map();
    const core::Value* ann = node.get({"metadata", "annotations"});
    for (const auto& s : sets.list()) {
      std::string name(kube::name_of(*s));
      const core::Value* sel = s->get({"spec", "nodeSelector"});
      bool match = sel == nullptr || kube::selector_matches(*sel, labels ? *labels : kNone);
      if (!match && ann != nullptr && ann->is_map())
        match = ann->find(record_annotation(name)) != nullptr;
      if (match) out.push_back(Request{"", name});
    }
    return out;
  };
  controller::MapFunc policy_to_sets = [&sets](const core::Value& policy) {
    std::vector<Request> out;
    for (const auto& s : sets.list()) {
      if (s->get_string({"spec", "deploymentPolicy"}) == kube::name_of(policy))
        out.push_back(Request{"", std::string(kube::name_of(*s))});
    }
    return out;
  };
  controller::MapFunc stage_pod_to_set = [](const core::Value& pod) {
    std::string_view set = kube::label_of(pod, kSetLabel);
    return set.empty() ? std::vector<Request>{}
                       : std::vector<Request>{Request{"", std::string(set)}};
  };
  // A pod leaving a node being drained: the sets with a change in progress there.
  controller::Cache& nodes = rec->nodes();
  controller::MapFunc pod_to_sets = [&nodes](const core::Value& pod) {
    std::vector<Request> out;
    std::string_view node = kube::pod::node_name(pod);
    if (node.empty()) return out;
    kube::CompactPtr n = nodes.get_compact(std::string(node));
    if (n == nullptr) return out;
    if (auto ann = n->root().get({"metadata", "annotations"}); ann && ann->is_map()) {
      ann->for_each_entry([&](std::string_view k, kube::CompactView v) {
        auto s = v.string();
        if (k.starts_with(kRecordPrefix) && s && text_in_state(*s, "InProgress"))
          out.push_back(Request{"", std::string(k.substr(kRecordPrefix.size()))});
      });
    }
    return out;
  };
  // An incident opening or closing changes what is out for every set (sets are few).
  controller::MapFunc incident_to_sets = [&sets](const core::Value&) {
    std::vector<Request> out;
    for (const auto& s : sets.list()) out.push_back(Request{"", std::string(kube::name_of(*s))});
    return out;
  };
  controller::SourceOptions set_source;
  set_source.cache.compact = false;
  controller::SourceOptions node_source;
  node_source.predicates.push_back(node_event_filter());
  controller::SourceOptions stage_source;
  stage_source.cache.namespace_ = settings.namespace_;
  stage_source.cache.label_selector = std::string(kSetLabel);
  controller::SourceOptions pod_source;
  pod_source.cache = HostPkgReconciler::pod_cache_options();
  manager.controller("hostpkg")
      .for_resource(api::host_package_sets(), "HostPackageSet", set_source)
      .watches(kube::resources::nodes(), node_to_sets, node_source)
      .watches(api::deployment_policies(), policy_to_sets, set_source)
      .watches(kube::resources::pods(), stage_pod_to_set, stage_source)
      .watches(kube::resources::pods(), pod_to_sets, pod_source)
      .watches(api::remediations(), incident_to_sets)
      // One worker: sets share the cluster budget, so their passes must not interleave.
      .max_concurrent_reconciles(1)
      .complete(rec);
}

}  // namespace gpufleet::hostpkg
