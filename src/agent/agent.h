// The node agent core: one Agent per node (identity, journal, the monitors registered in
// plugin.h, delivery through a Sink) and the AgentPool that runs many Agents on a few shared
// threads, so a process can be the agent of one real node or of 5,000 simulated ones.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "agent/journal.h"
#include "agent/metrics.h"
#include "agent/plugin.h"

namespace gpufleet::agent {

using Clock = std::chrono::steady_clock;

// Where journal records go. deliver() gets one node's records in id order and returns how
// many leading records are now applied (the agent acks those); it throws when the target
// cannot be reached (nothing is acked, the agent retries with backoff). The target must
// make a redelivered record a no-op (at-least-once delivery): see NodeHealthSink.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual std::size_t deliver(const NodeIdentity& node, std::span<const Record> records) = 0;
};

// The record an agent journals when the node's boot id differs from the last one it saw:
// payload {"bootId": "...", "previousBootId": "..."}. Consumers treat what came before as
// stale (a reboot is one event, not a storm of old ones).
inline constexpr std::string_view kBootKind = "agent.boot";

struct AgentOptions {
  NodeContext node;  // node.state_dir holds the journal and plug-in state
  // Monitors to run, by registered name; empty: every registered monitor.
  std::vector<std::string> monitors;
  std::uint64_t journal_max_bytes = 64 << 20;
  std::uint64_t journal_segment_bytes = 4 << 20;
  bool fsync = true;
  std::size_t delivery_batch = 128;
  std::chrono::milliseconds retry_min{250};
  std::chrono::milliseconds retry_max{30000};
  // Process-wide counters (metrics.h), shared by every agent of the process; nullptr: none.
  AgentMetrics* metrics = nullptr;
};

struct AgentStats {
  std::uint64_t emitted = 0;
  std::uint64_t delivered = 0;
  std::uint64_t delivery_failures = 0;
  std::uint64_t rejected = 0;  // failures where the API server refused the write (4xx)
  std::uint64_t monitor_errors = 0;
  JournalStats journal;
};

class Agent {
 public:
  // Opens the journal under node.state_dir/journal, reads the boot id (journalling a boot
  // record when it changed) and creates the monitors. Throws core::InvalidInput for an
  // unknown monitor name or an empty node name.
  Agent(AgentOptions options, Sink& sink);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Polls the monitors that are due and journals what they emitted (one fsync per poll); no
  // network. Returns when a monitor is next due. One poll() at a time per agent.
  Clock::time_point poll(Clock::time_point now);

  // Delivers one batch of pending records unless delivery is backing off. Returns when to
  // deliver again: `now` when records remain, the end of the backoff after a failure, nullopt
  // when nothing is pending. One deliver_pending() at a time per agent; it may run while
  // poll() or record() runs on another thread, so a slow API server never delays a poll.
  std::optional<Clock::time_point> deliver_pending(Clock::time_point now);

  // poll() then deliver_pending() on the calling thread; returns when it next wants to run.
  Clock::time_point tick(Clock::time_point now);

  // Whether the journal holds records not yet delivered. Thread-safe.
  [[nodiscard]] bool has_undelivered();

  // Journals one record now (for plug-ins outside the monitor loop, e.g. host steps and
  // remediation). Thread-safe: it may run while other threads poll or deliver (the journal is
  // guarded by a lock held only around journal operations, never while delivering).
  std::uint64_t record(std::string_view kind, const core::Value& payload);

  [[nodiscard]] const NodeIdentity& identity() const noexcept { return options_.node.identity; }
  // Thread-safe; journal figures are those at the end of the last tick.
  [[nodiscard]] AgentStats stats() const;

 private:
  struct Running;
  // stats_.journal from the journal; call with journal_mu_ held.
  void refresh_journal_stats();
  // Counts `n` records appended up to `last_id` and remembers when (latency samples).
  void note_appended(std::uint64_t last_id, std::size_t n);
  void note_acked(std::uint64_t acked_id);

  AgentOptions options_;
  Sink& sink_;
  // Guards journal_ and appended_at_: record() may be called from another thread than tick().
  std::mutex journal_mu_;
  Journal journal_;
  std::vector<Running> monitors_;
  Clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  // (record id, when journalled) of up to kLatencySamples undelivered records, oldest first.
  std::deque<std::pair<std::uint64_t, Clock::time_point>> appended_at_;
  mutable std::mutex stats_mu_;  // stats() may be read from another thread
  AgentStats stats_;
};

// Runs many agents on a few shared threads, never a thread per node: `threads` poll the
// monitors (a timer heap of (next poll, agent)), `delivery_threads` deliver the journals (a
// second heap; at most one delivery per agent at a time). Polls never wait for the API
// server: with them on the same thread, a saturated API server held every poll of a 5,000-node
// simulated fleet behind one delivery (docs/performance.md).
class AgentPool {
 public:
  explicit AgentPool(std::size_t threads, std::size_t delivery_threads = 1);
  ~AgentPool();  // stops and joins
  AgentPool(const AgentPool&) = delete;
  AgentPool& operator=(const AgentPool&) = delete;

  // Takes ownership; the agent's first tick is due now.
  Agent& add(std::unique_ptr<Agent> agent);
  void stop();
  [[nodiscard]] std::size_t size() const;
  // Applies f to every agent (under the pool's lock; keep it short).
  void for_each(const std::function<void(const Agent&)>& f) const;

 private:
  struct Due {
    Clock::time_point at;
    Agent* agent;
    bool operator>(const Due& o) const { return at > o.at; }
  };
  void work();
  void deliver_work();
  // The next due entry of `heap`, waiting on `cv` until one is due; nullopt once stopping.
  // Call with `lock` (on mu_) held.
  std::optional<Due> next_due(std::vector<Due>& heap, std::condition_variable& cv,
                              std::unique_lock<std::mutex>& lock);
  // Adds `due` to `heap` and wakes a thread waiting on `cv`. Call with mu_ held.
  static void push_due(std::vector<Due>& heap, std::condition_variable& cv, Due due);
  // Queues a delivery of `agent` at `at` unless one is queued or running. Call with mu_ held.
  void schedule_delivery(Agent* agent, Clock::time_point at);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable delivery_cv_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<Due> heap_;           // polls, min-heap on `at`
  std::vector<Due> delivery_heap_;  // deliveries, min-heap on `at`
  std::set<Agent*> delivering_;     // agents in delivery_heap_ or being delivered
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Reads "<root>/proc/sys/kernel/random/boot_id" (trimmed); "" when absent.
std::string read_boot_id(const std::filesystem::path& host_root);

}  // namespace gpufleet::agent
