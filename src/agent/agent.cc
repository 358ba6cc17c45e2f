#include "agent/agent.h"
#include "core/text.h"

#include <algorithm>
#include <fstream>
#include <functional>

#include "core/duration.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "kube/errors.h"

namespace gpufleet::agent {
namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string read_small_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::string s;
  std::getline(in, s);
  return std::string(core::trim_end(s));
}

void write_small_file(const std::filesystem::path& p, const std::string& text) {
  const auto tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    if (!out) throw core::InvalidInput("agent: cannot write " + tmp);
  }
  std::filesystem::rename(tmp, p);
}

// Collects what one monitor poll emits, so the whole poll is journalled with one fsync.
class BatchEmitter final : public Emitter {
 public:
  void emit(std::string_view kind, const core::Value& payload) override {
    core::Value v = payload;
    // Stamped at observation time, so a record delivered after an outage says when it happened.
    if (v.is_map() && v.find("time") == nullptr)
      v["time"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Micros);
    items.emplace_back(std::string(kind), core::to_json(v));
  }
  std::vector<std::pair<std::string, std::string>> items;
};

}  // namespace

std::string read_boot_id(const std::filesystem::path& host_root) {
  return read_small_file(host_root / "proc/sys/kernel/random/boot_id");
}

struct Agent::Running {
  std::string name;
  std::unique_ptr<Monitor> monitor;
  Clock::time_point due{};
};

Agent::Agent(AgentOptions options, Sink& sink)
    : options_(std::move(options)), sink_(sink), journal_([&] {
        if (options_.node.identity.node_name.empty())
          throw core::InvalidInput(
              "agent: node name is empty; pass --node NAME (the Kubernetes node name)");
        if (options_.node.state_dir.empty())
          throw core::InvalidInput("agent: state dir is empty for node " +
                                   options_.node.identity.node_name);
        JournalOptions j;
        j.dir = options_.node.state_dir / "journal";
        j.max_bytes = options_.journal_max_bytes;
        j.segment_bytes = options_.journal_segment_bytes;
        j.fsync = options_.fsync;
        return j;
      }()) {
  auto& node = options_.node;
  if (node.identity.boot_id.empty()) node.identity.boot_id = read_boot_id(node.host_root);
  const auto boot_file = node.state_dir / "boot_id";
  std::string previous = read_small_file(boot_file);
  if (!node.identity.boot_id.empty() && previous != node.identity.boot_id) {
    core::Value boot = core::Value::map();
    boot["bootId"] = node.identity.boot_id;
    boot["previousBootId"] = previous;
    record(kBootKind, boot);
    write_small_file(boot_file, node.identity.boot_id);
  }
  std::vector<std::string> names = options_.monitors.empty() ? monitor_names() : options_.monitors;
  for (const auto& name : names) {
    NodeContext ctx = node;
    ctx.state_dir = node.state_dir / name;
    std::filesystem::create_directories(ctx.state_dir);
    auto monitor = monitor_factory(name)(ctx);
    if (monitor) monitors_.push_back(Running{name, std::move(monitor), {}});
  }
  stats_.journal = journal_.stats();
}

Agent::~Agent() = default;

std::uint64_t Agent::record(std::string_view kind, const core::Value& payload) {
  BatchEmitter e;
  e.emit(kind, payload);
  std::lock_guard journal_lock(journal_mu_);
  auto id = journal_.append(e.items[0].first, e.items[0].second);
  note_appended(id, 1);
  std::lock_guard lock(stats_mu_);
  ++stats_.emitted;
  stats_.journal = journal_.stats();
  return id;
}

Clock::time_point Agent::poll(Clock::time_point now) {
  Clock::time_point next = now + std::chrono::seconds(10);
  for (auto& m : monitors_) {
    if (m.due <= now) {
      BatchEmitter out;
      try {
        m.monitor->poll(out);
      } catch (const std::exception& e) {
        if (options_.metrics != nullptr) options_.metrics->monitor_errors.inc();
        std::lock_guard lock(stats_mu_);
        ++stats_.monitor_errors;
        core::log::warn("agent: monitor failed",
                        {{"node", identity().node_name}, {"monitor", m.name}, {"error", e.what()}});
      }
      if (!out.items.empty()) {
        std::vector<NewRecord> batch;
        batch.reserve(out.items.size());
        for (const auto& [k, p] : out.items) batch.push_back({k, p});
        std::lock_guard journal_lock(journal_mu_);
        note_appended(journal_.append_batch(batch), batch.size());
        std::lock_guard lock(stats_mu_);
        stats_.emitted += batch.size();
      }
      m.due = now + std::max(m.monitor->interval(), std::chrono::milliseconds(10));
    }
    next = std::min(next, m.due);
  }
  std::lock_guard journal_lock(journal_mu_);
  refresh_journal_stats();
  return next;
}

Clock::time_point Agent::tick(Clock::time_point now) {
  Clock::time_point next = poll(now);
  if (std::optional<Clock::time_point> again = deliver_pending(now)) next = std::min(next, *again);
  return next;
}

bool Agent::has_undelivered() {
  std::lock_guard journal_lock(journal_mu_);
  const JournalStats js = journal_.stats();
  return js.last_id > js.acked_id;
}

void Agent::refresh_journal_stats() {
  const JournalStats js = journal_.stats();
  std::lock_guard lock(stats_mu_);
  stats_.journal = js;  // a copy: stats() runs on other threads, the journal is not thread-safe
}

std::optional<Clock::time_point> Agent::deliver_pending(Clock::time_point now) {
  if (now < retry_at_) return retry_at_;
  std::vector<Record> pending;
  {
    std::lock_guard journal_lock(journal_mu_);
    pending = journal_.pending(options_.delivery_batch);
  }
  if (pending.empty()) return std::nullopt;
  AgentMetrics* m = options_.metrics;
  const auto started = Clock::now();
  bool rejected = false;
  try {
    std::size_t n = 0;
    try {
      n = std::min(sink_.deliver(identity(), pending), pending.size());
    } catch (const kube::ApiError& e) {
      // The server answered and refused (Forbidden by the identity policy, Invalid): unlike an
      // outage, waiting does not help; someone must look. Conflicts and throttling are not that.
      rejected = e.code() >= 400 && e.code() < 500 && e.code() != 409 && !kube::is_retryable(e);
      throw;
    }
    if (m != nullptr) m->delivery_duration.observe(seconds_since(started));
    if (n > 0) {
      std::lock_guard journal_lock(journal_mu_);
      journal_.ack(pending[n - 1].id);
      note_acked(pending[n - 1].id);
      refresh_journal_stats();
    }
    if (backoff_.count() > 0)
      core::log::info("agent: delivery resumed", {{"node", identity().node_name}});
    backoff_ = std::chrono::milliseconds(0);
    if (m != nullptr) {
      m->delivered_ok.inc();
      m->delivered.inc(static_cast<double>(n));
    }
    {
      std::lock_guard lock(stats_mu_);
      stats_.delivered += n;
    }
    if (has_undelivered()) return now;
    return std::nullopt;
  } catch (const std::exception& e) {
    if (m != nullptr) {
      m->delivery_duration.observe(seconds_since(started));
      (rejected ? m->rejected : m->unavailable).inc();
    }
    // Logged on the first failure of a streak only: an API outage must not flood the log of
    // 5,000 simulated agents.
    if (backoff_.count() == 0)
      core::log::warn("agent: delivery failed; backing off, records stay in the journal",
                      {{"node", identity().node_name}, {"error", e.what()}});
    backoff_ =
        backoff_.count() == 0 ? options_.retry_min : std::min(backoff_ * 2, options_.retry_max);
    retry_at_ = now + backoff_;
    std::lock_guard lock(stats_mu_);
    ++stats_.delivery_failures;
    if (rejected) ++stats_.rejected;
  }
  return retry_at_;
}

void Agent::note_appended(std::uint64_t last_id, std::size_t n) {
  if (n == 0) return;
  if (options_.metrics != nullptr) options_.metrics->appended.inc(static_cast<double>(n));
  const auto now = Clock::now();
  for (std::uint64_t id = last_id + 1 - n; id <= last_id; ++id) {
    if (appended_at_.size() >= kLatencySamples) break;  // sampled: the rest go untimed
    appended_at_.emplace_back(id, now);
  }
}

void Agent::note_acked(std::uint64_t acked_id) {
  const auto now = Clock::now();
  while (!appended_at_.empty() && appended_at_.front().first <= acked_id) {
    if (options_.metrics != nullptr)
      options_.metrics->record_latency.observe(
          std::chrono::duration<double>(now - appended_at_.front().second).count());
    appended_at_.pop_front();
  }
}

AgentStats Agent::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;  // journal figures as of the end of the last tick (or construction)
}

AgentPool::AgentPool(std::size_t threads, std::size_t delivery_threads) {
  threads = std::max<std::size_t>(1, threads);
  delivery_threads = std::max<std::size_t>(1, delivery_threads);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  for (std::size_t i = 0; i < delivery_threads; ++i)
    threads_.emplace_back([this] { deliver_work(); });
}

AgentPool::~AgentPool() { stop(); }

Agent& AgentPool::add(std::unique_ptr<Agent> agent) {
  std::lock_guard lock(mu_);
  Agent& ref = *agent;
  agents_.push_back(std::move(agent));
  heap_.push_back(Due{Clock::now(), &ref});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  cv_.notify_one();
  return ref;
}

void AgentPool::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  delivery_cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

std::size_t AgentPool::size() const {
  std::lock_guard lock(mu_);
  return agents_.size();
}

void AgentPool::for_each(const std::function<void(const Agent&)>& f) const {
  std::lock_guard lock(mu_);
  for (const auto& a : agents_) f(*a);
}

std::optional<AgentPool::Due> AgentPool::next_due(std::vector<Due>& heap,
                                                  std::condition_variable& cv,
                                                  std::unique_lock<std::mutex>& lock) {
  for (;;) {
    if (stopping_) return std::nullopt;
    if (heap.empty()) {
      cv.wait(lock);
      continue;
    }
    if (heap.front().at > Clock::now()) {
      // A copy: wait_until keeps reading its argument while the lock is released.
      const Clock::time_point at = heap.front().at;
      cv.wait_until(lock, at);
      continue;
    }
    // Popped while it runs: no other thread of the set works on the same agent meanwhile.
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Due due = heap.back();
    heap.pop_back();
    return due;
  }
}

void AgentPool::push_due(std::vector<Due>& heap, std::condition_variable& cv, Due due) {
  heap.push_back(due);
  std::push_heap(heap.begin(), heap.end(), std::greater<>());
  cv.notify_one();
}

void AgentPool::work() {
  std::unique_lock lock(mu_);
  while (std::optional<Due> due = next_due(heap_, cv_, lock)) {
    const Clock::time_point now = Clock::now();
    lock.unlock();
    Clock::time_point next;
    bool undelivered = false;
    try {
      next = due->agent->poll(now);
      undelivered = due->agent->has_undelivered();
    } catch (const std::exception& e) {
      // The journal could not be written (disk full, I/O error): keep the agent, try later.
      core::log::error("agent: tick failed",
                       {{"node", due->agent->identity().node_name}, {"error", e.what()}});
      next = now + std::chrono::seconds(5);
    }
    lock.lock();
    push_due(heap_, cv_, Due{next, due->agent});
    // Records from this poll, or from record() on another thread since the last one.
    if (undelivered) schedule_delivery(due->agent, now);
  }
}

void AgentPool::schedule_delivery(Agent* agent, Clock::time_point at) {
  if (!delivering_.insert(agent).second) return;  // queued or running: it will see them
  push_due(delivery_heap_, delivery_cv_, Due{at, agent});
}

void AgentPool::deliver_work() {
  std::unique_lock lock(mu_);
  while (std::optional<Due> due = next_due(delivery_heap_, delivery_cv_, lock)) {
    const Clock::time_point now = Clock::now();
    lock.unlock();
    std::optional<Clock::time_point> again;
    try {
      again = due->agent->deliver_pending(now);
    } catch (const std::exception& e) {
      core::log::error("agent: delivery failed",
                       {{"node", due->agent->identity().node_name}, {"error", e.what()}});
      again = now + std::chrono::seconds(5);
    }
    // Nothing left: checked again under the pool's lock, so a poll that journalled after the
    // delivery looked either is seen here or finds the agent unscheduled and schedules it.
    lock.lock();
    if (!again && due->agent->has_undelivered()) again = Clock::now();
    if (again) {
      push_due(delivery_heap_, delivery_cv_, Due{*again, due->agent});
    } else {
      delivering_.erase(due->agent);
    }
  }
}

}  // namespace gpufleet::agent
