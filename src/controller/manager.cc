#include "controller/manager.h"

#include <unistd.h>

#include <condition_variable>
#include <set>
#include <thread>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "kube/leader_election.h"

namespace gpufleet::controller {
namespace {

std::string default_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "gpufleet") + "-" + std::to_string(::getpid());
}

// Waits until `stop` is requested.
void wait_for_stop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
}

// A PEM file of the webhook's certificate or key; names the file and the fix when unreadable.
std::string read_pem(const std::string& path, std::string_view what) {
  std::string text;
  try {
    text = core::read_file(path);
  } catch (const std::exception& e) {
    throw core::InvalidInput("cannot read the webhook's " + std::string(what) + " " + path + ": " +
                             e.what() + " (--webhook-cert-dir must hold tls.crt and tls.key)");
  }
  if (text.find("-----BEGIN ") == std::string::npos) {
    throw core::InvalidInput("the webhook's " + std::string(what) + " " + path +
                             " is not PEM (no -----BEGIN line)");
  }
  return text;
}

}  // namespace

// ---- ControllerBuilder ----

ControllerBuilder& ControllerBuilder::for_resource(kube::ResourceId primary, std::string kind,
                                                   SourceOptions options) {
  primary_ = primary;
  primary_kind_ = std::move(kind);
  sources_.push_back({std::move(primary), mapping::to_self(), std::move(options), false});
  return *this;
}

ControllerBuilder& ControllerBuilder::owns(kube::ResourceId child, SourceOptions options) {
  sources_.push_back({std::move(child), nullptr, std::move(options), true});
  return *this;
}

ControllerBuilder& ControllerBuilder::watches(kube::ResourceId resource, MapFunc map,
                                              SourceOptions options) {
  sources_.push_back({std::move(resource), std::move(map), std::move(options), false});
  return *this;
}

ControllerBuilder& ControllerBuilder::with_event_filter(Predicate p) {
  filters_.push_back(std::move(p));
  return *this;
}

ControllerBuilder& ControllerBuilder::max_concurrent_reconciles(int n) {
  options_.max_concurrent_reconciles = n;
  return *this;
}

ControllerBuilder& ControllerBuilder::queue_options(kube::WorkQueueOptions q) {
  options_.queue = q;
  return *this;
}

Controller& ControllerBuilder::complete(std::shared_ptr<Reconciler> reconciler) {
  if (!primary_) {
    throw core::InvalidInput("controller " + name_ +
                             ": no primary resource; call for_resource() before complete()");
  }
  if (primary_kind_.empty()) {
    throw core::InvalidInput("controller " + name_ + ": for_resource() needs the kind (\"Node\")");
  }
  auto owned = std::make_unique<Controller>(name_, std::move(reconciler), options_,
                                            *manager_.options_.registry);
  Controller& c = manager_.add_controller(std::move(owned));
  for (Source& s : sources_) {
    if (s.owned) {
      s.map = mapping::to_controller_owner(primary_->group, primary_kind_, primary_->namespaced);
    }
    Cache& cache = manager_.cache(s.resource, s.options.cache);
    std::vector<Predicate> preds = filters_;
    for (auto& p : s.options.predicates) preds.push_back(p);
    auto route = [&c, map = s.map, preds](const WatchEvent& ev) {
      if (!passes(preds, ev)) return;
      std::set<Request> keys;
      for (Request& r : map(ev.obj)) keys.insert(std::move(r));
      if (ev.old_obj != nullptr) {
        for (Request& r : map(*ev.old_obj)) keys.insert(std::move(r));
      }
      for (const Request& r : keys) c.enqueue(r);
    };
    kube::EventHandlers h;
    h.on_add = [route](const core::Value& obj) { route({WatchEvent::Type::Add, nullptr, obj}); };
    h.on_update = [route](const core::Value& old_obj, const core::Value& obj) {
      route({WatchEvent::Type::Update, &old_obj, obj});
    };
    h.on_delete = [route](const core::Value& obj, bool) {
      route({WatchEvent::Type::Delete, nullptr, obj});
    };
    cache.add_handlers(std::move(h));
  }
  return c;
}

// ---- Manager ----

Manager::Manager(kube::Client& client, ManagerOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &system_clock()),
      leader_gauge_(options_.registry
                        ->gauge("gpufleet_controller_leader",
                                "1 while this process leads (always 1 without leader election).",
                                {"manager"})
                        .with({options_.name})),
      admission_(options_.registry) {
  if (options_.identity.empty()) options_.identity = default_identity();
  if (options_.lease_name.empty()) options_.lease_name = options_.name;
  if (options_.registry == nullptr) {
    throw core::InvalidInput("manager " + options_.name + ": registry must not be null");
  }
  core::metrics::register_process_metrics(*options_.registry);
  if (!options_.metrics_address.empty()) core::parse_bind_address(options_.metrics_address);
  if (!options_.webhook_address.empty()) {
    core::parse_bind_address(options_.webhook_address);
    if (options_.webhook_cert_file.empty() || options_.webhook_key_file.empty()) {
      throw core::InvalidInput("manager " + options_.name + ": the webhook on " +
                               options_.webhook_address +
                               " needs a certificate and a key (--webhook-cert-dir with tls.crt "
                               "and tls.key); the API server calls webhooks over HTTPS only");
    }
  }
}

Manager::~Manager() {
  // Informers call into controllers: stop them first.
  for (auto& [key, cache] : caches_) cache->stop();
  for (auto& c : controllers_) c->stop_now();
  if (server_) server_->stop();
  if (webhook_server_) webhook_server_->stop();
  // Reconcilers may own threads (sentinel's quarantine follow-ups) that use the recorders,
  // caches and client: they go while those still exist.
  controllers_.clear();
}

Cache& Manager::cache(const kube::ResourceId& resource, const CacheOptions& options) {
  std::lock_guard lock(mu_);
  std::string key = Cache::sharing_key(resource, options);
  auto it = caches_.find(key);
  if (it != caches_.end()) return *it->second;
  if (running_) {
    throw core::InvalidInput("cache of " + resource.qualified_name() +
                             " requested after the manager started; set caches up before run()");
  }
  auto c = std::make_unique<Cache>(client_, resource, options);
  Cache& ref = *c;
  caches_.emplace(key, std::move(c));
  return ref;
}

Controller& Manager::add_controller(std::unique_ptr<Controller> c) {
  std::lock_guard lock(mu_);
  if (running_) {
    throw core::InvalidInput("controller " + c->name() + " added after the manager started");
  }
  for (const auto& other : controllers_) {
    if (other->name() == c->name())
      throw core::InvalidInput("controller name " + c->name() + " is used twice; names are unique");
  }
  controllers_.push_back(std::move(c));
  return *controllers_.back();
}

kube::EventRecorder& Manager::event_recorder(const std::string& controller) {
  std::lock_guard lock(mu_);
  auto& r = recorders_[controller];
  if (!r) {
    r = std::make_unique<kube::EventRecorder>(
        client_, kube::EventSource{"gpufleet.io/" + controller, options_.identity});
  }
  return *r;
}

bool Manager::caches_synced() const {
  std::lock_guard lock(mu_);
  for (const auto& [key, cache] : caches_)
    if (!cache->has_synced()) return false;
  return true;
}

std::vector<Controller*> Manager::controllers() const {
  std::lock_guard lock(mu_);
  std::vector<Controller*> out;
  for (const auto& c : controllers_) out.push_back(c.get());
  return out;
}

std::string Manager::debug_caches() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [key, cache] : caches_) {
    out += cache->resource().qualified_name() + " namespace=" +
           (cache->options().namespace_.empty() ? "*" : cache->options().namespace_) +
           " objects=" + std::to_string(cache->size()) +
           " synced=" + (cache->has_synced() ? "true" : "false");
    std::string err = cache->informer().last_error();
    if (!err.empty()) out += " error=\"" + err + "\"";
    out += "\n";
  }
  // The transport under every cache and write: a stalled request shows here before it times out.
  const kube::Client::TransportStats t = client_.transport_stats();
  out += "transport requests=" + std::to_string(t.requests) +
         " in_flight=" + std::to_string(t.in_flight) +
         " oldest_request_ms=" + std::to_string(t.oldest_request_ms) +
         " slow_requests=" + std::to_string(t.slow_requests) +
         " connections=" + std::to_string(t.connections) + "\n";
  return out;
}

bool Manager::wait_for_caches(std::stop_token stop) {
  while (!stop.stop_requested()) {
    if (caches_synced()) return true;
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, std::chrono::milliseconds(50), [] { return false; });
  }
  return false;
}

void Manager::lead(std::stop_token lead, std::stop_token shutdown) {
  // Reconcile only from synced caches: an unsynced cache would make existing objects look
  // absent.
  if (!wait_for_caches(lead)) return;
  leader_ = true;
  leader_gauge_.set(1);
  core::log::info("leading; starting controllers",
                  {{"manager", options_.name}, {"identity", options_.identity}});
  for (Controller* c : controllers()) c->start();
  wait_for_stop(lead);
  if (shutdown.stop_requested()) {
    for (Controller* c : controllers()) c->drain(options_.shutdown_grace);
  } else {
    // The lease is lost (or about to be): another replica may lead already.
    core::log::warn("leadership lost; stopping reconciles", {{"manager", options_.name}});
    for (Controller* c : controllers()) c->stop_now();
  }
  leader_ = false;
  leader_gauge_.set(0);
}

void Manager::serve_webhook(std::string cert_pem, std::string key_pem) {
  const core::BindAddress bind = core::parse_bind_address(options_.webhook_address);
  core::HttpServerOptions so;
  so.address = bind.address;
  // A restart for a new certificate keeps the port the first start bound (":0" in tests).
  so.port = webhook_port_.load() != 0 ? webhook_port_.load() : bind.port;
  so.registry = nullptr;  // metrics are on the metrics address
  so.tls_cert_pem = std::move(cert_pem);
  so.tls_key_pem = std::move(key_pem);
  so.post_handlers["/validate"] = [this](std::string_view body) { return admission_.serve(body); };
  webhook_server_ = std::make_unique<core::HttpServer>(std::move(so));
  webhook_port_ = webhook_server_->port();
  std::string kinds;
  for (const auto& k : admission_.kinds()) kinds += (kinds.empty() ? "" : ",") + k;
  core::log::info("serving the admission webhook",
                  {{"url", webhook_server_->url() + "/validate"}, {"kinds", kinds}});
}

// A rotated certificate (the Secret's files swapped by the kubelet, or cert-manager renewing)
// is picked up without a restart: the files are compared every period, and a changed pair
// that loads replaces the server; one that does not is logged and the old pair kept.
void Manager::reload_webhook_certificate(std::stop_token stop, std::string cert_pem,
                                         std::string key_pem) {
  std::mutex mu;
  std::condition_variable_any cv;
  while (true) {
    {
      std::unique_lock lock(mu);
      if (cv.wait_for(lock, stop, options_.webhook_reload_period, [] { return false; }) ||
          stop.stop_requested())
        return;
    }
    std::string cert, key;
    try {
      cert = read_pem(options_.webhook_cert_file, "certificate");
      key = read_pem(options_.webhook_key_file, "private key");
    } catch (const std::exception& e) {
      core::log::error("webhook certificate unreadable; keeping the one in use",
                       {{"error", e.what()}});
      continue;
    }
    if (cert == cert_pem && key == key_pem) continue;
    webhook_server_->stop();
    try {
      serve_webhook(cert, key);
      cert_pem = std::move(cert);
      key_pem = std::move(key);
      core::log::info("webhook certificate reloaded", {{"file", options_.webhook_cert_file}});
    } catch (const std::exception& e) {
      core::log::error("new webhook certificate refused; keeping the one in use",
                       {{"error", e.what()}});
      serve_webhook(cert_pem, key_pem);
    }
  }
}

Manager::Exit Manager::run(std::stop_token stop) {
  if (running_.exchange(true)) throw core::InvalidInput("manager " + options_.name + " runs once");
  leader_gauge_.set(0);
  {
    std::lock_guard lock(mu_);
    for (auto& [key, cache] : caches_) cache->start();
  }
  if (!options_.metrics_address.empty()) {
    core::BindAddress bind = core::parse_bind_address(options_.metrics_address);
    core::HttpServerOptions so;
    so.address = bind.address;
    so.port = bind.port;
    so.registry = options_.registry;
    so.readyz = [this] {
      return caches_synced() ? core::HealthStatus::healthy()
                             : core::HealthStatus::unhealthy("caches not synced");
    };
    so.handlers["/debug/caches"] = [this] {
      return core::HttpResponse{200, "text/plain; charset=utf-8", debug_caches()};
    };
    server_ = std::make_unique<core::HttpServer>(std::move(so));
    metrics_port_ = server_->port();
    core::log::info("serving metrics and health", {{"url", server_->url()}});
  }
  std::jthread reload_certificate;
  if (!options_.webhook_address.empty()) {
    std::string cert = read_pem(options_.webhook_cert_file, "certificate");
    std::string key = read_pem(options_.webhook_key_file, "private key");
    serve_webhook(cert, key);
    reload_certificate = std::jthread(
        [this, cert, key](std::stop_token st) { reload_webhook_certificate(st, cert, key); });
  }

  Exit exit = Exit::Stopped;
  if (!options_.leader_election) {
    // Without an election this process leads until it is stopped.
    std::stop_source leading;
    std::stop_callback forward(stop, [&] { leading.request_stop(); });
    lead(leading.get_token(), stop);
  } else {
    kube::LeaderElectionConfig cfg;
    cfg.lease_namespace = options_.lease_namespace;
    cfg.lease_name = options_.lease_name;
    cfg.identity = options_.identity;
    cfg.lease_duration = options_.lease_duration;
    cfg.renew_deadline = options_.renew_deadline;
    cfg.retry_period = options_.retry_period;
    kube::LeaderCallbacks cb;
    cb.on_started_leading = [this, stop](std::stop_token lead_token) { lead(lead_token, stop); };
    cb.on_new_leader = [this](const std::string& id) {
      core::log::info("leader observed", {{"manager", options_.name}, {"leader", id}});
    };
    kube::LeaderElector elector(client_, cfg, cb);
    elector.run(stop);
    if (!stop.stop_requested()) exit = Exit::LostLeadership;
  }
  for (auto& c : controllers()) c->stop_now();
  {
    std::lock_guard lock(mu_);
    for (auto& [key, cache] : caches_) cache->stop();
  }
  if (server_) server_->stop();
  reload_certificate = {};  // joins before the server it replaces is stopped
  if (webhook_server_) webhook_server_->stop();
  return exit;
}

}  // namespace gpufleet::controller
