// A Controller runs one Reconciler: a de-duplicating, rate-limited work queue of keys fed by
// its watches, and up to max_concurrent_reconciles workers, never two on the same key. A
// failing key is retried with per-key exponential backoff; a success resets it. Metrics per
// controller (label `controller`, one series each, so bounded):
//   gpufleet_controller_reconcile_total{controller,result}   success|error|requeue|requeue_after
//   gpufleet_controller_reconcile_errors_total{controller}
//   gpufleet_controller_reconcile_duration_seconds{controller}  (histogram)
//   gpufleet_controller_workqueue_depth{controller}            keys ready to be handed out
//   gpufleet_controller_workqueue_latency_seconds{controller}  event -> reconcile start
//   gpufleet_controller_workqueue_retries_total{controller}    rate-limited re-queues
//
// Usually built by Manager::controller(); constructible alone (tests, benches).
// One-shot: start() once, then stop_now() or drain(); a stopped controller stays stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "controller/reconciler.h"
#include "core/metrics.h"
#include "kube/work_queue.h"

namespace gpufleet::controller {

struct ControllerOptions {
  int max_concurrent_reconciles = 1;
  kube::WorkQueueOptions queue;
};

class Controller {
 public:
  // Throws core::InvalidInput for an empty or non-DNS-label name or max_concurrent < 1.
  Controller(std::string name, std::shared_ptr<Reconciler> reconciler, ControllerOptions options,
             core::metrics::Registry& registry = core::metrics::default_registry());
  ~Controller();  // stop_now()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  // Thread-safe; keys queued before start() wait for it (all replicas fill their queues
  // from their warm caches, only the leader starts its workers).
  void enqueue(const Request& request);
  void enqueue_after(const Request& request, std::chrono::milliseconds delay);

  // Starts the workers.
  void start();
  // Leadership lost: in-flight reconciles see their stop token requested, no key is started
  // any more; returns once every worker has returned.
  void stop_now();
  // Graceful shutdown: stops taking new events, lets the workers finish the keys already
  // queued, then stop_now() once `grace` has passed. Returns when the workers have returned.
  void drain(std::chrono::milliseconds grace);

  struct Stats {
    std::uint64_t reconciles = 0;  // finished reconcile calls
    std::uint64_t errors = 0;
    std::uint64_t retries = 0;
    std::size_t depth = 0;
    int active_workers = 0;
  };
  [[nodiscard]] Stats stats() const;

 private:
  void worker();
  void process(const std::string& key);

  std::string name_;
  std::shared_ptr<Reconciler> reconciler_;
  ControllerOptions options_;
  kube::WorkQueue queue_;
  std::stop_source stop_;  // requested by stop_now(): in-flight reconciles must return

  core::metrics::Counter::Handle ok_, err_result_, requeue_, requeue_after_, errors_, retries_;
  core::metrics::Histogram::Handle duration_, latency_;
  core::metrics::Gauge::Handle depth_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable workers_done_;
  // When each queued key was first queued by an event (for the latency histogram); bounded by
  // the queue's size since an entry leaves when its key is handed out.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> queued_at_;
  std::vector<std::thread> workers_;
  int running_workers_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<std::uint64_t> reconciles_{0}, errors_n_{0}, retries_n_{0};
};

}  // namespace gpufleet::controller
