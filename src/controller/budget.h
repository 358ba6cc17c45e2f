// The cluster's DisruptionBudget (kube/api/disruption.h) in the controller runtime:
//  - BudgetReader: how hostpkg and sentinel read the singleton `default`. A GET, remembered
//    for a second, rather than a watched cache: a cache of a resource whose CRD is not
//    installed never syncs and would keep the whole Manager from starting, and both
//    controllers must keep working (on their own settings) where the CRD is absent;
//  - the `budget` controller (`gpufleet controller --controllers=budget`): the one writer of
//    the object's status (who holds which nodes out, counts total and per domain, the
//    conditions Exhausted and DomainsAtLimit), and the admission check of its spec.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "api/resources.h"
#include "kube/api/disruption.h"
#include "kube/api/resource.h"

namespace gpufleet::kube {
class Client;
}  // namespace gpufleet::kube

namespace gpufleet::controller {

class Manager;
struct Context;

using api::disruption_budgets;  // the DisruptionBudget CRD (api/resources.h)

// Thread-safe; any number of workers may call get().
class BudgetReader {
 public:
  struct Snapshot {
    bool present = false;  // the object exists and its spec is valid
    kube::DisruptionBudgetSpec spec;
    std::string error;  // the object exists but cannot be read: the reason
  };
  explicit BudgetReader(kube::Client& client,
                        std::chrono::milliseconds ttl = std::chrono::milliseconds(1000));
  // The object as read at most `ttl` ago. A failed GET (not a 404) throws: callers retry
  // rather than act without their budget.
  Snapshot get();

 private:
  kube::Client& client_;
  std::chrono::milliseconds ttl_;
  std::mutex mu_;
  std::optional<std::chrono::steady_clock::time_point> read_at_;
  Snapshot last_;
};

// Adds the budget controller (status writer and admission check) to `manager`.
void setup_budget(Manager& manager, const Context& context);

}  // namespace gpufleet::controller
