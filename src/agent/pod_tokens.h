// Each simulated node's agent authenticates as that node's agent pod would, so the API server's
// identity policy (deploy/admission/agent-node-identity.yaml) judges simulated agents exactly as
// real ones. On a real node the kubelet projects a ServiceAccount token bound to the agent pod
// into the pod's filesystem; the token names the node. In simulation one process runs every
// node's agent, so this class plays the kubelet's part for each node: it finds the node's agent
// pod (a label selector in a namespace, e.g. the chart's DaemonSet pods), asks the API server for
// a token bound to that pod (TokenRequest), writes it to the node's token file, and renews it
// before it expires. Every node's client shares one connection pool (kube::Client's identity
// constructor); only the Authorization header differs.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/agent.h"
#include "kube/client.h"

namespace gpufleet::agent {

struct PodTokenOptions {
  std::string namespace_;                  // where the agent pods run
  std::string label_selector;              // which pods are agent pods
  std::int64_t expiration_seconds = 3600;  // asked of the API server (it may shorten it)
  // Where a node's token is written (read back by that node's client on every request).
  std::function<std::filesystem::path(const std::string& node)> token_file;
};

// Parses --sim-agent-pods NAMESPACE/SELECTOR ("gpufleet-system/app.kubernetes.io/name=agent":
// the namespace ends at the first '/'). Throws core::InvalidInput naming the flag and the fix.
PodTokenOptions parse_pod_token_flag(const std::string& value);

class PodTokens {
 public:
  PodTokens(kube::Client& base, PodTokenOptions options);
  PodTokens(const PodTokens&) = delete;
  PodTokens& operator=(const PodTokens&) = delete;
  ~PodTokens();

  // One LIST of the agent pods, then a TokenRequest for every node of `nodes` whose token is
  // missing, bound to a pod that is gone, or past 80 % of its life (as the kubelet renews).
  // Returns how many tokens were written. A failed TokenRequest is logged and tried again on
  // the next refresh; the node keeps its previous token meanwhile.
  std::size_t refresh(const std::set<std::string>& nodes);

  // The node's client. Throws std::runtime_error while the node has no agent pod (no identity
  // yet): the delivery fails, the journal keeps the records, and the agent retries.
  kube::Client& client_for(const NodeIdentity& node);

  // Nodes with a token now.
  [[nodiscard]] std::size_t with_identity() const;

 private:
  struct NodeToken {
    std::string pod_uid;
    std::chrono::system_clock::time_point issued{};
    std::chrono::system_clock::time_point renew_at{};
    std::unique_ptr<kube::Client> client;
  };

  kube::Client& base_;
  PodTokenOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, NodeToken, std::less<>> nodes_;
};

}  // namespace gpufleet::agent
