#include "kube/leader_election.h"

#include <thread>

#include "core/errors.h"
#include "kube/api/objects.h"
#include "kube/credentials.h"
#include "kube/rate_limit.h"

namespace gpufleet::kube {

using Steady = std::chrono::steady_clock;

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config, LeaderCallbacks callbacks)
    : client_(client), config_(std::move(config)), callbacks_(std::move(callbacks)) {
  if (config_.lease_name.empty() || config_.lease_namespace.empty() || config_.identity.empty()) {
    throw core::InvalidInput(
        "leader election: lease_name, lease_namespace and identity must all be set");
  }
  if (!(config_.lease_duration > config_.renew_deadline &&
        config_.renew_deadline > config_.retry_period &&
        config_.retry_period > std::chrono::milliseconds(0))) {
    throw core::InvalidInput(
        "leader election: need lease_duration > renew_deadline > retry_period > 0 (got " +
        std::to_string(config_.lease_duration.count()) + "ms, " +
        std::to_string(config_.renew_deadline.count()) + "ms, " +
        std::to_string(config_.retry_period.count()) + "ms)");
  }
  if (!callbacks_.on_started_leading) {
    throw core::InvalidInput("leader election: on_started_leading is required");
  }
}

bool LeaderElector::is_leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

std::string LeaderElector::observed_leader() const {
  std::lock_guard lock(mu_);
  return observed_holder_;
}

bool LeaderElector::sleep(std::stop_token& stop, std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, stop, d, [] { return false; }) && !stop.stop_requested();
}

// One attempt; true when this process holds the lease afterwards.
bool LeaderElector::try_acquire_or_renew() {
  auto now = std::chrono::system_clock::now();
  std::string now_text = format_micro_time(now);
  auto duration_s = std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration);
  std::int64_t lease_seconds = std::max<std::int64_t>(1, duration_s.count());
  auto leases = resources::leases();
  std::optional<core::Value> lease;
  try {
    lease = client_.try_get(leases, config_.lease_namespace, config_.lease_name);
  } catch (const std::exception&) {
    return false;
  }
  if (!lease) {
    core::Value fresh;
    fresh["apiVersion"] = "coordination.k8s.io/v1";
    fresh["kind"] = "Lease";
    fresh["metadata"]["name"] = config_.lease_name;
    fresh["metadata"]["namespace"] = config_.lease_namespace;
    fresh["spec"]["holderIdentity"] = config_.identity;
    fresh["spec"]["leaseDurationSeconds"] = lease_seconds;
    fresh["spec"]["acquireTime"] = now_text;
    fresh["spec"]["renewTime"] = now_text;
    fresh["spec"]["leaseTransitions"] = 0;
    try {
      client_.create(leases, fresh);
    } catch (const std::exception&) {
      return false;  // someone else created it first, or the server is unreachable
    }
    std::string changed_to;
    {
      std::lock_guard lock(mu_);
      if (observed_holder_ != config_.identity) changed_to = config_.identity;
      observed_holder_ = config_.identity;
      observed_at_ = Steady::now();
    }
    if (!changed_to.empty() && callbacks_.on_new_leader) callbacks_.on_new_leader(changed_to);
    return true;
  }

  std::string holder(lease::holder_identity(*lease));
  std::string record = holder + "|" + std::string(lease->get_string({"spec", "renewTime"})) + "|" +
                       std::string(resource_version_of(*lease));
  std::string changed_to;
  bool expired;
  {
    std::lock_guard lock(mu_);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = Steady::now();
    }
    if (holder != observed_holder_) {
      observed_holder_ = holder;
      changed_to = holder;
    }
    std::int64_t held_for = lease::duration_seconds(*lease);
    if (held_for <= 0) held_for = lease_seconds;
    expired = Steady::now() >= observed_at_ + std::chrono::seconds(held_for);
  }
  if (!changed_to.empty() && callbacks_.on_new_leader) callbacks_.on_new_leader(changed_to);
  if (!holder.empty() && holder != config_.identity && !expired) return false;

  core::Value updated = *lease;
  updated["spec"]["holderIdentity"] = config_.identity;
  updated["spec"]["leaseDurationSeconds"] = lease_seconds;
  updated["spec"]["renewTime"] = now_text;
  if (holder != config_.identity) {
    updated["spec"]["acquireTime"] = now_text;
    updated["spec"]["leaseTransitions"] = lease::transitions(*lease) + 1;
  }
  try {
    core::Value stored = client_.update(leases, updated);
    std::lock_guard lock(mu_);
    observed_record_ =
        config_.identity + "|" + now_text + "|" + std::string(resource_version_of(stored));
    observed_at_ = Steady::now();
    if (observed_holder_ != config_.identity) {
      observed_holder_ = config_.identity;
      changed_to = config_.identity;
    } else {
      changed_to.clear();
    }
  } catch (const std::exception&) {
    return false;  // Conflict: another candidate won the race; or the server is unreachable
  }
  if (!changed_to.empty() && callbacks_.on_new_leader) callbacks_.on_new_leader(changed_to);
  return true;
}

void LeaderElector::release() {
  try {
    auto lease = client_.try_get(resources::leases(), config_.lease_namespace, config_.lease_name);
    if (!lease || lease::holder_identity(*lease) != config_.identity) return;
    core::Value released = *lease;
    released["spec"]["holderIdentity"] = nullptr;
    released["spec"]["leaseDurationSeconds"] = 1;
    released["spec"]["renewTime"] = format_micro_time(std::chrono::system_clock::now());
    client_.update(resources::leases(), released);
  } catch (const std::exception&) {
    // The lease expires on its own.
  }
}

void LeaderElector::run(std::stop_token stop) {
  // Campaign.
  for (;;) {
    if (stop.stop_requested()) return;
    if (try_acquire_or_renew()) break;
    auto jittered = std::chrono::duration_cast<std::chrono::milliseconds>(
        config_.retry_period * (1.0 + 0.2 * random_fraction()));
    if (!sleep(stop, jittered)) return;
  }
  Steady::time_point last_renew = Steady::now();
  {
    std::lock_guard lock(mu_);
    leader_ = true;
  }
  std::stop_source work_stop;
  std::thread work([this, token = work_stop.get_token()] { callbacks_.on_started_leading(token); });

  // Renew on one thread; the watchdog below stops the work when renewals stall for
  // renew_deadline, even while a renew request hangs.
  std::mutex renew_mu;
  std::condition_variable_any renew_cv;
  bool lost = false;
  std::stop_source renew_stop;
  std::thread renewer([&, token = renew_stop.get_token()] {
    for (;;) {
      {
        std::unique_lock lock(renew_mu);
        if (renew_cv.wait_for(lock, token, config_.retry_period, [&] { return lost; })) return;
        if (token.stop_requested()) return;
      }
      Steady::time_point attempt = Steady::now();
      bool ok = try_acquire_or_renew();
      std::lock_guard lock(renew_mu);
      if (lost) return;  // too late: the work has been stopped, do not extend the lease
      if (ok) last_renew = attempt;
      renew_cv.notify_all();
    }
  });
  {
    std::unique_lock lock(renew_mu);
    while (!stop.stop_requested()) {
      Steady::time_point deadline = last_renew + config_.renew_deadline;
      if (Steady::now() >= deadline) {
        lost = true;
        break;
      }
      renew_cv.wait_until(lock, stop, deadline,
                          [&] { return Steady::now() >= last_renew + config_.renew_deadline; });
    }
    if (!stop.stop_requested()) lost = true;
    renew_cv.notify_all();
  }
  // Stop the work first: once the renew deadline passed, another process may lead soon.
  work_stop.request_stop();
  work.join();
  {
    std::lock_guard lock(mu_);
    leader_ = false;
  }
  renew_stop.request_stop();
  renew_cv.notify_all();
  renewer.join();
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
  if (stop.stop_requested() && config_.release_on_stop) release();
}

}  // namespace gpufleet::kube
