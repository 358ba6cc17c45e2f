#include "controller/controller.h"

#include "core/errors.h"
#include "core/log.h"
#include "kube/api/names.h"

namespace gpufleet::controller {
namespace {

namespace metrics = core::metrics;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

metrics::Counter& reconcile_total(metrics::Registry& r) {
  return r.counter("gpufleet_controller_reconcile_total",
                   "Reconcile calls by controller and result (success, error, requeue, "
                   "requeue_after).",
                   {"controller", "result"});
}

}  // namespace

Controller::Controller(std::string name, std::shared_ptr<Reconciler> reconciler,
                       ControllerOptions options, metrics::Registry& registry)
    : name_(std::move(name)),
      reconciler_(std::move(reconciler)),
      options_(options),
      queue_(options.queue),
      ok_(reconcile_total(registry).with({name_, "success"})),
      err_result_(reconcile_total(registry).with({name_, "error"})),
      requeue_(reconcile_total(registry).with({name_, "requeue"})),
      requeue_after_(reconcile_total(registry).with({name_, "requeue_after"})),
      errors_(registry
                  .counter("gpufleet_controller_reconcile_errors_total",
                           "Reconcile calls that failed (threw).", {"controller"})
                  .with({name_})),
      retries_(registry
                   .counter("gpufleet_controller_workqueue_retries_total",
                            "Keys re-queued with backoff (after an error or a requeue).",
                            {"controller"})
                   .with({name_})),
      duration_(registry
                    .histogram("gpufleet_controller_reconcile_duration_seconds",
                               "Time spent in reconcile calls.",
                               metrics::exponential_buckets(0.0005, 2, 16), {"controller"})
                    .with({name_})),
      latency_(registry
                   .histogram("gpufleet_controller_workqueue_latency_seconds",
                              "Time from an event queuing a key to a worker taking it.",
                              metrics::exponential_buckets(0.0005, 2, 16), {"controller"})
                   .with({name_})),
      depth_(registry
                 .gauge("gpufleet_controller_workqueue_depth",
                        "Keys queued and ready to be reconciled.", {"controller"})
                 .with({name_})) {
  if (std::string why = kube::check_dns_label(name_); !why.empty()) {
    throw core::InvalidInput("controller name \"" + name_ + "\": " + why +
                             "; use a short lower-case name such as \"hostpkg\"");
  }
  if (reconciler_ == nullptr) throw core::InvalidInput("controller " + name_ + ": no reconciler");
  if (options_.max_concurrent_reconciles < 1) {
    throw core::InvalidInput("controller " + name_ + ": max_concurrent_reconciles " +
                             std::to_string(options_.max_concurrent_reconciles) +
                             " must be at least 1");
  }
}

Controller::~Controller() { stop_now(); }

void Controller::enqueue(const Request& request) {
  std::string key = request.key();
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    queued_at_.try_emplace(key, Clock::now());
  }
  queue_.add(key);
  depth_.set(static_cast<double>(queue_.size()));
}

void Controller::enqueue_after(const Request& request, std::chrono::milliseconds delay) {
  queue_.add_after(request.key(), delay);
}

void Controller::start() {
  std::lock_guard lock(mu_);
  if (started_ || stopped_) return;
  started_ = true;
  for (int i = 0; i < options_.max_concurrent_reconciles; ++i) {
    ++running_workers_;
    workers_.emplace_back([this] { worker(); });
  }
  core::log::info("controller started",
                  {{"controller", name_}, {"workers", options_.max_concurrent_reconciles}});
}

void Controller::worker() {
  while (auto key = queue_.get()) {
    if (stop_.stop_requested()) {  // leadership lost: start nothing new
      queue_.done(*key);
      break;
    }
    depth_.set(static_cast<double>(queue_.size()));
    std::optional<Clock::time_point> at;
    {
      std::lock_guard lock(mu_);
      if (auto it = queued_at_.find(*key); it != queued_at_.end()) {
        at = it->second;
        queued_at_.erase(it);
      }
    }
    if (at) latency_.observe(seconds_since(*at));
    process(*key);
    queue_.done(*key);
  }
  std::lock_guard lock(mu_);
  --running_workers_;
  workers_done_.notify_all();
}

void Controller::process(const std::string& key) {
  Request request = Request::from_key(key);
  auto t0 = Clock::now();
  try {
    Result r = reconciler_->reconcile(request, stop_.get_token());
    duration_.observe(seconds_since(t0));
    if (r.requeue_after.count() > 0) {
      queue_.forget(key);
      queue_.add_after(key, r.requeue_after);
      requeue_after_.inc();
    } else if (r.requeue) {
      queue_.add_rate_limited(key);
      retries_.inc();
      retries_n_.fetch_add(1);
      requeue_.inc();
    } else {
      queue_.forget(key);
      ok_.inc();
    }
  } catch (const std::exception& e) {
    duration_.observe(seconds_since(t0));
    errors_.inc();
    err_result_.inc();
    errors_n_.fetch_add(1);
    if (!stop_.stop_requested()) {
      queue_.add_rate_limited(key);
      retries_.inc();
      retries_n_.fetch_add(1);
    }
    core::log::warn("reconcile failed", {{"controller", name_},
                                         {"key", key},
                                         {"retries", queue_.num_requeues(key)},
                                         {"error", e.what()}});
  }
  reconciles_.fetch_add(1);
}

void Controller::stop_now() {
  stop_.request_stop();
  queue_.shut_down();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    workers.swap(workers_);
    queued_at_.clear();
  }
  for (auto& t : workers) t.join();
  depth_.set(0);
}

void Controller::drain(std::chrono::milliseconds grace) {
  queue_.shut_down();  // workers finish the keys already queued, then get() ends
  {
    std::unique_lock lock(mu_);
    stopped_ = true;
    if (!workers_done_.wait_for(lock, grace, [&] { return running_workers_ == 0; })) {
      core::log::warn("shutdown grace period over; stopping reconciles",
                      {{"controller", name_}, {"grace", grace}});
    }
  }
  stop_now();
}

Controller::Stats Controller::stats() const {
  Stats s;
  s.reconciles = reconciles_.load();
  s.errors = errors_n_.load();
  s.retries = retries_n_.load();
  s.depth = queue_.size();
  std::lock_guard lock(mu_);
  s.active_workers = running_workers_;
  return s;
}

}  // namespace gpufleet::controller
