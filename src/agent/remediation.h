// The agent side of sentinel's remediation (docs/sentinel.md, "Remediation actions"): sentinel
// asks for an action by writing the Node annotation sentinel.gpufleet.io/remediation-request =
// {"incident": "<Remediation name>", "attempt": N, "action": "reboot" | "gpu-reset"}; the
// node's agent carries it out once per (incident, attempt) and sentinel observes the outcome in
// the API (a new boot id, the GPU healthy again), never through a reply.
//
//  - parse_remediation_request() reads the annotation strictly;
//  - RemediationLedger is the durable record, in the node's state directory, of the requests
//    already taken: a request is recorded (temp file, fsync, rename, fsync of the directory)
//    BEFORE it is acted on, so neither an agent restart nor the reboot it asked for repeats it,
//    and an attempt older than the newest recorded one for its incident is never run;
//  - NodeRemediation is the decision for one node: parse, gate, record, journal, execute;
//  - Executor is what an action is: host commands (HostCommandExecutor, fork/exec without a
//    shell, with a timeout) on a real node, the simulator's control inbox in simulation;
//  - RemediationService runs the decisions of every node of the process on one thread of its
//    own (an action may take minutes; it must not hold up monitors or delivery), fed by one
//    Node informer (watch_node_requests) for one node or for all of them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/log_bundle.h"
#include "agent/plugin.h"
#include "core/subprocess.h"
#include "core/value.h"

namespace gpufleet::kube {
class Client;
class Informer;
}  // namespace gpufleet::kube

namespace gpufleet::agent {

// The protocol with sentinel (sentinel/controller.cc and sentinel/quarantine.h write these; the
// agent may not include sentinel, so the names are repeated here).
inline constexpr std::string_view kRemediationRequestAnnotation =
    "sentinel.gpufleet.io/remediation-request";
inline constexpr std::string_view kQuarantineAnnotation = "sentinel.gpufleet.io/quarantine";

// Journal record kinds. Payload {"incident", "attempt", "action", "message"} and, for a failure,
// "error" (the exit status and the command's output tail) — or, for a rejected request, the
// annotation text and the error naming the field.
inline constexpr std::string_view kRemediationStartedKind = "remediation.started";
inline constexpr std::string_view kRemediationSucceededKind = "remediation.succeeded";
inline constexpr std::string_view kRemediationFailedKind = "remediation.failed";
inline constexpr std::string_view kRemediationRejectedKind = "remediation.rejected";
// The log bundle collected before an incident's first action (agent/log_bundle.h): payload
// {"incident", "attempt", "action", "state": "Collected" | "Failed", "path", "sha256", "bytes",
// "uncompressedBytes", "sections", "truncated", "errors", "error", "message"}.
inline constexpr std::string_view kRemediationBundleKind = "remediation.bundle";

struct RemediationRequest {
  std::string incident;
  std::int64_t attempt = 0;
  std::string action;  // "reboot" or "gpu-reset"
  // gpu-reset only: the UUIDs of the faulty GPUs (from the incident's entities); empty: the
  // whole node (sentinel could name none, e.g. an entity known only by its PCI address).
  std::vector<std::string> gpus;
};

inline constexpr std::size_t kMaxRequestGpus = 16;

// Strict: a JSON object with the keys incident (non-empty string), attempt (integer >= 1),
// action ("reboot" or "gpu-reset") and, for a gpu-reset only, gpus (at most 16 GPU UUIDs
// "GPU-..."). Throws core::InvalidInput naming the field, the value and the fix.
RemediationRequest parse_remediation_request(std::string_view text);

// ---- running host commands ----

// What running a host command gave (core/subprocess.h).
using CommandResult = core::SubprocessResult;

// argv (no shell) in a process group of its own, stdin from /dev/null, stdout and stderr
// together of which the last `tail_bytes` are kept. At the timeout the whole group gets
// SIGKILL.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t tail_bytes = 2048);

// Splits a command line into argv on blanks; '...' and "..." group words (no escapes, no
// variables, no shell). Throws core::InvalidInput for an unclosed quote or an empty command.
std::vector<std::string> split_command(std::string_view text, std::string_view flag);

// ---- executors ----

struct ExecResult {
  bool ok = false;
  std::string message;  // what was done, or why it failed
};

// Carries out an action on a node. execute() may block (up to its own timeout); it runs on the
// RemediationService's thread, one action at a time.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual ExecResult execute(const NodeIdentity& node, const RemediationRequest& request) = 0;
};

struct HostCommands {
  // The defaults run the host's own tools from the agent's container: they need the pod to
  // share the host's PID namespace and to be privileged (nsenter into PID 1's namespaces).
  std::vector<std::string> reboot = {"nsenter", "-t", "1",  "-m",        "-u",    "-i",
                                     "-n",      "-p", "--", "systemctl", "reboot"};
  // Run once per GPU the request names, with `-i <uuid>` appended; once with no GPU when it
  // names none (every GPU of the node: the node is drained).
  std::vector<std::string> gpu_reset = {"nsenter", "-t", "1",  "-m",         "-u", "-i",
                                        "-n",      "-p", "--", "nvidia-smi", "-r"};
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class HostCommandExecutor final : public Executor {
 public:
  explicit HostCommandExecutor(HostCommands commands) : commands_(std::move(commands)) {}
  ExecResult execute(const NodeIdentity& node, const RemediationRequest& request) override;

 private:
  HostCommands commands_;
};

// ---- the durable ledger ----

// <dir>/requests.json: {"incidents": {"<incident>": {"attempt": N, "action": "...", "time":
// "..."}}, "rejected": "<the last annotation text rejected>"}. Bounded: the 256 most recently
// recorded incidents are kept.
class RemediationLedger {
 public:
  explicit RemediationLedger(std::filesystem::path dir);  // reads the file if there is one

  enum class Verdict { New, AlreadyTaken, Stale };
  // AlreadyTaken: this (incident, attempt) was recorded; Stale: a later attempt was.
  [[nodiscard]] Verdict check(const RemediationRequest& r) const;
  // The newest attempt recorded for the incident (0: none).
  [[nodiscard]] std::int64_t attempt_of(const std::string& incident) const;
  // Durable on return (temp file + fsync + rename + fsync of the directory). Throws on I/O error.
  void record(const RemediationRequest& r);
  [[nodiscard]] bool rejected_before(std::string_view text) const { return rejected_ == text; }
  void record_rejected(std::string_view text);

  static constexpr std::size_t kMaxIncidents = 256;

 private:
  void save() const;
  struct Entry {
    std::int64_t attempt = 0;
    std::string action;
    std::string time;
    std::uint64_t seq = 0;  // recording order, for the bound
  };
  std::filesystem::path dir_;
  std::map<std::string, Entry> incidents_;
  std::string rejected_;
  std::uint64_t seq_ = 0;
};

// ---- one node's decisions ----

// What a request led to (for tests and logs).
enum class Outcome {
  None,            // no request on the node
  Rejected,        // malformed request: journalled (once) and nothing done
  NotQuarantined,  // the node's quarantine does not name the incident: a stale request, ignored
  AlreadyTaken,    // recorded before: nothing done
  Stale,           // older than the newest attempt taken for the incident: nothing done
  Disabled,        // --remediation=off: journalled once per request, nothing done
  Succeeded,       // executed, the executor reported success
  Failed,          // executed, the executor reported failure (journalled)
};
std::string_view outcome_name(Outcome o);

using Journaller = std::function<void(std::string_view kind, const core::Value& payload)>;

class NodeRemediation {
 public:
  // `state_dir`: the node's agent state dir (the ledger goes to state_dir/remediation).
  // `executor` nullptr: remediation is off (requests are journalled as not acted on).
  NodeRemediation(NodeIdentity node, const std::filesystem::path& state_dir, Executor* executor,
                  Journaller journal);

  // Looks at the node's annotations: the request (empty: none) and sentinel's quarantine (the
  // request is acted on only while the quarantine names its incident, so a request left on a
  // released node is never carried out again, e.g. after the state directory was lost). Not
  // thread-safe: one caller at a time (RemediationService).
  Outcome handle(std::string_view request_text, std::string_view quarantine_text);

  // Collect a log bundle (into state_dir/remediation/bundles) before the first action of each
  // incident. Off until called. A failed or late collection is journalled and the action goes
  // ahead: the bundle never holds a remediation past options.deadline.
  void set_log_bundle(LogBundleSource source, LogBundleOptions options = {});

  [[nodiscard]] const RemediationLedger& ledger() const { return ledger_; }
  [[nodiscard]] const NodeIdentity& node() const { return node_; }

 private:
  NodeIdentity node_;
  Executor* executor_;
  Journaller journal_;
  RemediationLedger ledger_;
  std::string last_ignored_;  // logged once per distinct ignored request
  std::filesystem::path bundle_dir_;
  std::optional<LogBundleSource> bundle_source_;
  LogBundleOptions bundle_options_;
};

// ---- the service: one thread for every node of the process ----

class RemediationService {
 public:
  // `on_outcome` (optional) is told each handled request's outcome, on the service's thread.
  explicit RemediationService(std::function<void(Outcome)> on_outcome = {});
  ~RemediationService();  // stops
  RemediationService(const RemediationService&) = delete;
  RemediationService& operator=(const RemediationService&) = delete;

  // Before the first offer() for that node. The service does not own it.
  void add_node(const std::string& node_name, NodeRemediation* node);
  // Thread-safe and cheap (the informer's thread calls it for every Node change): the node's
  // current annotations; queued only when they differ from the last ones offered. Unknown
  // nodes (not added yet) are ignored until their next change.
  void offer(const std::string& node_name, std::string request_text, std::string quarantine_text);
  // Same, from a Node object (metadata.annotations).
  void offer_node(const core::Value& node);
  // Waits until every offer made so far is handled (tests).
  void drain();
  // Finishes the action in progress (never interrupts a host command) and joins.
  void stop();

  // Outcome of the last request handled per node (tests, logs).
  [[nodiscard]] std::optional<Outcome> last_outcome(const std::string& node_name) const;

 private:
  void run();
  struct Slot {
    NodeRemediation* node = nullptr;
    std::string request, quarantine;  // last offered
    bool queued = false;
    std::optional<Outcome> outcome;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::map<std::string, Slot, std::less<>> slots_;
  std::deque<std::string> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::function<void(Outcome)> on_outcome_;
  std::thread thread_;
};

// One informer of Nodes feeding `service`: only `node_name` (field selector metadata.name=...)
// or, when empty, every Node (simulation: one watch for thousands of nodes). Only the
// annotations are cached. Started; stop it (or destroy it) before the client and the service.
std::unique_ptr<kube::Informer> watch_node_requests(kube::Client& client,
                                                    const std::string& node_name,
                                                    RemediationService& service);

}  // namespace gpufleet::agent
