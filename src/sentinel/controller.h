// The `sentinel` controller (docs/sentinel.md): NodeHealth + Node + SentinelPolicy in, per-node
// incidents (Remediation objects) out. Two reconcilers on one Manager:
//  - `sentinel-policy` (key: a SentinelPolicy; policy_reconciler.h) compiles each followed
//    policy's rules, owns its circuit breaker (restored from the policy's status on start, saved
//    there on every admission), counts the GPU nodes it governs, applies the
//    reset verb (annotation sentinel.gpufleet.io/reset-breaker) and the quiet-period reset, and
//    reports the breaker as a condition, an event and metrics;
//  - `sentinel` (key: a Node) evaluates the rules over the node's faulty entities, quarantines
//    (cordon through kube/api/cordon.h with owner "sentinel", taints) when the breaker admits
//    it, and drives the node's incident: Detected → Quarantined → Draining → Remediating →
//    Validating → Released | Failed | Cancelled. Every step is written to the Remediation's
//    status (compare-and-swap on resourceVersion) before it is acted on, so a controller
//    killed at any point resumes where it was and never repeats a finished step.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/resources.h"
#include "kube/api/resource.h"
#include "sentinel/replacement.h"

namespace gpufleet::controller {
class Manager;
}  // namespace gpufleet::controller
namespace gpufleet::kube {
class Client;
}  // namespace gpufleet::kube

namespace gpufleet::sentinel {

// The API resources sentinel reads and writes: sentinel::api::remediations() and the rest
// are gpufleet::api's (api/resources.h).
namespace api = gpufleet::api;

inline constexpr std::string_view kResetBreakerAnnotation = "sentinel.gpufleet.io/reset-breaker";
inline constexpr std::string_view kValidatedAnnotation = "sentinel.gpufleet.io/validated";
inline constexpr std::string_view kNodeLabel = "sentinel.gpufleet.io/node";
// The SentinelPolicy an incident was opened under (annotation, and label when the name fits,
// on the Remediation): kubectl get remediations -l sentinel.gpufleet.io/policy=P.
inline constexpr std::string_view kPolicyLabel = "sentinel.gpufleet.io/policy";

// One remediation the incident asks of a node.
struct RemediationRequest {
  std::string node;
  std::string incident;
  int attempt = 0;
  std::string action;             // "reboot" or "gpu-reset"
  std::vector<std::string> gpus;  // gpu-reset: the UUIDs of the incident's GPUs still faulty;
                                  // empty: the whole node (a GPU known only by PCI address)
};

// Carries out a remediation action on a node. request() is called on every look while the
// action is pending, so it must be idempotent per (incident, attempt): the same pair asks once.
// `attempt` is the incident's request number (status.action.request): it rises over all of the
// incident's actions (a reboot after a failed GPU reset is 2), never repeats for another one.
// Completion is observed in the API (a new boot id, the entity healthy), never reported here.
class Remediator {
 public:
  virtual ~Remediator() = default;
  virtual void request(const RemediationRequest& r) = 0;
};

// Asks the node's agent through the Node annotation sentinel.gpufleet.io/remediation-request
// ({"incident", "attempt", "action"}); the agent acknowledges by doing it.
std::unique_ptr<Remediator> make_annotation_remediator(kube::Client& client);

struct SentinelOptions {
  // The SentinelPolicies followed, by name; empty: every one. Each governs the nodes its
  // spec.nodeSelector selects (the highest spec.priority, then the first name, when several
  // select a node).
  std::vector<std::string> policies;
  std::unique_ptr<Remediator> remediator;
  // Node replacement providers by the name a policy gives (spec.remediation.replacement.
  // provider); a policy naming another is refused at admission.
  std::map<std::string, std::shared_ptr<ReplacementProvider>> providers;
  int workers = 8;
};

// Adds both reconcilers to `manager`.
void setup_sentinel(controller::Manager& manager, SentinelOptions options);

}  // namespace gpufleet::sentinel
