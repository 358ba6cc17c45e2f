// The goodput ledger of one training job: a timeline state machine fed, in time order, what
// the job's pods showed (Observation) and what gpufleet knows interrupted it
// (InterruptionEvent), which splits the job's wall time into productive time and time lost,
// by phase and by cause. Times are unix seconds passed in as arguments; nothing here reads a
// clock or the API. The definitions are in docs/goodput.md ("The model"):
//
//   wall        first Running observation .. the end (Succeeded/Failed) or `now`; queueing
//               before the first start is counted apart (queued) and is not lost time.
//   productive  Running time outside an interruption, less the redone work.
//   detection   fault .. gpufleet acted (quarantine, cordon), while the job still looked Running.
//   drain       gpufleet acted .. the job stopped running.
//   restart     the job stopped running .. it runs again (or ends).
//   redone      work between the last checkpoint (or the start of the run the fault hit,
//               whichever is later) and the fault: it was counted Running but is computed
//               again. Known only for a job that reports checkpoints; otherwise `unknown`.
//
// A state holds from its observation until the next one (the controller observes on every
// change of the job's pods). wall == productive + redone + detection + drain + restart.
//
// Restart-safe: an observation older than the last one is ignored, the same observation or
// event twice changes nothing, and an event for an incident the job has already recovered
// from (its fault before the current run began) is ignored, so a level-triggered controller
// may feed everything it sees on every pass. Not thread-safe; the owner serializes calls.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "goodput/job.h"

namespace gpufleet::goodput {

enum class Cause : std::uint8_t {
  GpuXid,               // a GPU fault (sentinel incident with xid or gpu entities)
  Nic,                  // a NIC/InfiniBand fault (ib-port entities)
  HostPackage,          // a hostpkg rollout drained the node
  SentinelRemediation,  // any other sentinel incident (maintenance, other checks)
  User,                 // the job was deleted or restarted with no gpufleet action
  Unknown,              // the job stopped and nothing gpufleet knows explains it
};
inline constexpr std::size_t kCauseCount = 6;
inline constexpr std::array<Cause, kCauseCount> kCauses = {
    Cause::GpuXid, Cause::Nic,    Cause::HostPackage, Cause::SentinelRemediation,
    Cause::User,   Cause::Unknown};
std::string_view cause_name(Cause c) noexcept;
std::optional<Cause> parse_cause(std::string_view name) noexcept;

// At most this many settled interruptions are kept in the history (the totals keep all).
inline constexpr std::size_t kMaxHistory = 16;
// At most this many other incidents are recorded on one interruption (`also`).
inline constexpr std::size_t kMaxAlso = 8;
// A persisted ledger with more nodes than this is rejected (a bound on its size).
inline constexpr std::size_t kMaxNodes = 4096;

// What the job's pods showed at `time` (job.h's Job at one instant).
struct Observation {
  std::int64_t time = 0;
  JobState state = JobState::Pending;
  std::vector<std::string> nodes;  // where the job's pods run
  std::int64_t gpus = 0;
  bool reports_checkpoints = false;
  std::optional<std::int64_t> last_checkpoint;
  std::optional<double> step_time_seconds;
};
Observation observation_of(const Job& job, std::int64_t time);

// Something that took, or may take, the job's node away. `incident` names it uniquely (the
// Remediation's name, the hostpkg node record); the same incident may be fed again with more
// times known.
struct InterruptionEvent {
  std::string incident;
  Cause cause = Cause::Unknown;
  std::string node;
  std::int64_t fault_at = 0;             // the fault (hostpkg: the node's cordon)
  std::optional<std::int64_t> acted_at;  // gpufleet acted: quarantine or cordon
  std::optional<std::int64_t> ended_at;  // the incident ended (released, done, cancelled)
};

struct Phases {
  std::int64_t detection = 0;
  std::int64_t drain = 0;
  std::int64_t restart = 0;
  std::optional<std::int64_t> redone;  // nullopt: unknown (the job reports no checkpoints)
  friend bool operator==(const Phases&, const Phases&) = default;
};

// One interruption of the job: the open one, or one of the history.
struct Interruption {
  std::string incident;  // "" when nothing gpufleet knows explains it (cause User or Unknown)
  Cause cause = Cause::Unknown;
  std::string node;
  std::int64_t fault_at = 0;
  std::optional<std::int64_t> acted_at;
  std::optional<std::int64_t> ended_at;
  std::optional<std::int64_t> stopped_at;  // the job stopped running
  std::optional<std::int64_t> resumed_at;  // it ran again (absent: ended, or still open)
  std::int64_t run_since = 0;              // start of the run the fault hit
  bool reports_checkpoints = false;        // as the job said when it stopped
  std::optional<std::int64_t> checkpoint;  // the last checkpoint at or before the fault
  std::vector<std::string> also;           // other incidents during this interruption
  Phases phases;                           // settled ones only; see Ledger::phases_of
  friend bool operator==(const Interruption&, const Interruption&) = default;
};

struct CauseTotals {
  std::int64_t interruptions = 0;
  std::int64_t detection = 0;
  std::int64_t drain = 0;
  std::int64_t restart = 0;
  std::int64_t redone = 0;          // of the interruptions whose redone work is known
  std::int64_t redone_unknown = 0;  // interruptions whose redone work is unknown
  [[nodiscard]] std::int64_t lost() const { return detection + drain + restart + redone; }
  friend bool operator==(const CauseTotals&, const CauseTotals&) = default;
};

struct Summary {
  JobState state = JobState::Pending;
  std::int64_t gpus = 0;
  std::int64_t queued = 0;
  std::int64_t wall = 0;
  std::int64_t productive = 0;                      // redone work already taken out
  std::int64_t lost = 0;                            // wall - productive
  std::array<CauseTotals, kCauseCount> by_cause{};  // index: static_cast<size_t>(Cause)
  std::int64_t interruptions = 0;
  std::int64_t redone_unknown = 0;  // interruptions whose redone work is unknown
  // productive / wall (1 when wall is 0). When redone_unknown > 0 it is an upper bound.
  double ettr = 1.0;
  [[nodiscard]] const CauseTotals& of(Cause c) const {
    return by_cause[static_cast<std::size_t>(c)];
  }
};

class Ledger {
 public:
  Ledger() = default;
  explicit Ledger(JobKey key) : key_(std::move(key)) {}

  // What the pods showed. Returns false (and changes nothing) for an observation older than
  // the last one, the same one again, or one after the job ended.
  bool observe(const Observation& o);
  // An incident on a node. A fault after the last observation first carries the last state
  // on to the fault (the pods showed no change since), so later observations must not be
  // older than the fault. Returns false when it changes nothing: the job never ran, the node
  // is not one the job last ran on, the job recovered from it already, it ended without the
  // job ever stopping, or it was known already with the same times.
  bool interruption(const InterruptionEvent& e);

  // The totals at `now` (the last state held since the last observation; `now` before it is
  // taken as the last observation's time).
  [[nodiscard]] Summary summary(std::int64_t now) const;
  // An interruption's phases at `now` (a settled one's are fixed).
  [[nodiscard]] Phases phases_of(const Interruption& i, std::int64_t now) const;

  [[nodiscard]] const JobKey& key() const noexcept { return key_; }
  [[nodiscard]] JobState state() const noexcept { return state_; }
  [[nodiscard]] std::optional<std::int64_t> started_at() const noexcept { return started_at_; }
  [[nodiscard]] std::optional<std::int64_t> observed_at() const noexcept { return observed_at_; }
  [[nodiscard]] const std::optional<Interruption>& open() const noexcept { return open_; }
  [[nodiscard]] const std::vector<Interruption>& history() const noexcept { return history_; }
  [[nodiscard]] const std::vector<std::string>& nodes() const noexcept { return nodes_; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return gpus_; }

  // The persisted form (docs/goodput.md "The persisted ledger"): a map of plain fields, times
  // in RFC 3339, seconds as integers; deterministic.
  [[nodiscard]] core::Value to_value() const;
  // Reads to_value's form strictly: unknown keys, bad times, negative seconds and
  // inconsistent fields throw core::InvalidInput naming `source` and the field.
  static Ledger from_value(const core::Value& v, std::string_view source);

  friend bool operator==(const Ledger&, const Ledger&) = default;

 private:
  [[nodiscard]] bool terminal() const noexcept {
    return state_ == JobState::Succeeded || state_ == JobState::Failed;
  }
  // Held-back Running time of the open interruption that turns out unharmed goes back to
  // productive; the interruption is dropped.
  void cancel_open(std::int64_t upto);
  // Closes the open interruption at `at` (the job runs again, or ended).
  void settle_open(std::int64_t at, bool resumed);
  void add_totals(const Interruption& i, int sign);
  bool reattribute(const InterruptionEvent& e);

  JobKey key_;
  JobState state_ = JobState::Pending;
  std::optional<std::int64_t> observed_at_;  // the last observation
  std::optional<std::int64_t> started_at_;   // the first Running
  std::optional<std::int64_t> ended_at_;     // Succeeded or Failed
  std::int64_t run_since_ = 0;               // start of the last Running stretch
  std::int64_t gpus_ = 0;
  std::vector<std::string> nodes_;  // of the last Running observation, sorted
  bool reports_checkpoints_ = false;
  std::optional<std::int64_t> last_checkpoint_;
  std::optional<double> step_time_seconds_;
  std::int64_t queued_ = 0;
  std::int64_t running_ = 0;  // Running time counted so far, not held back by an interruption
  std::array<CauseTotals, kCauseCount> totals_{};
  std::optional<Interruption> open_;
  std::vector<Interruption> history_;  // oldest first, at most kMaxHistory
};

}  // namespace gpufleet::goodput
