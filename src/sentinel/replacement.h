// Node replacement (docs/sentinel.md, "Node replacement"): when a policy's action is `replace`
// (or a reboot's attempts are used up and spec.remediation.replacement.whenRebootFails is
// set), sentinel asks a ReplacementProvider for a new machine under the node's name. The
// provider is chosen by name in the policy (spec.remediation.replacement.provider); the
// controller registers the ones it has, and admission refuses a name it does not know.
//
// The contract, as for the other actions: request() is called on every look while the
// attempt is pending and must be idempotent per (incident, attempt); poll() says how the
// provider's side goes. Completion is observed in the API as well: the Node under that name is
// a new object (another uid) and Ready. The new Node is cordoned by sentinel and validated by
// certify (a ValidationRequest) before it takes work.
#pragma once

#include <string>

namespace gpufleet::sentinel {

struct ReplacementRequest {
  std::string node;      // the Node's name (the replacement registers under the same name)
  std::string incident;  // the Remediation: the idempotency key with `attempt`
  int attempt = 1;
  std::string node_uid;  // the uid of the Node being replaced
};

struct ReplacementStatus {
  enum class State { Pending, Done, Failed };
  State state = State::Pending;
  std::string message;  // what the provider did, or why it failed
};

// Thread-safe: sentinel's workers call it for different nodes at once.
class ReplacementProvider {
 public:
  virtual ~ReplacementProvider() = default;
  virtual void request(const ReplacementRequest& r) = 0;
  [[nodiscard]] virtual ReplacementStatus poll(const ReplacementRequest& r) = 0;
};

}  // namespace gpufleet::sentinel
