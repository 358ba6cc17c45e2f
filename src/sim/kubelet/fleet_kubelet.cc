#include "sim/kubelet/fleet_kubelet.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "core/duration.h"
#include "core/errors.h"
#include "core/http_server.h"
#include "core/json.h"
#include "core/log.h"
#include "sim/atomic_file.h"
#include "sim/control_inbox.h"
#include "sim/dcgm_output.h"
#include "sim/kubelet/container_logs.h"
#include "sim/nccl_output.h"
#include "sim/rng.h"
#include "sim/training_output.h"

namespace gpufleet::sim {
namespace {

// `dcgmi diag -r N -j`: the level (default 3); the image's tag picks the JSON layout.
DcgmDiagConfig dcgm_config(const std::vector<std::string>& args, std::string_view image) {
  DcgmDiagConfig c;
  c.major_version = dcgm_major_from_image(image);
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "-r" || args[i] == "--run") {
      int level = 0;
      auto [p, ec] =
          std::from_chars(args[i + 1].data(), args[i + 1].data() + args[i + 1].size(), level);
      if (ec != std::errc() || p != args[i + 1].data() + args[i + 1].size())
        throw core::InvalidInput("dcgmi diag -r " + args[i + 1] + ": not a level (use 1..4)");
      c.level = level;
    }
  return c;
}

// The synthetic trainer's flags: --model, --max-steps, --log-interval.
TrainingRunConfig training_config(const std::vector<std::string>& args) {
  TrainingRunConfig c;
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    const std::string& v = args[i + 1];
    auto number = [&] {
      int n = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || p != v.data() + v.size())
        throw core::InvalidInput(args[i] + " " + v + ": not a number");
      return n;
    };
    if (args[i] == "--model") c.model = v;
    if (args[i] == "--max-steps") c.iterations = number();
    if (args[i] == "--log-interval") c.log_interval = number();
  }
  return c;
}

namespace log = core::log;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kLeaseNamespace = "kube-node-lease";
// Changed nodes whose signal files one pass of the writer mirrors. A node's first mirror is
// about 105 files (~20 ms on the reference machine), so a 5,000-node fleet's first mirror
// takes minutes in the background; later passes only see the few nodes a fault touched.
constexpr std::size_t kSignalNodesPerPass = 25;

std::string now_seconds() {
  return core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Seconds);
}

std::string now_micros() {
  return core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
}

bool is_not_found(const kube::ApiError& e) { return e.is(kube::Reason::NotFound); }

std::chrono::milliseconds until(Clock::time_point t) {
  // Rounded up, and at least 1 ms: requeue_after 0 would mean "done".
  auto d = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now());
  return std::max(d, std::chrono::milliseconds(1));
}

}  // namespace

// The two Reconcilers only forward to the kubelet (which owns the model both share) and
// count failed API requests for status(); the Controller logs them and retries with backoff.
class FleetKubelet::NodeSync : public controller::Reconciler {
 public:
  explicit NodeSync(FleetKubelet& k) : k_(k) {}
  controller::Result reconcile(const controller::Request& r, std::stop_token) override {
    try {
      return k_.sync_node(r.name);
    } catch (const std::exception&) {
      ++k_.api_errors_;
      throw;
    }
  }

 private:
  FleetKubelet& k_;
};

class FleetKubelet::PodSync : public controller::Reconciler {
 public:
  explicit PodSync(FleetKubelet& k) : k_(k) {}
  controller::Result reconcile(const controller::Request& r, std::stop_token) override {
    try {
      return k_.sync_pod(r.key());
    } catch (const std::exception&) {
      ++k_.api_errors_;
      throw;
    }
  }

 private:
  FleetKubelet& k_;
};

FleetKubelet::FleetKubelet(kube::Client& client, FleetSpec fleet, BehaviourTable behaviours,
                           KubeletOptions options)
    : client_(client),
      table_(std::move(behaviours)),
      options_(std::move(options)),
      started_(Clock::now()),
      model_(std::move(fleet), 0) {
  if (options_.time_scale <= 0) {
    throw core::InvalidInput("time scale must be positive (1 = real time)");
  }
  std::string now = now_seconds();
  for (const auto& n : model_.node_names()) nodes_[n].ready_transition = now;
}

FleetKubelet::~FleetKubelet() { stop(false); }

std::chrono::steady_clock::duration FleetKubelet::wall(double sim_seconds) const {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.0, sim_seconds) / options_.time_scale));
}

double FleetKubelet::sim_now() const {
  return std::chrono::duration<double>(Clock::now() - started_).count() * options_.time_scale;
}

void FleetKubelet::start() {
  if (manager_) return;
  started_ = Clock::now();
  if (!options_.kubelet_listen.empty()) {
    // Before any Node registers: each advertises this address and port.
    const core::BindAddress bind = core::parse_bind_address(options_.kubelet_listen);
    if (bind.address == "0.0.0.0" || bind.address == "::") {
      throw core::InvalidInput("kubelet listen address \"" + options_.kubelet_listen +
                               "\": the Nodes advertise it, so give the one IP the API server "
                               "should dial, such as 127.0.0.1:0");
    }
    if (options_.kubelet_cert_pem.empty() || options_.kubelet_key_pem.empty()) {
      throw core::InvalidInput(
          "kubelet listen address \"" + options_.kubelet_listen +
          "\" needs a serving certificate and key (the API server dials kubelets over HTTPS): "
          "give both, e.g. kube-local's pki/kubelet-serving.crt and .key");
    }
    core::HttpServerOptions ho;
    ho.address = bind.address;
    ho.port = bind.port;
    ho.registry = nullptr;
    ho.tls_cert_pem = options_.kubelet_cert_pem;
    ho.tls_key_pem = options_.kubelet_key_pem;
    ho.tls_client_ca_pem = options_.kubelet_client_ca_pem;
    ho.prefix_handlers["/containerLogs/"] = [this](const core::HttpRequest& r) {
      return serve_container_log(r);
    };
    kubelet_server_ = std::make_unique<core::HttpServer>(std::move(ho));
    kubelet_address_ = bind.address == "localhost" ? "127.0.0.1" : bind.address;
    kubelet_port_ = kubelet_server_->port();
    log::info("simulated kubelet endpoint", {{"url", kubelet_server_->url()}});
  }
  controller::ManagerOptions mo;
  mo.name = "gpufleet-sim";
  mo.metrics_address = "";  // `gpufleet sim --listen` serves the default registry
  mo.shutdown_grace = std::chrono::seconds(5);
  manager_ = std::make_unique<controller::Manager>(client_, mo);

  // Nodes: this fleet's only (its label), and only their metadata (~0.5 KB, kept as trees): a
  // reconcile needs to know whether the Node exists, and full Nodes (~10 KB each) would
  // cross the watch and be decoded for nothing.
  controller::SourceOptions nodes;
  nodes.cache.label_selector = std::string(kFleetLabel) + "=" + model_.spec().name;
  nodes.cache.shape.metadata_only = true;
  nodes.cache.compact = false;
  node_cache_ = &manager_->cache(kube::resources::nodes(), nodes.cache);
  node_sync_ = &manager_->controller("sim-nodes")
                    .for_resource(kube::resources::nodes(), "Node", nodes)
                    .max_concurrent_reconciles(std::max(1, options_.workers))
                    .complete(std::make_shared<NodeSync>(*this));
  // Pods: every pod bound to a node (those of other nodes cost one lookup each); kept as
  // trees since every reconcile reads the whole pod.
  controller::SourceOptions pods;
  pods.cache.field_selector = "spec.nodeName!=";
  pods.cache.compact = false;
  pod_cache_ = &manager_->cache(kube::resources::pods(), pods.cache);
  pod_sync_ = &manager_->controller("sim-pods")
                   .for_resource(kube::resources::pods(), "Pod", pods)
                   .max_concurrent_reconciles(std::max(1, options_.workers))
                   .complete(std::make_shared<PodSync>(*this));
  {
    std::lock_guard lock(mu_);
    for (const auto& n : model_.node_names()) node_sync_->enqueue({"", n});
  }
  manager_thread_ = std::thread([this] {
    try {
      manager_->run(manager_stop_.get_token());
    } catch (const std::exception& e) {
      log::error("simulated kubelet runtime failed", {{"error", e.what()}});
    }
  });
  ticker_ = std::thread([this] { tick_loop(); });
  if (!options_.state_dir.empty()) signals_ = std::thread([this] { signal_loop(); });
  log::info("simulated fleet starting",
            {{"fleet", model_.spec().name}, {"nodes", static_cast<std::int64_t>(model_.size())}});
}

bool FleetKubelet::wait_registered(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    {
      std::lock_guard lock(mu_);
      bool all = std::all_of(nodes_.begin(), nodes_.end(),
                             [](const auto& e) { return e.second.registered; });
      if (all) return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void FleetKubelet::stop(bool remove_nodes) {
  bool was = stopping_.exchange(true);
  if (!was) {
    if (ticker_.joinable()) ticker_.join();
    if (signals_.joinable()) signals_.join();
    // Drains the controllers (keys already due finish), then stops the caches.
    manager_stop_.request_stop();
    if (manager_thread_.joinable()) manager_thread_.join();
    if (kubelet_server_) kubelet_server_->stop();
  }
  if (!remove_nodes) return;
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, st] : nodes_) {
      if (st.registered) names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> deleters;
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    deleters.emplace_back([&] {
      for (std::size_t k = next++; k < names.size(); k = next++) process_delete(names[k]);
    });
  }
  for (auto& t : deleters) t.join();
  std::lock_guard lock(mu_);
  for (auto& [name, st] : nodes_) st.registered = false;
  log::info("simulated fleet removed", {{"nodes", static_cast<std::int64_t>(names.size())}});
}

void FleetKubelet::schedule(SimEvent e) {
  std::lock_guard lock(mu_);
  model_.schedule(std::move(e));
}

std::vector<AppliedEvent> FleetKubelet::inject(const SimEvent& e) {
  std::lock_guard lock(mu_);
  auto applied = model_.apply(e, sim_now());
  handle_events(applied);
  return applied;
}

std::string FleetKubelet::kmsg_of(const std::string& node) const {
  std::lock_guard lock(mu_);
  const NodeModel* n = model_.find(node);
  return n == nullptr ? "" : n->kmsg().render();
}

std::optional<std::string> FleetKubelet::host_read(const std::string& node,
                                                   const std::string& path) const {
  std::lock_guard lock(mu_);
  const NodeModel* n = model_.find(node);
  return n == nullptr ? std::nullopt : n->host().read(path);
}

std::string FleetKubelet::boot_id_of(const std::string& node) const {
  std::lock_guard lock(mu_);
  const NodeModel* n = model_.find(node);
  return n == nullptr ? "" : n->boot_id();
}

core::Value FleetKubelet::status() const {
  std::lock_guard lock(mu_);
  core::Value s = model_.summary(sim_now());
  std::int64_t ready = 0, registered = 0;
  for (const auto& [name, st] : nodes_) {
    registered += st.registered ? 1 : 0;
    ready += st.registered && st.ready ? 1 : 0;
  }
  s["registered"] = registered;
  s["registrations"] = static_cast<std::int64_t>(registered_.load());
  s["ready"] = ready;
  std::int64_t running = 0;
  for (const auto& [key, run] : runs_) running += run.stage == PodStage::Running ? 1 : 0;
  s["podsRunning"] = running;
  s["podsStarted"] = static_cast<std::int64_t>(pods_started_.load());
  s["podsFinished"] = static_cast<std::int64_t>(pods_finished_.load());
  s["leaseRenewals"] = static_cast<std::int64_t>(lease_renewals_.load());
  s["statusUpdates"] = static_cast<std::int64_t>(status_updates_.load());
  s["apiErrors"] = static_cast<std::int64_t>(api_errors_.load());
  return s;
}

NodeRuntime FleetKubelet::runtime_locked(const std::string& name) const {
  const NodeModel& m = *model_.find(name);
  const NodeState& st = nodes_.at(name);
  NodeRuntime rt;
  rt.boot_id = m.boot_id();
  rt.gpus_present = m.gpus_present();
  rt.gpus_healthy = m.gpus_healthy();
  rt.rdma_healthy = m.ports_active();
  rt.ready = st.ready;
  if (!st.ready) {
    rt.ready_reason = "KubeletNotReady";
    rt.ready_message = "node is shutting down (simulated reboot)";
  }
  rt.ready_transition = st.ready_transition;
  rt.kernel_version = m.host().kernel_version();
  rt.driver_version = m.host().driver_version();
  rt.kubelet_address = kubelet_address_;
  rt.kubelet_port = kubelet_port_;
  return rt;
}

std::string FleetKubelet::kubelet_url() const {
  return kubelet_server_ ? kubelet_server_->url() : std::string();
}

core::HttpResponse FleetKubelet::serve_container_log(const core::HttpRequest& request) const {
  core::HttpResponse out;
  LogAnswer answer;
  std::string ns;
  std::string pod;
  std::string container;
  LogOptions options;
  if (!split_log_path(request.path, ns, pod, container, answer)) {
  } else if (auto error = parse_log_options(request.query, options)) {
    answer = *error;
  } else {
    std::lock_guard lock(mu_);
    auto it = runs_.find(ns + "/" + pod);
    if (it == runs_.end()) {
      answer = {404, "pod \"" + pod + "\" does not exist"};
    } else {
      answer = container_log(it->second, container, options, core::Timestamp::now());
    }
  }
  out.status = answer.status;
  out.body = std::move(answer.body);
  return out;
}

std::string FleetKubelet::next_pod_ip() {
  std::uint64_t n = ++pod_ips_;
  char buf[32];
  std::snprintf(
      buf, sizeof buf, "10.%llu.%llu.%llu", static_cast<unsigned long long>(128 + (n >> 16) % 64),
      static_cast<unsigned long long>((n >> 8) & 255), static_cast<unsigned long long>(n & 255));
  return buf;
}

void FleetKubelet::tick_loop() {
  auto last_status = Clock::now() - std::chrono::hours(1);
  while (!stopping_.load()) {
    auto next = Clock::now() + options_.tick;
    try {
      std::unique_lock lock(mu_);
      auto events = model_.advance(sim_now());
      handle_events(events);
      if (!options_.state_dir.empty()) drain_inbox();
      if (!options_.state_dir.empty() && Clock::now() - last_status > std::chrono::seconds(1)) {
        last_status = Clock::now();
        lock.unlock();
        write_file_atomic(status_file_path(options_.state_dir),
                          core::to_json(status(), core::JsonStyle::Pretty) + "\n");
      }
    } catch (const std::exception& e) {
      log::error("simulator tick failed", {{"error", e.what()}});
    }
    std::this_thread::sleep_until(next);
  }
}

void FleetKubelet::signal_loop() {
  const std::string root = options_.state_dir + "/nodes";
  while (!stopping_.load()) {
    std::vector<std::pair<std::string, std::string>> writes;
    {
      std::lock_guard lock(mu_);
      writes = model_.take_signal_writes(root, kSignalNodesPerPass);
    }
    // File I/O outside the lock: heartbeats and pods never wait for a slow disk.
    for (const auto& [path, content] : writes) {
      try {
        write_file_atomic(path, content);
      } catch (const std::exception& e) {
        log::warn("cannot write signal file", {{"path", path}, {"error", e.what()}});
      }
    }
    if (writes.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void FleetKubelet::drain_inbox() {
  for (const auto& file : list_control_inbox(options_.state_dir)) {
    std::string result;
    try {
      core::Value doc = read_control_event(options_.state_dir, file);
      SimEvent e = parse_event(doc, file, "event", false);
      if (e.at_s > 0) {
        e.at_s += sim_now();
        model_.schedule(e);
        result = "scheduled at " + std::to_string(e.at_s) + "s";
      } else {
        auto applied = model_.apply(e, sim_now());
        handle_events(applied);
        result = "applied:";
        for (const auto& a : applied) result += " " + a.node + " " + a.what + ";";
      }
    } catch (const std::exception& err) {
      result = std::string("error: ") + err.what();
      log::warn("control event rejected", {{"file", file}, {"error", err.what()}});
    }
    complete_control_event(options_.state_dir, file, result);
  }
}

void FleetKubelet::handle_events(const std::vector<AppliedEvent>& events) {
  std::string now = now_seconds();
  for (const auto& ev : events) {
    if (!ev.error.empty()) {
      log::warn("simulated event failed", {{"event", ev.what}, {"error", ev.error}});
      continue;
    }
    log::info("simulated event", {{"node", ev.node}, {"what", ev.what}, {"at", ev.at_s}});
    auto requeue_pods = [&](const std::string& node) {
      if (pod_sync_ == nullptr) return;
      for (const auto& [key, run] : runs_) {
        if (run.node == node) pod_sync_->enqueue(controller::Request::from_key(key));
      }
    };
    switch (ev.kind) {
      case EventKind::Scale:
        for (const auto& n : ev.added) {
          nodes_[n].ready_transition = now;
          mark_node_locked(n);
        }
        for (const auto& n : ev.removed) {
          for (auto it = runs_.begin(); it != runs_.end();) {
            it = it->second.node == n ? runs_.erase(it) : std::next(it);
          }
          mark_node_locked(n);  // gone from the model: sync_node deletes it
        }
        break;
      case EventKind::Reboot: {
        auto it = nodes_.find(ev.node);
        if (it == nodes_.end()) break;
        bool down = model_.is_down(ev.node);
        if (it->second.ready == down) {
          it->second.ready = !down;
          it->second.ready_transition = now;
        }
        if (!down) it->second.lease_due = Clock::now();  // heartbeats resume at once
        mark_node_locked(ev.node);
        requeue_pods(ev.node);
        break;
      }
      case EventKind::Fault:
      case EventKind::Host: mark_node_locked(ev.node); break;
      case EventKind::StepOutcome: break;  // decides stage pods the kubelet takes from now on
    }
  }
}

void FleetKubelet::mark_node_locked(const std::string& name) {
  if (auto it = nodes_.find(name); it != nodes_.end()) it->second.status_dirty = true;
  if (node_sync_ != nullptr) node_sync_->enqueue({"", name});
}

controller::Result FleetKubelet::sync_node(const std::string& name) {
  // Read the cache before the lock: it is what the watch has shown so far.
  bool in_cache = node_cache_ != nullptr && node_cache_->get(name) != nullptr;
  bool remove = false, do_register = false, report = false, renew = false;
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return {};
    NodeState& st = it->second;
    auto now = Clock::now();
    if (model_.find(name) == nullptr) {
      remove = true;  // scaled away
    } else {
      if (st.registered && in_cache) st.seen = true;
      if (st.registered && st.seen && !in_cache) {
        // Someone deleted the Node (the watch said so): register it again, as a kubelet does.
        st.registered = false;
        st.lease_exists = false;
      }
      do_register = !st.registered;
      report = st.registered && (st.status_dirty || now >= st.status_due);
      if (report) st.status_dirty = false;  // set again if the report fails
      renew = !model_.is_down(name) && now >= st.lease_due;
    }
  }
  if (remove) {
    process_delete(name);
    return {};
  }
  if (do_register) {
    // The first Lease and status come on the next pass, after the nodes already queued: a
    // fleet registers all its Nodes first, as before the runtime (figures in performance.md).
    if (!register_node(name)) return {};
    return {.requeue_after = std::chrono::milliseconds(1)};
  }
  if (report) {
    bool ok = false;
    try {
      ok = report_node_status(name);
    } catch (...) {
      std::lock_guard lock(mu_);
      if (auto it = nodes_.find(name); it != nodes_.end()) it->second.status_dirty = true;
      throw;
    }
    if (!ok) return {.requeue_after = std::chrono::milliseconds(1)};  // register again
  }
  if (renew && !renew_lease(name)) return {.requeue = true};
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return {};
  Clock::time_point next = it->second.status_due;
  if (!model_.is_down(name)) next = std::min(next, it->second.lease_due);
  return {.requeue_after = until(next)};
}

// Creates the Node, or adopts one left by an earlier run. False when the node left the model
// meanwhile.
bool FleetKubelet::register_node(const std::string& name) {
  core::Value object;
  {
    std::lock_guard lock(mu_);
    const NodeModel* m = model_.find(name);
    if (m == nullptr) return false;
    object = node_object(model_.spec(), m->identity(), runtime_locked(name), now_seconds());
  }
  std::string uid;
  core::Value labels_now = *object.get({"metadata", "labels"});
  try {
    core::Value created = client_.create(kube::resources::nodes(), object, options_.field_manager);
    uid = std::string(kube::uid_of(created));
  } catch (const kube::ApiError& e) {
    if (!e.is(kube::Reason::AlreadyExists)) throw;
    // A node left by an earlier run: adopt it (its spec, taints included, stays as is).
    core::Value existing = client_.get(kube::resources::nodes(), "", name);
    uid = std::string(kube::uid_of(existing));
    core::Value patch;
    patch["metadata"]["labels"] = labels_now;
    client_.patch(kube::resources::nodes(), "", name, kube::PatchType::Merge, patch);
    core::Value status_patch;
    status_patch["status"] = *object.find("status");
    client_.patch(kube::resources::nodes(), "", name, kube::PatchType::StrategicMerge, status_patch,
                  "status");
  }
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || model_.find(name) == nullptr) return false;
  it->second.uid = uid;
  it->second.registered = true;
  it->second.seen = false;
  it->second.status_dirty = false;
  it->second.status_due = Clock::now() + options_.status_report;
  it->second.lease_due = Clock::now();  // the first heartbeat on the next pass
  it->second.reported_labels = core::to_json(labels_now);
  ++registered_;
  return true;
}

// Patches the labels (when they changed) and the status. False when the Node is gone (it is
// then registered again).
bool FleetKubelet::report_node_status(const std::string& name) {
  core::Value object;
  core::Value labels;
  std::string now = now_seconds();
  {
    std::lock_guard lock(mu_);
    const NodeModel* m = model_.find(name);
    if (m == nullptr) return true;
    NodeRuntime rt = runtime_locked(name);
    object = node_status(model_.spec(), m->identity(), rt, now);
    labels = node_labels(model_.spec(), m->identity(), rt);
    if (core::to_json(labels) == nodes_[name].reported_labels) labels = core::Value();
  }
  try {
    if (!labels.is_null()) {
      core::Value patch;
      patch["metadata"]["labels"] = labels;
      client_.patch(kube::resources::nodes(), "", name, kube::PatchType::Merge, patch);
      std::lock_guard lock(mu_);
      if (auto it = nodes_.find(name); it != nodes_.end())
        it->second.reported_labels = core::to_json(labels);
    }
    core::Value patch;
    patch["status"] = std::move(object);
    client_.patch(kube::resources::nodes(), "", name, kube::PatchType::StrategicMerge, patch,
                  "status");
    ++status_updates_;
  } catch (const kube::ApiError& e) {
    if (!is_not_found(e)) throw;
    // Someone deleted the Node before the watch said so: register it again.
    std::lock_guard lock(mu_);
    if (auto it = nodes_.find(name); it != nodes_.end()) {
      it->second.registered = false;
      it->second.lease_exists = false;
    }
    return false;
  }
  std::lock_guard lock(mu_);
  if (auto it = nodes_.find(name); it != nodes_.end())
    it->second.status_due = Clock::now() + options_.status_report;
  return true;
}

bool FleetKubelet::renew_lease(const std::string& name) {
  std::string uid;
  bool exists = false;
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end() || model_.find(name) == nullptr || !it->second.registered) return true;
    if (model_.is_down(name)) return true;  // a rebooting node stops heartbeating
    uid = it->second.uid;
    exists = it->second.lease_exists;
  }
  core::Value patch;
  patch["spec"]["holderIdentity"] = name;
  patch["spec"]["leaseDurationSeconds"] = options_.lease_duration_seconds;
  patch["spec"]["renewTime"] = now_micros();
  bool created = false;
  if (!exists) {
    // First heartbeat of this run: create the Lease (owned by the Node, so that deleting the
    // Node lets the garbage collector take it), or adopt one left by an earlier run.
    core::Value lease = patch;
    lease["apiVersion"] = "coordination.k8s.io/v1";
    lease["kind"] = "Lease";
    lease["metadata"]["name"] = name;
    lease["metadata"]["namespace"] = kLeaseNamespace;
    if (!uid.empty()) {
      core::Value owner;
      owner["apiVersion"] = "v1";
      owner["kind"] = "Node";
      owner["name"] = name;
      owner["uid"] = uid;
      lease["metadata"]["ownerReferences"].push_back(std::move(owner));
    }
    try {
      client_.create(kube::resources::leases(), lease, options_.field_manager);
      created = true;
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::AlreadyExists)) throw;
    }
  }
  if (!created) {
    try {
      client_.patch(kube::resources::leases(), kLeaseNamespace, name, kube::PatchType::Merge,
                    patch);
    } catch (const kube::ApiError& e) {
      if (!is_not_found(e)) throw;
      std::lock_guard lock(mu_);
      if (auto it = nodes_.find(name); it != nodes_.end()) it->second.lease_exists = false;
      return false;  // deleted under us: create it on the retry
    }
  }
  ++lease_renewals_;
  // Jitter of up to 4% keeps thousands of renewals from lining up.
  auto renew = options_.lease_renew;
  Rng rng(derive_seed(lease_renewals_.load(), name));
  auto jitter =
      std::chrono::milliseconds(static_cast<std::int64_t>(renew.count() * 0.04 * rng.unit()));
  std::lock_guard lock(mu_);
  if (auto it = nodes_.find(name); it != nodes_.end()) {
    it->second.lease_exists = true;
    it->second.lease_due = Clock::now() + renew - jitter;
  }
  return true;
}

bool FleetKubelet::process_delete(const std::string& name) {
  try {
    client_.remove(kube::resources::leases(), kLeaseNamespace, name);
  } catch (const kube::ApiError& e) {
    if (!is_not_found(e)) throw;
  }
  try {
    client_.remove(kube::resources::nodes(), "", name);
  } catch (const kube::ApiError& e) {
    if (!is_not_found(e)) throw;
  }
  std::lock_guard lock(mu_);
  if (model_.find(name) == nullptr) nodes_.erase(name);
  return true;
}

void FleetKubelet::write_pod_log(const PodRun& run, const ContainerRun& container,
                                 const std::string& output) const {
  if (options_.state_dir.empty() || output.empty()) return;
  // The CRI log layout and line format kubelets use: <time> stdout F <line>.
  std::string dir = options_.state_dir + "/nodes/" + run.node + "/var/log/pods/" + run.ns + "_" +
                    run.name + "_" + run.uid + "/" + container.name + "/";
  std::string now = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Nanos);
  std::string text;
  std::size_t start = 0;
  while (start < output.size()) {
    auto nl = output.find('\n', start);
    std::string line =
        output.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    text += now + " stdout F " + line + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  write_file_atomic(dir + std::to_string(container.restart_count()) + ".log", text);
}

PodEnv FleetKubelet::pod_env_locked() {
  PodEnv env;
  env.wall = [this](double s) { return wall(s); };
  auto hosts_of = [](const PodRun& run) {
    std::vector<std::string> hosts = run.plan.nccl_hosts;
    if (hosts.empty()) hosts.push_back(run.node);
    return hosts;
  };
  // Model-driven output: nccl-tests, DCGM diagnostics or a training run (plan.generator).
  auto generate = [this,
                   hosts_of](const PodRun& run) -> std::pair<double, std::pair<int, std::string>> {
    if (run.plan.generator == "dcgm") {
      const NodeModel* node = model_.find(run.node);
      if (node == nullptr) throw core::InvalidInput("node " + run.node + " is not simulated");
      DcgmDiagResult r =
          run_dcgm_diag(*node, dcgm_config(run.plan.generator_args, run.plan.generator_image));
      return {r.seconds, {r.exit_code, compact_json_output(r.output)}};
    }
    TrainingRunConfig config = training_config(run.plan.generator_args);
    config.seed = derive_seed(model_.spec().seed, run.uid);
    TrainingRunResult r = run_training(model_.group(hosts_of(run)), config);
    return {r.seconds, {r.exit_code, r.output}};
  };
  env.nccl_duration = [this, hosts_of, generate](const PodRun& run, const ContainerRun&) {
    if (run.plan.generator != "nccl") return generate(run).first;
    return allreduce_test_seconds(estimate_allreduce(model_.group(hosts_of(run))),
                                  run.plan.nccl_config);
  };
  env.nccl_result = [this, hosts_of, generate](const PodRun& run, const ContainerRun&) {
    if (run.plan.generator != "nccl") return generate(run).second;
    NcclTestConfig config = run.plan.nccl_config;
    config.seed = derive_seed(model_.spec().seed, run.uid);
    NcclTestResult result = run_allreduce_test(model_.group(hosts_of(run)), config);
    return std::make_pair(result.exit_code, result.output);
  };
  env.log = [this](const PodRun& run, const ContainerRun& c, const std::string& output) {
    write_pod_log(run, c, output);
  };
  return env;
}

void FleetKubelet::count_transition(PodStage before, const PodRun& run) {
  if (before == PodStage::Pending && run.stage == PodStage::Running) ++pods_started_;
  if (!(before == PodStage::Succeeded || before == PodStage::Failed) && run.terminal()) {
    ++pods_finished_;
  }
}

// A pod this kubelet has not seen yet: take it (startTime, first status) unless it is done,
// going away, or its node is down.
FleetKubelet::PodAction FleetKubelet::admit_pod_locked(const std::string& key,
                                                       const core::Value& pod, bool down) {
  PodAction act;
  std::string server_phase(pod.get_string({"status", "phase"}));
  bool deleting = pod.get({"metadata", "deletionTimestamp"}) != nullptr;
  if (server_phase == "Succeeded" || server_phase == "Failed" || deleting) {
    act.final_delete = deleting;
    return act;
  }
  if (down) return act;  // picked up again when the node boots
  NodeModel* m = model_.find(std::string(pod.get_string({"spec", "nodeName"})));
  PodPlan plan = table_.plan(pod);
  // A hostpkg stage pod acts on the host model and reports the step runner's result.
  // An injected outcome (gpufleet sim inject) decides before the behaviour table.
  std::optional<HostStepRequest> step = host_step_request(pod);
  auto inj =
      step ? model_.take_step_injection(step->node, step->package, step->stage) : std::nullopt;
  InjectedStep injected =
      inj ? plan_injected_step(*inj, step->stage, table_.host_step(pod), plan) : InjectedStep{};
  if (step && injected.run_step) {
    const HostStepBehaviour* hs = injected.behaviour(table_.host_step(pod));
    HostStepOutcome o = run_host_step(*step, hs, m->host());
    m->touch();  // the step wrote its host history: mirror it to the state dir
    for (auto& c : plan.containers) {
      c.exit_codes = {o.exit_code};
      c.termination_message = o.result_json;
    }
    if (o.reboot) {
      SimEvent e;
      e.at_s = sim_now() + plan.start_delay_s + plan.duration_s.value_or(1.0);
      e.kind = EventKind::Reboot;
      e.nodes = {step->node};
      e.down_s = hs != nullptr ? hs->reboot_down_s : 5.0;
      model_.schedule(std::move(e));
    }
  }
  PodRun run = make_pod_run(pod, std::move(plan), table_.back_off(), m->identity().internal_ip,
                            next_pod_ip());
  if (const core::Value* conds = pod.get({"status", "conditions"}); conds && conds->is_list()) {
    for (const auto& c : conds->as_list()) {
      if (c.get_string({"type"}) == "PodScheduled") {
        run.scheduled_since = std::string(c.get_string({"lastTransitionTime"}));
      }
    }
  }
  std::string now = now_seconds();
  PodStage before = run.stage;
  advance_pod(run, Clock::now(), now, pod_env_locked());
  count_transition(before, run);
  act.status = pod_status(run, now, pod.get({"status"}));
  act.requeue = next_due(run);
  run.status_unsent = true;
  runs_.emplace(key, std::move(run));
  return act;
}

// Graceful deletion (and so eviction): SIGTERM, the processes exit within min(1 s, grace),
// the final status, then the grace-0 delete. Pods with nothing running go at once.
FleetKubelet::PodAction FleetKubelet::delete_pod_locked(PodRun& run, const core::Value& pod,
                                                        bool down) {
  PodAction act;
  auto wall_now = Clock::now();
  bool anything_running = false;
  for (const auto* list : {&run.init, &run.main}) {
    for (const auto& c : *list) anything_running = anything_running || c.running();
  }
  if (run.terminal() || !anything_running || down) {
    // A final status the API server did not take yet goes first (a retry after an error).
    if (run.terminal() && run.status_unsent) {
      act.status = pod_status(run, now_seconds(), pod.get({"status"}));
    }
    act.final_delete = true;
    return act;
  }
  if (!run.stopping) {
    std::int64_t grace = 30;
    if (const core::Value* g = pod.get({"metadata", "deletionGracePeriodSeconds"});
        g && g->is_int()) {
      grace = g->as_int();
    }
    run.stopping = true;
    double stop_s = std::min<double>(1.0, static_cast<double>(grace));
    run.stop_due = wall_now + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(stop_s));
  }
  if (wall_now < run.stop_due) {
    act.requeue = run.stop_due;
    return act;
  }
  std::string now = now_seconds();
  PodStage before = run.stage;
  stop_pod(run, 143, "", now);
  count_transition(before, run);
  run.status_unsent = true;
  act.status = pod_status(run, now, pod.get({"status"}));
  act.final_delete = true;
  return act;
}

// The pod's node is rebooting: running containers die (137); Never pods fail, the others
// start over once the node is back.
FleetKubelet::PodAction FleetKubelet::node_down_locked(PodRun& run, const core::Value& pod) {
  PodAction act;
  bool anything_running = false;
  for (const auto* list : {&run.init, &run.main}) {
    for (const auto& c : *list) anything_running = anything_running || c.running();
  }
  if (run.terminal() || !anything_running) return act;
  std::string now = now_seconds();
  std::string message = "node " + run.node + " rebooted";
  PodStage before = run.stage;
  if (run.restart_policy == "Never") {
    stop_pod(run, 137, message, now);
    count_transition(before, run);
  } else {
    kill_for_restart(run, message, now);
  }
  run.status_unsent = true;
  act.status = pod_status(run, now, pod.get({"status"}));
  return act;
}

FleetKubelet::PodAction FleetKubelet::decide_pod_locked(const std::string& key,
                                                        const core::Value& pod) {
  std::string node(pod.get_string({"spec", "nodeName"}));
  if (model_.find(node) == nullptr) return {};  // not a simulated node
  std::string uid(kube::uid_of(pod));
  auto it = runs_.find(key);
  if (it != runs_.end() && it->second.uid != uid) {
    runs_.erase(it);
    it = runs_.end();
  }
  bool down = model_.is_down(node);
  if (it == runs_.end()) return admit_pod_locked(key, pod, down);
  PodRun& run = it->second;
  if (pod.get({"metadata", "deletionTimestamp"}) != nullptr) {
    PodAction act = delete_pod_locked(run, pod, down);
    if (act.final_delete && act.status.is_null()) runs_.erase(it);
    return act;
  }
  if (down) return node_down_locked(run, pod);
  std::string now = now_seconds();
  PodStage before = run.stage;
  PodAction act;
  if (advance_pod(run, Clock::now(), now, pod_env_locked()) || run.status_unsent) {
    act.status = pod_status(run, now, pod.get({"status"}));
    run.status_unsent = true;  // until the patch succeeds
  }
  count_transition(before, run);
  act.requeue = next_due(run);
  return act;
}

controller::Result FleetKubelet::sync_pod(const std::string& key) {
  kube::ObjectPtr obj = pod_cache_->get(key);
  if (!obj) {  // deleted: forget its run
    std::lock_guard lock(mu_);
    runs_.erase(key);
    return {};
  }
  const core::Value& pod = *obj;
  PodAction act;
  {
    std::lock_guard lock(mu_);
    act = decide_pod_locked(key, pod);
  }
  std::string uid(kube::uid_of(pod));
  if (!act.status.is_null()) {
    core::Value patch;
    patch["metadata"]["uid"] = uid;
    patch["status"] = std::move(act.status);
    try {
      client_.patch(kube::resources::pods(), kube::namespace_of(pod), kube::name_of(pod),
                    kube::PatchType::Merge, patch, "status");
    } catch (const kube::ApiError& e) {
      if (!is_not_found(e)) throw;
      std::lock_guard lock(mu_);
      runs_.erase(key);
      return {};
    }
    std::lock_guard lock(mu_);
    if (auto it = runs_.find(key); it != runs_.end() && it->second.uid == uid) {
      it->second.status_unsent = false;
    }
  }
  if (act.final_delete) {
    kube::DeleteOptions del;
    del.grace_period_seconds = 0;
    del.precondition_uid = uid;
    try {
      client_.remove(kube::resources::pods(), kube::namespace_of(pod), kube::name_of(pod), del);
    } catch (const kube::ApiError& e) {
      if (!is_not_found(e) && !e.is(kube::Reason::Conflict)) throw;
    }
    std::lock_guard lock(mu_);
    runs_.erase(key);
    return {};
  }
  // At the pod's next container transition (5 ms late rather than early).
  if (act.requeue) return {.requeue_after = until(*act.requeue) + std::chrono::milliseconds(5)};
  return {};
}

}  // namespace gpufleet::sim
