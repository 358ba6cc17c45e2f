// The disruption budget's claims against the API (the logic is kube/api/disruption_claims.h):
// one Lease, kube::kDisruptionClaimsName, in the controllers' namespace, whose annotation lists
// the claims. reserve() reads it, decides with the caller's view of the nodes, and writes it
// back with the resourceVersion read as precondition; a 409 (another controller, another
// replica, another worker claimed meanwhile) reads and decides again, a bounded number of
// times. Used by hostpkg (a node start) and sentinel (a reboot, reset or new-node
// validation): the one implementation of the lock between them.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kube/api/disruption_claims.h"

namespace gpufleet::kube {
class Client;
}  // namespace gpufleet::kube

namespace gpufleet::controller {

// Thread-safe; any number of workers may call reserve().
class DisruptionReservation {
 public:
  struct Options {
    std::string namespace_ = "default";  // the controllers' namespace (the chart's release)
    std::int64_t grace_seconds = kube::kDefaultClaimGraceSeconds;
    int max_attempts = 8;  // reads and writes per reserve() before giving up for this look
    // A refusal decided on claims read this recently needs no new read: a waiting incident
    // or set looks every few seconds, and most looks find the budget still full.
    std::chrono::milliseconds remember{1000};
  };
  DisruptionReservation(kube::Client& client, Options options);

  struct Outcome {
    std::vector<bool> granted;     // per request
    std::vector<std::string> why;  // per request: why not
    int writes = 0;                // object writes made (0 or 1 unless conflicts)
    int conflicts = 0;             // 409s met
  };
  // `counted`: the nodes out in the caller's view; `lookup`: its cache, for deciding whether a
  // claim still lives. API failures throw (kube::ApiError and the like): the caller retries
  // rather than act without a claim. A malformed annotation throws core::InvalidInput naming
  // the fix.
  Outcome reserve(const std::vector<kube::ClaimRequest>& requests,
                  const std::vector<kube::CountedNode>& counted, const kube::ClaimLimits& limits,
                  const kube::ClaimedNodeLookup& lookup);
  // The claims as stored now (a GET).
  std::vector<kube::DisruptionClaim> read();
  [[nodiscard]] const Options& options() const noexcept { return options_; }

 private:
  kube::Client& client_;
  Options options_;
  std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> read_at_;
  std::vector<kube::DisruptionClaim> last_;
};

// Unix seconds now (the claims' clock).
std::int64_t claims_now();

}  // namespace gpufleet::controller
