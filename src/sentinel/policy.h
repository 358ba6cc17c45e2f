// A SentinelPolicy's spec as the controller uses it (deploy/crds/sentinelpolicy.yaml): rules,
// breaker, drain, remediation and validation settings with their defaults. Kubernetes-free;
// the API server checks the schema, this checks again (a policy written before the schema
// changed, or a test) and names field, value and fix.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/value.h"
#include "sentinel/breaker.h"
#include "sentinel/rules.h"

namespace gpufleet::sentinel {

enum class DrainMode { Evict, AllowCompletion, Delete };
std::string_view drain_mode_name(DrainMode m) noexcept;

struct DrainRule {
  DrainMode mode = DrainMode::Evict;
  std::int64_t timeout_s = 0;  // AllowCompletion: wait this long; Delete: graceful period
  std::map<std::string, std::string> match_labels;
  [[nodiscard]] bool matches(const core::Value& pod) const;
};

struct DrainPolicy {
  bool enabled = true;
  DrainMode default_mode = DrainMode::Evict;
  std::int64_t deadline_s = 600;             // graceful -> forced
  std::int64_t terminating_timeout_s = 120;  // stuck Terminating -> force delete
  // How long a training job that opted into the checkpoint contract may take to checkpoint
  // before its gang is drained (kube/api/job_disruption.h); 0: no job is waited for.
  std::int64_t checkpoint_timeout_s = 300;
  std::vector<std::string> system_namespaces = {"kube-system", "kube-public", "kube-node-lease"};
  std::vector<DrainRule> modes;
};

struct RemediationPolicy {
  bool enabled = true;
  std::string default_action = "reboot";  // none | wait | gpu-reset | reboot | replace
  int max_attempts = 2;  // per action (a replacement after failed reboots has its own)
  std::int64_t timeout_s = 600;
  // A GPU reset the agent reported done whose GPU is still faulty this long after is a failed
  // attempt (the monitors had time to see the GPU recover); its attempts used up, a reboot
  // follows.
  std::int64_t settle_s = 30;
  // spec.remediation.replacement: the ReplacementProvider a `replace` goes through ("" when
  // none), and whether a reboot whose attempts are used up escalates to a replacement.
  std::string provider;
  bool replace_when_reboot_fails = false;
};

struct ValidationPolicy {
  bool enabled = true;
  bool new_nodes = true;
  std::vector<std::string> categories = {"diagnostics/dcgm-r2"};
  std::int64_t deadline_s = 3600;
};

struct Policy {
  // spec.nodeSelector (a metav1.LabelSelector; null: every node) and spec.priority: several
  // policies may select a node; the highest priority, then the first name, governs it.
  core::Value node_selector;
  std::int64_t priority = 0;
  std::vector<RuleSpec> rules;
  std::uint64_t cost_limit = 100'000;
  BreakerPolicy breaker;
  DrainPolicy drain;
  RemediationPolicy remediation;
  ValidationPolicy validation;

  // From a SentinelPolicy's spec. Throws core::InvalidInput naming the field ("spec.drain.
  // deadlineSeconds"), the value and the fix.
  static Policy from_spec(const core::Value& spec);

  // Whether any path of this policy can ask for a replacement.
  [[nodiscard]] bool may_replace() const;
  // What admission adds to from_spec: the provider named is one this controller has. Throws
  // core::InvalidInput naming the field, the value and the providers there are.
  void check_providers(const std::vector<std::string>& known) const;
};

}  // namespace gpufleet::sentinel
