#include "agent/pod_tokens.h"

#include <stdexcept>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/time.h"
#include "kube/api/names.h"
#include "kube/api/resource.h"

namespace gpufleet::agent {

namespace {

using SysClock = std::chrono::system_clock;

struct AgentPod {
  std::string name;
  std::string uid;
  std::string service_account;
};

}  // namespace

PodTokenOptions parse_pod_token_flag(const std::string& value) {
  const auto slash = value.find('/');
  const std::string fix =
      ": give NAMESPACE/SELECTOR, the namespace of the agent pods and a label selector "
      "matching them (e.g. gpufleet-system/app.kubernetes.io/component=agent)";
  if (slash == std::string::npos || slash == 0 || slash + 1 == value.size())
    throw core::InvalidInput("--sim-agent-pods value \"" + value + "\"" + fix);
  PodTokenOptions o;
  o.namespace_ = value.substr(0, slash);
  o.label_selector = value.substr(slash + 1);
  if (std::string why = kube::check_dns_label(o.namespace_); !why.empty())
    throw core::InvalidInput("--sim-agent-pods value \"" + value + "\": namespace \"" +
                             o.namespace_ + "\" " + why + fix);
  return o;
}

PodTokens::PodTokens(kube::Client& base, PodTokenOptions options)
    : base_(base), options_(std::move(options)) {
  if (!options_.token_file) throw std::logic_error("PodTokens: no token_file function");
  if (options_.expiration_seconds < 600)
    throw core::InvalidInput("token expiration " + std::to_string(options_.expiration_seconds) +
                             "s is below the API server's minimum of 600s");
}

PodTokens::~PodTokens() = default;

std::size_t PodTokens::refresh(const std::set<std::string>& nodes) {
  kube::ListOptions list;
  list.label_selector = options_.label_selector;
  list.resource_version = "0";  // the watch cache: this runs every few seconds
  std::map<std::string, AgentPod, std::less<>> pods;  // by node
  for (const core::Value& p :
       base_.list(kube::resources::pods(), options_.namespace_, list).items) {
    const std::string node(p.get_string({"spec", "nodeName"}));
    if (node.empty() || !nodes.contains(node)) continue;
    if (p.get({"metadata", "deletionTimestamp"}) != nullptr) continue;
    std::string sa(p.get_string({"spec", "serviceAccountName"}));
    pods[node] = {std::string(p.get_string({"metadata", "name"})),
                  std::string(p.get_string({"metadata", "uid"})), sa.empty() ? "default" : sa};
  }

  const auto now = SysClock::now();
  std::size_t written = 0;
  for (const auto& [node, pod] : pods) {
    {
      std::lock_guard lock(mu_);
      auto it = nodes_.find(node);
      if (it != nodes_.end() && it->second.pod_uid == pod.uid && now < it->second.renew_at)
        continue;
    }
    core::Value request = core::Value::map();
    request["apiVersion"] = "authentication.k8s.io/v1";
    request["kind"] = "TokenRequest";
    request["spec"]["expirationSeconds"] = options_.expiration_seconds;
    core::Value& ref = request["spec"]["boundObjectRef"];
    ref["apiVersion"] = "v1";
    ref["kind"] = "Pod";
    ref["name"] = pod.name;
    ref["uid"] = pod.uid;
    core::Value answer;
    try {
      answer = base_.create_subresource(kube::resources::service_accounts(), options_.namespace_,
                                        pod.service_account, "token", request);
    } catch (const std::exception& e) {
      core::log::warn(
          "agent: no token for the node's agent pod yet",
          {{"node", node}, {"pod", options_.namespace_ + "/" + pod.name}, {"error", e.what()}});
      continue;
    }
    const std::string token(answer.get_string({"status", "token"}));
    auto expires =
        core::Timestamp::try_parse_rfc3339(answer.get_string({"status", "expirationTimestamp"}));
    if (token.empty()) {
      core::log::warn("agent: TokenRequest answered without status.token",
                      {{"node", node}, {"pod", options_.namespace_ + "/" + pod.name}});
      continue;
    }
    const auto expiry = expires ? expires->to_time_point()
                                : now + std::chrono::seconds(options_.expiration_seconds);
    const std::filesystem::path file = options_.token_file(node);
    std::filesystem::create_directories(file.parent_path());
    // Renamed into place: the node's client re-reads the file when it changes, never half.
    core::write_file_atomic(file.string(), token);
    std::filesystem::permissions(
        file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    ++written;
    std::lock_guard lock(mu_);
    NodeToken& t = nodes_[node];
    t.pod_uid = pod.uid;
    t.issued = now;
    t.renew_at = now + (expiry - now) * 4 / 5;
    if (!t.client) {
      kube::ClientConfig identity;
      identity.token_file = file.string();
      identity.source = "token of agent pod " + options_.namespace_ + "/" + pod.name;
      t.client = std::make_unique<kube::Client>(base_, identity);
    }
  }
  return written;
}

kube::Client& PodTokens::client_for(const NodeIdentity& node) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node.node_name);
  if (it == nodes_.end() || !it->second.client)
    throw std::runtime_error("node " + node.node_name + " has no agent pod yet (pods in " +
                             options_.namespace_ + " matching " + options_.label_selector +
                             "): its records wait in its journal");
  return *it->second.client;
}

std::size_t PodTokens::with_identity() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

}  // namespace gpufleet::agent
