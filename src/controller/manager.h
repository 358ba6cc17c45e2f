// The Manager runs a process's controllers: it owns the caches they share (one informer per
// resource shape, however many controllers watch it), elects a leader on a Lease (every
// replica keeps its caches warm and its queues filled; only the leader's workers reconcile;
// a lost lease stops reconciling at once), serves /metrics, /healthz and /readyz (ready once
// every cache has synced), and shuts down gracefully (drains the queues, then releases the
// lease so a successor takes over at once).
//
//   controller::Manager mgr(client, {.name = "gpufleet-certify", .leader_election = true});
//   auto& sets = mgr.cache(kube::resources::config_maps());
//   mgr.controller("echo")
//       .for_resource(kube::resources::config_maps(), "ConfigMap")
//       .complete(std::make_shared<EchoReconciler>(client, sets));
//   mgr.run(stop);   // blocks until stop is requested or leadership is lost
//
// Set everything up (caches, indexes, controllers) before run(); run() once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "controller/admission.h"
#include "controller/cache.h"
#include "controller/clock.h"
#include "controller/controller.h"
#include "controller/mapping.h"
#include "controller/predicates.h"
#include "core/metrics.h"
#include "kube/client.h"
#include "kube/events.h"

namespace gpufleet::core {
class HttpServer;
}

namespace gpufleet::controller {

struct ManagerOptions {
  // Names the lease (unless lease_name is set) and the logs.
  std::string name = "gpufleet-controller";
  bool leader_election = false;
  std::string lease_namespace = "default";
  std::string lease_name;  // "" = name
  std::string identity;    // "" = hostname + "-" + pid
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  // "host:port" for /metrics, /healthz and /readyz (see core::parse_bind_address); "" = none.
  std::string metrics_address = "127.0.0.1:8080";
  core::metrics::Registry* registry = &core::metrics::default_registry();
  // How long in-flight and queued keys may take to finish on shutdown before their
  // reconciles are asked to stop.
  std::chrono::milliseconds shutdown_grace{30000};
  // "host:port" of the validating admission webhook (HTTPS, POST /validate), served on every
  // replica whether it leads or not; "" = none. Needs the two PEM files below (the chart
  // mounts them from a Secret as tls.crt and tls.key).
  std::string webhook_address;
  std::string webhook_cert_file;
  std::string webhook_key_file;
  // How often the two files are compared with the pair in use (a rotated pair is served
  // without a restart).
  std::chrono::milliseconds webhook_reload_period{10000};
  // The time the reconcilers see (clock.h); not owned, must outlive the Manager. null = the
  // system clock. Tests pass a FakeClock. Leader election and the queues keep real time.
  Clock* clock = nullptr;
};

// Where a controller's events come from and how they are filtered.
struct SourceOptions {
  CacheOptions cache;
  std::vector<Predicate> predicates;
};

class Manager;

// Builds a Controller and wires its watches into the Manager's shared caches.
class ControllerBuilder {
 public:
  // The primary resource: each event queues the object's own key. `kind` ("ConfigMap")
  // identifies it in the ownerReferences of the objects owns() watches.
  ControllerBuilder& for_resource(kube::ResourceId primary, std::string kind,
                                  SourceOptions options = {});
  // Children: each event queues the key of the child's controlling owner of the primary kind.
  ControllerBuilder& owns(kube::ResourceId child, SourceOptions options = {});
  // Anything else: each event queues the keys `map` returns (for an update, the keys of the
  // old and the new object, so an object that stops matching still notifies its old owner).
  ControllerBuilder& watches(kube::ResourceId resource, MapFunc map, SourceOptions options = {});
  // A predicate every source's events must pass.
  ControllerBuilder& with_event_filter(Predicate p);
  ControllerBuilder& max_concurrent_reconciles(int n);
  ControllerBuilder& queue_options(kube::WorkQueueOptions q);
  // Registers the controller with the Manager. Throws core::InvalidInput when for_resource()
  // was not called or the name is taken.
  Controller& complete(std::shared_ptr<Reconciler> reconciler);

 private:
  friend class Manager;
  ControllerBuilder(Manager& m, std::string name) : manager_(m), name_(std::move(name)) {}

  struct Source {
    kube::ResourceId resource;
    MapFunc map;
    SourceOptions options;
    bool owned = false;  // map is filled in complete(), once the primary kind is known
  };
  Manager& manager_;
  std::string name_;
  std::optional<kube::ResourceId> primary_;
  std::string primary_kind_;
  std::vector<Source> sources_;
  std::vector<Predicate> filters_;
  ControllerOptions options_;
};

class Manager {
 public:
  // `client` must outlive the Manager. Throws core::InvalidInput for bad options.
  Manager(kube::Client& client, ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  [[nodiscard]] kube::Client& client() noexcept { return client_; }
  [[nodiscard]] const ManagerOptions& options() const noexcept { return options_; }
  [[nodiscard]] const std::string& identity() const noexcept { return options_.identity; }
  // What reconcilers read the time from (ManagerOptions::clock, else the system clock).
  [[nodiscard]] Clock& clock() const noexcept { return *clock_; }

  // The shared cache of `resource` with these options (created on first use).
  Cache& cache(const kube::ResourceId& resource, const CacheOptions& options = {});
  ControllerBuilder controller(std::string name) {
    return ControllerBuilder(*this, std::move(name));
  }
  // Validators of the kinds this process's controllers own (admission.h); add them before run().
  [[nodiscard]] AdmissionHandler& admission() noexcept { return admission_; }
  // An event recorder reporting as "gpufleet.io/<controller>" from this process's identity.
  kube::EventRecorder& event_recorder(const std::string& controller);

  enum class Exit { Stopped, LostLeadership };
  // Runs until `stop` is requested (graceful: drains, releases the lease) or leadership is
  // lost (reconciles stopped at once). Once only. Throws core::InvalidInput when the metrics
  // address cannot be bound.
  Exit run(std::stop_token stop);

  [[nodiscard]] bool is_leader() const noexcept { return leader_.load(); }
  // Every cache has synced.
  [[nodiscard]] bool caches_synced() const;
  // The metrics server's port once run() has bound it (0 before, or without a server).
  [[nodiscard]] std::uint16_t metrics_port() const noexcept { return metrics_port_.load(); }
  // The webhook server's port once run() has bound it (0 before, or without a webhook).
  [[nodiscard]] std::uint16_t webhook_port() const noexcept { return webhook_port_.load(); }
  [[nodiscard]] std::vector<Controller*> controllers() const;

 private:
  friend class ControllerBuilder;
  Controller& add_controller(std::unique_ptr<Controller> c);
  void lead(std::stop_token lead, std::stop_token shutdown);
  bool wait_for_caches(std::stop_token stop);
  void serve_webhook(std::string cert_pem, std::string key_pem);
  void reload_webhook_certificate(std::stop_token stop, std::string cert_pem, std::string key_pem);
  std::string debug_caches() const;

  kube::Client& client_;
  ManagerOptions options_;
  Clock* clock_;
  core::metrics::Gauge::Handle leader_gauge_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Cache>> caches_;  // by Cache::sharing_key
  std::vector<std::unique_ptr<Controller>> controllers_;
  std::map<std::string, std::unique_ptr<kube::EventRecorder>> recorders_;
  std::unique_ptr<core::HttpServer> server_;
  AdmissionHandler admission_;
  std::unique_ptr<core::HttpServer> webhook_server_;
  std::atomic<std::uint16_t> webhook_port_{0};
  std::atomic<bool> running_{false};
  std::atomic<bool> leader_{false};
  std::atomic<std::uint16_t> metrics_port_{0};
};

}  // namespace gpufleet::controller
