#include "controller/disruption_reservation.h"

#include <random>
#include <thread>

#include "core/value.h"
#include "kube/api/objects.h"
#include "kube/api/resource.h"
#include "kube/client.h"
#include "kube/errors.h"

namespace gpufleet::controller {
namespace {

std::vector<kube::DisruptionClaim> claims_of(const core::Value& lease) {
  const core::Value* a =
      lease.get({"metadata", "annotations", std::string_view(kube::kDisruptionClaimsAnnotation)});
  if (a == nullptr || !a->is_string()) return {};
  return kube::parse_disruption_claims(a->as_string());
}

// Spreads contenders that met a 409 together, so they do not meet again at once.
void back_off(int attempt) {
  thread_local std::mt19937 gen{std::random_device{}()};
  std::uniform_int_distribution<int> ms(1, 5 << std::min(attempt, 4));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms(gen)));
}

}  // namespace

std::int64_t claims_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

DisruptionReservation::DisruptionReservation(kube::Client& client, Options options)
    : client_(client), options_(std::move(options)) {}

std::vector<kube::DisruptionClaim> DisruptionReservation::read() {
  std::optional<core::Value> lease = client_.try_get(kube::resources::leases(), options_.namespace_,
                                                     std::string(kube::kDisruptionClaimsName));
  return lease ? claims_of(*lease) : std::vector<kube::DisruptionClaim>{};
}

DisruptionReservation::Outcome DisruptionReservation::reserve(
    const std::vector<kube::ClaimRequest>& requests, const std::vector<kube::CountedNode>& counted,
    const kube::ClaimLimits& limits, const kube::ClaimedNodeLookup& lookup) {
  Outcome out;
  {
    // Refused on what was read a moment ago: still refused (claims only come and go through
    // this object; a freed node is seen on a later look).
    std::lock_guard lock(mu_);
    if (read_at_ && std::chrono::steady_clock::now() - *read_at_ < options_.remember) {
      kube::ClaimDecision d = kube::decide_claims(last_, requests, counted, limits, lookup,
                                                  claims_now(), options_.grace_seconds);
      bool any = false;
      for (bool g : d.granted) any = any || g;
      if (!any) {
        out.granted = std::move(d.granted);
        out.why = std::move(d.why);
        return out;
      }
    }
  }
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    std::optional<core::Value> lease = client_.try_get(
        kube::resources::leases(), options_.namespace_, std::string(kube::kDisruptionClaimsName));
    std::vector<kube::DisruptionClaim> current =
        lease ? claims_of(*lease) : std::vector<kube::DisruptionClaim>{};
    const auto read_at = std::chrono::steady_clock::now();
    kube::ClaimDecision d = kube::decide_claims(current, requests, counted, limits, lookup,
                                                claims_now(), options_.grace_seconds);
    out.granted = d.granted;
    out.why = d.why;
    if (!d.changed) {
      std::lock_guard lock(mu_);
      last_ = std::move(current);
      read_at_ = read_at;
      return out;
    }
    const std::string text = kube::disruption_claims_text(d.claims);
    try {
      if (lease) {
        (*lease)["metadata"]["annotations"][kube::kDisruptionClaimsAnnotation] = text;
        client_.update(kube::resources::leases(), *lease, "gpufleet-disruption-budget");
      } else {
        core::Value l;
        l["apiVersion"] = "coordination.k8s.io/v1";
        l["kind"] = "Lease";
        l["metadata"]["name"] = std::string(kube::kDisruptionClaimsName);
        l["metadata"]["namespace"] = options_.namespace_;
        l["metadata"]["labels"]["app.kubernetes.io/part-of"] = "gpufleet";
        l["metadata"]["annotations"][kube::kDisruptionClaimsAnnotation] = text;
        l["spec"] = core::Value::map();
        client_.create(kube::resources::leases(), l, "gpufleet-disruption-budget");
      }
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::Conflict) && !e.is(kube::Reason::AlreadyExists)) throw;
      ++out.conflicts;
      back_off(attempt);
      continue;
    }
    ++out.writes;
    std::lock_guard lock(mu_);
    last_ = std::move(d.claims);
    read_at_ = read_at;
    return out;
  }
  // Lost every race: nobody goes on this look (the caller looks again).
  for (std::size_t i = 0; i < out.granted.size(); ++i) {
    out.granted[i] = false;
    out.why[i] = "the claims object changed under " + std::to_string(out.conflicts) +
                 " writes in a row; looking again";
  }
  return out;
}

}  // namespace gpufleet::controller
