// The Remediating phase's decision (observe -> decide -> act): the node reconciler observes
// the incident's action record, the Node, NodeHealth's agent report and the replacement
// provider into plain facts; decide_remediation says what happens next; the reconciler acts
// (status writes, requests, budget claims). Pure: the clock is an argument, so every branch
// is unit-tested without an API server (tests/sentinel/remediation_step_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sentinel/replacement.h"

namespace gpufleet::sentinel {

// What the node reconciler saw for the incident's action.
struct RemediationFacts {
  // The action in force: the spec's, or the stronger one it escalated to (status.action).
  std::string action;
  std::int64_t attempt = 0;       // status.action.attempt; 0: nothing requested yet
  std::int64_t requested_ms = 0;  // status.action.requestedAt
  // status.action.finishedAt: when the agent's finished gpu-reset was first seen (0: not yet).
  std::int64_t finished_ms = 0;
  std::string boot_before;  // status.action.bootID: the node's boot id at the request
  std::string boot_now;     // the Node's status.nodeInfo.bootID
  std::string uid_before;   // status.action.nodeUID (a replacement)
  std::string uid_now;      // the Node's uid
  bool node_ready = false;
  bool recovered = false;                 // every entity of the incident is healthy again
  std::vector<std::string> still_faulty;  // the incident's entities that are not
  // The provider's word on a replacement (action replace); nullopt: no such provider.
  std::optional<ReplacementStatus> replacement;
  // The agent's report on this very request (NodeHealth status.remediation naming this
  // incident, action and request number): its state ("" when there is none) and its error.
  std::string agent_state;
  std::string agent_detail;
};

// The policy's spec.remediation, as the decision needs it.
struct RemediationLimits {
  bool enabled = true;
  std::int64_t max_attempts = 2;
  std::int64_t timeout_s = 900;
  std::int64_t settle_s = 60;
  bool replace_when_reboot_fails = false;
  std::string provider;  // spec.remediation.replacement.provider ("" : none)
  bool provider_known = false;
};

struct RemediationStep {
  enum class Kind {
    Skip,         // no action to take: validate the node
    Request,      // request `action` attempt `attempt` (the first, or the next after a failure)
    Escalate,     // the attempts are used up: request the stronger `action`, attempt 1
    Done,         // the action worked: validate (a replacement is cordoned first)
    MarkSettled,  // record that the agent finished its reset now; look again after `wait_ms`
    Settle,       // the reset is done, its GPUs get time to report healthy: look in `wait_ms`
    Fail,         // used up with nothing stronger: the incident fails, the node stays out
    AskAgain,     // still pending: repeat the (idempotent) request in case it was lost
  };
  Kind kind = Kind::AskAgain;
  std::string action;          // Request / Escalate: what to request
  std::int64_t attempt = 0;    // Request: its attempt number
  std::string from;            // Escalate: the action whose attempts were used up
  std::string reason;          // Escalate / Fail: ActionFailed | FaultPersisted | TimedOut
  std::string why;             // "<action> attempt N: <what failed>" (Request after a failure,
                               // Escalate, Fail); empty for a first request
  std::string message;         // Done: the result; Fail: the incident's final message
  std::int64_t wait_ms = 0;    // MarkSettled / Settle
  bool claims_budget = false;  // Request / Escalate: the action must first get room in the
                               // node's DisruptionBudget domain (a first request, a reboot)
};

RemediationStep decide_remediation(const RemediationFacts& facts, const RemediationLimits& limits,
                                   std::int64_t now_ms);

}  // namespace gpufleet::sentinel
