// The discrete-event run: faults, job stops and restarts, nodes leaving and returning to
// service, on a simulated clock. Each job's goodput is its goodput::Ledger, fed what the
// goodput controller would see: the pods' state on every change (Running, Interrupted) with
// the job's last checkpoint, and sentinel's incidents where sentinel acted.
#include <algorithm>
#include <cstdio>
#include <queue>
#include <tuple>

#include "goodput/model/model.h"

namespace gpufleet::goodput::model {
namespace {

// At one instant: nodes return and leave service before faults, faults before the stops
// and restarts they cause, so a restart sees the fleet as it is at that second.
enum class Ev : std::uint8_t { NodeReturn, NodeOut, Fault, JobStop, JobResume };

struct Event {
  std::int64_t at = 0;
  Ev kind = Ev::Fault;
  std::int64_t seq = 0;
  std::int64_t index = 0;
  std::int64_t gen = 0;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return std::tie(a.at, a.kind, a.seq) > std::tie(b.at, b.kind, b.seq);
  }
};

struct NodeState {
  std::int64_t job = -1;  // the job holding it (running, or reserved for its restart)
  std::int64_t out_from = -1;
  std::int64_t out_until = -1;
  std::int64_t out_gpus = 0;
  const Fault* out_fault = nullptr;
  double slow = 0;
  [[nodiscard]] bool in_service(std::int64_t t) const {
    return !(out_from >= 0 && out_from <= t && t < out_until);
  }
};

struct JobRun {
  const JobSpec* spec = nullptr;
  Ledger ledger;
  std::vector<std::int64_t> nodes;
  std::int64_t gpus = 0;
  bool running = false;
  bool waiting = false;
  std::int64_t run_since = 0;
  std::int64_t stop_at = -1;
  std::int64_t stop_gen = 0;
  std::int64_t fault_at = 0;
  std::int64_t resume_delay = 0;
  std::int64_t resume_not_before = 0;
  bool checkpoint_before_stop = false;
  const Fault* stop_fault = nullptr;
  std::optional<std::int64_t> last_checkpoint;
  double slow = 0;
  std::int64_t slow_since = 0;
  double slow_gpu_seconds = 0;
};

std::string node_name(std::int64_t n) { return "node-" + std::to_string(n); }

class Sim {
 public:
  Sim(const Scenario& s, const std::vector<Fault>& faults, Configuration& c)
      : s_(s), faults_(faults), c_(c), horizon_(s.days * 86400) {
    nodes_.resize(static_cast<std::size_t>(s.nodes));
    std::int64_t next = 0;
    for (const JobSpec& spec : s.jobs) {
      for (std::int64_t i = 0; i < spec.count; ++i) {
        JobRun j;
        j.spec = &spec;
        j.ledger =
            Ledger(JobKey{"train", std::string(kJobLabel),
                          spec.count == 1 ? spec.name : spec.name + "-" + std::to_string(i)});
        j.gpus = spec.nodes * s.gpus_per_node;
        for (std::int64_t k = 0; k < spec.nodes; ++k) {
          j.nodes.push_back(next);
          nodes_[static_cast<std::size_t>(next)].job = static_cast<std::int64_t>(jobs_.size());
          ++next;
        }
        jobs_.push_back(std::move(j));
      }
    }
    result_.name = c.name();
  }

  ConfigurationResult run() {
    for (std::size_t i = 0; i < jobs_.size(); ++i) start(jobs_[i], 0);
    for (std::size_t i = 0; i < faults_.size(); ++i)
      push(faults_[i].at, Ev::Fault, static_cast<std::int64_t>(i));
    while (!queue_.empty() && queue_.top().at < horizon_) {
      const Event e = queue_.top();
      queue_.pop();
      switch (e.kind) {
        case Ev::Fault: on_fault(faults_[static_cast<std::size_t>(e.index)], e.at); break;
        case Ev::NodeOut: on_node_out(e.index, e.at); break;
        case Ev::NodeReturn: on_node_return(e.index, e.at); break;
        case Ev::JobStop: on_job_stop(jobs_[static_cast<std::size_t>(e.index)], e.at, e.gen); break;
        case Ev::JobResume: on_job_resume(e.index, e.at); break;
      }
    }
    return finish();
  }

 private:
  void push(std::int64_t at, Ev kind, std::int64_t index, std::int64_t gen = 0) {
    queue_.push(Event{at, kind, seq_++, index, gen});
  }

  [[nodiscard]] Observation observation(const JobRun& j, std::int64_t t, JobState state) const {
    Observation o;
    o.time = kEpoch + t;
    o.state = state;
    for (std::int64_t n : j.nodes) o.nodes.push_back(node_name(n));
    o.gpus = j.gpus;
    o.reports_checkpoints = true;
    if (j.last_checkpoint) o.last_checkpoint = kEpoch + *j.last_checkpoint;
    return o;
  }

  void start(JobRun& j, std::int64_t t) {
    j.running = true;
    j.waiting = false;
    j.run_since = t;
    j.ledger.observe(observation(j, t, JobState::Running));
    j.slow = 0;
    for (std::int64_t n : j.nodes)
      j.slow = std::max(j.slow, nodes_[static_cast<std::size_t>(n)].slow);
    j.slow_since = t;
  }

  // Straggler slowdown so far: the whole synchronous job runs at its slowest node's pace.
  void accrue_slow(JobRun& j, std::int64_t t) {
    if (j.running && j.slow > 0)
      j.slow_gpu_seconds += j.slow * static_cast<double>(j.gpus * (t - j.slow_since));
    j.slow_since = t;
  }
  void reslow(JobRun& j, std::int64_t t) {
    accrue_slow(j, t);
    j.slow = 0;
    for (std::int64_t n : j.nodes)
      j.slow = std::max(j.slow, nodes_[static_cast<std::size_t>(n)].slow);
  }

  void schedule_stop(JobRun& j, std::int64_t index, const Fault& f, std::int64_t t,
                     const FaultResponse& r) {
    const std::int64_t stop = t + r.stop_after_s;
    if (j.stop_at < 0) {
      ++result_.disruptions;
      if (f.category == Category::Gpu) ++result_.gpu_disruptions;
      j.stop_fault = &f;
      // A fault that kills or hangs the job ends its checkpoints; one it survives (a slow
      // node, a flap sentinel drained for) lets it checkpoint until it stops.
      j.fault_at = f.crashes_job ? t : stop;
      j.resume_delay = r.resume_after_s;
      j.checkpoint_before_stop = r.checkpoint_before_stop;
      j.stop_at = stop;
      push(stop, Ev::JobStop, index, ++j.stop_gen);
      return;
    }
    j.resume_delay = std::max(j.resume_delay, r.resume_after_s);
    if (stop < j.stop_at) {
      j.stop_at = stop;
      push(stop, Ev::JobStop, index, ++j.stop_gen);
    }
  }

  void on_fault(const Fault& f, std::int64_t t) {
    NodeState& n = nodes_[static_cast<std::size_t>(f.node)];
    if (!n.in_service(t)) return;  // out for repair already: nothing more to break
    ++result_.faults;
    const std::int64_t ji = n.job;
    JobRun* j = ji >= 0 ? &jobs_[static_cast<std::size_t>(ji)] : nullptr;
    FleetView view;
    view.now = t;
    view.nodes = s_.nodes;
    view.node_runs_job = j != nullptr && j->running;
    const FaultResponse r = c_.respond(f, view);
    if (r.quarantined) ++result_.quarantines;
    if (r.breaker_refused) ++result_.breaker_refusals;
    if (f.category != Category::Software) {
      records_.push_back(
          IncidentRecord{"f" + std::to_string(f.id), node_name(f.node), kEpoch + t,
                         f.category == Category::Gpu ? Cause::GpuXid
                         : f.category == Category::Network || f.category == Category::LinkFlap
                             ? Cause::Nic
                             : Cause::SentinelRemediation});
    }
    if (f.category == Category::Straggler) {
      n.slow = std::max(n.slow, s_.straggler_slowdown);
      if (j != nullptr) reslow(*j, t);
    }
    if (f.scope == Scope::Gpu) ++result_.gpu_scoped_faults;
    if (r.out_gpus > 0 && r.out_for_s > 0) {
      const std::int64_t from = t + r.out_after_s;
      const std::int64_t until = from + r.out_for_s;
      if (f.scope == Scope::Gpu) {
        result_.gpu_scoped_lost_gpu_hours +=
            static_cast<double>(r.out_gpus *
                                (std::min(until, horizon_) - std::min(from, horizon_))) /
            3600.0;
      }
      take_out(f.node, f, from, until, r.out_gpus);
    }
    if (j == nullptr) return;
    ++result_.faults_on_jobs;
    if (f.category == Category::Gpu) ++result_.gpu_faults_on_jobs;
    if (r.gpufleet_acts) {
      InterruptionEvent e;
      e.incident = "f" + std::to_string(f.id);
      e.cause = cause_of_entities({r.incident_check + "/" + node_name(f.node)});
      e.node = node_name(f.node);
      e.fault_at = kEpoch + t;
      e.acted_at = kEpoch + t + r.acted_after_s;
      j->ledger.interruption(e);
    }
    if (!r.stops_job) return;
    if (j->running) {
      schedule_stop(*j, ji, f, t, r);
    } else {
      // Already down: this fault may hold its restart back (a person's triage).
      const std::int64_t at = t + r.resume_after_s + j->spec->restart_s;
      if (at > j->resume_not_before) {
        j->resume_not_before = at;
        if (!j->waiting) push(at, Ev::JobResume, ji);
      }
    }
  }

  void take_out(std::int64_t node, const Fault& f, std::int64_t from, std::int64_t until,
                std::int64_t gpus) {
    NodeState& n = nodes_[static_cast<std::size_t>(node)];
    if (n.out_from >= 0) {
      // A window already set (the same node broken again before its repair): one window.
      n.out_from = std::min(n.out_from, from);
      n.out_until = std::max(n.out_until, until);
      n.out_gpus = std::max(n.out_gpus, gpus);
    } else {
      n.out_from = from;
      n.out_until = until;
      n.out_gpus = gpus;
      n.out_fault = &f;
    }
    push(n.out_from, Ev::NodeOut, node, n.out_from);
    push(n.out_until, Ev::NodeReturn, node, n.out_until);
  }

  void on_node_out(std::int64_t node, std::int64_t t) {
    NodeState& n = nodes_[static_cast<std::size_t>(node)];
    if (n.out_from != t) return;  // a stale event of a window merged since
    n.slow = 0;
    if (n.job < 0) return;
    const std::int64_t ji = n.job;
    JobRun& j = jobs_[static_cast<std::size_t>(ji)];
    reslow(j, t);
    if (j.running && j.stop_at < 0 && n.out_fault != nullptr) {
      // A person takes out a node the job still runs on (a straggler found): it restarts
      // without it.
      FaultResponse r;
      r.stops_job = true;
      schedule_stop(j, ji, *n.out_fault, t, r);
    }
  }

  void on_node_return(std::int64_t node, std::int64_t t) {
    NodeState& n = nodes_[static_cast<std::size_t>(node)];
    if (n.out_until != t || n.out_from < 0) return;
    result_.out_of_service_gpu_hours +=
        static_cast<double>(n.out_gpus * (std::min(t, horizon_) - n.out_from)) / 3600.0;
    n.out_from = n.out_until = -1;
    n.out_gpus = 0;
    n.out_fault = nullptr;
    n.slow = 0;  // repaired
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      JobRun& j = jobs_[i];
      if (!j.waiting) continue;
      if (!reserve(static_cast<std::int64_t>(i), t)) continue;
      j.waiting = false;
      j.resume_not_before = t + j.spec->restart_s;
      push(j.resume_not_before, Ev::JobResume, static_cast<std::int64_t>(i));
    }
  }

  // Keeps the job's nodes in service at `t` and adds free ones to its size; false (nothing
  // added) when the fleet has too few.
  bool reserve(std::int64_t ji, std::int64_t t) {
    JobRun& j = jobs_[static_cast<std::size_t>(ji)];
    std::vector<std::int64_t> keep;
    for (std::int64_t n : j.nodes) {
      NodeState& ns = nodes_[static_cast<std::size_t>(n)];
      if (ns.in_service(t)) {
        keep.push_back(n);
      } else if (ns.job == ji) {
        ns.job = -1;
      }
    }
    const std::size_t need = static_cast<std::size_t>(j.spec->nodes);
    std::vector<std::int64_t> add;
    for (std::size_t n = 0; n < nodes_.size() && keep.size() + add.size() < need; ++n) {
      if (nodes_[n].job < 0 && nodes_[n].in_service(t)) add.push_back(static_cast<std::int64_t>(n));
    }
    j.nodes = keep;
    if (keep.size() + add.size() < need) return false;
    for (std::int64_t n : add) {
      nodes_[static_cast<std::size_t>(n)].job = ji;
      j.nodes.push_back(n);
    }
    std::sort(j.nodes.begin(), j.nodes.end());
    return true;
  }

  // The last checkpoint at or before `t`: every checkpoint_s of running since the run began.
  [[nodiscard]] std::optional<std::int64_t> checkpoint_at(const JobRun& j, std::int64_t t) const {
    const std::int64_t c = j.spec->checkpoint_s;
    if (t - j.run_since >= c) return j.run_since + (t - j.run_since) / c * c;
    return j.last_checkpoint;
  }

  void on_job_stop(JobRun& j, std::int64_t t, std::int64_t gen) {
    if (gen != j.stop_gen || !j.running) return;
    accrue_slow(j, t);
    // A hung or crashed job writes no checkpoint after its fault; a job-aware drain writes
    // one just before the stop.
    j.last_checkpoint =
        j.checkpoint_before_stop ? std::optional<std::int64_t>(t) : checkpoint_at(j, j.fault_at);
    j.ledger.observe(observation(j, t, JobState::Interrupted));
    j.running = false;
    j.stop_at = -1;
    ++result_.interruptions;
    j.resume_not_before = t + j.resume_delay + j.spec->restart_s;
    push(j.resume_not_before, Ev::JobResume, &j - jobs_.data());
  }

  void on_job_resume(std::int64_t ji, std::int64_t t) {
    JobRun& j = jobs_[static_cast<std::size_t>(ji)];
    if (j.running || j.waiting || t < j.resume_not_before) return;
    if (!reserve(ji, t)) {
      j.waiting = true;  // a node's return starts the restart
      return;
    }
    start(j, t);
    const auto& h = j.ledger.history();
    if (!h.empty() && h.back().resumed_at == kEpoch + t) attribute(j, h.back().phases);
  }

  void attribute(const JobRun& j, const Phases& p) {
    if (j.stop_fault == nullptr) return;
    const double lost =
        static_cast<double>((p.detection + p.drain + p.restart + p.redone.value_or(0)) * j.gpus) /
        3600.0;
    result_.lost_by_category[static_cast<std::size_t>(j.stop_fault->category)] += lost;
    if (j.stop_fault->scope == Scope::Gpu) result_.gpu_scoped_lost_gpu_hours += lost;
  }

  ConfigurationResult finish() {
    const std::int64_t now = kEpoch + horizon_;
    std::vector<Ledger> ledgers;
    double slow = 0;
    std::int64_t biggest = 0;
    double job_wall = 0;
    std::int64_t job_interruptions = 0;
    for (JobRun& j : jobs_) {
      accrue_slow(j, horizon_);
      slow += j.slow_gpu_seconds;
      if (const auto& open = j.ledger.open(); open && !j.running)
        attribute(j, j.ledger.phases_of(*open, now));
      const Summary sum = j.ledger.summary(now);
      if (j.gpus > biggest) {
        biggest = j.gpus;
        job_wall = static_cast<double>(sum.wall);
        job_interruptions = sum.interruptions + (j.ledger.open() ? 1 : 0);
      }
      ledgers.push_back(j.ledger);
    }
    for (const NodeState& n : nodes_) {
      if (n.out_from >= 0 && n.out_from < horizon_)
        result_.out_of_service_gpu_hours +=
            static_cast<double>(n.out_gpus * (horizon_ - n.out_from)) / 3600.0;
    }
    const FleetSummary f = summarize_fleet(ledgers, now);
    ConfigurationResult& r = result_;
    r.wall_gpu_hours = static_cast<double>(f.wall_gpu_seconds) / 3600.0;
    r.straggler_gpu_hours = slow / 3600.0;
    r.lost_by_category[static_cast<std::size_t>(Category::Straggler)] += r.straggler_gpu_hours;
    r.productive_gpu_hours =
        static_cast<double>(f.productive_gpu_seconds) / 3600.0 - r.straggler_gpu_hours;
    r.capacity_gpu_hours = static_cast<double>(s_.nodes * s_.gpus_per_node * horizon_) / 3600.0;
    r.ledger_ettr = f.ettr;
    r.ettr = r.wall_gpu_hours > 0 ? r.productive_gpu_hours / r.wall_gpu_hours : 1.0;
    r.lost_by_cause = f.gpu_hours_lost;
    r.mtbi_hours =
        r.faults > 0 ? static_cast<double>(horizon_) / 3600.0 / static_cast<double>(r.faults) : 0;
    r.job_mtbi_hours = job_interruptions > 0
                           ? job_wall / 3600.0 / static_cast<double>(job_interruptions)
                           : job_wall / 3600.0;
    for (const NodeReliability& n : node_reliability(records_, now, LemonPolicy{}, kEpoch))
      r.lemon_nodes += n.lemon ? 1 : 0;
    return r;
  }

  const Scenario& s_;
  const std::vector<Fault>& faults_;
  Configuration& c_;
  std::int64_t horizon_;
  std::vector<NodeState> nodes_;
  std::vector<JobRun> jobs_;
  std::vector<IncidentRecord> records_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::int64_t seq_ = 0;
  ConfigurationResult result_;
};

}  // namespace

double ConfigurationResult::jobs_disrupted_per_fault() const {
  return faults_on_jobs > 0 ? static_cast<double>(disruptions) / static_cast<double>(faults_on_jobs)
                            : 0;
}
double ConfigurationResult::jobs_disrupted_per_gpu_fault() const {
  return gpu_faults_on_jobs > 0
             ? static_cast<double>(gpu_disruptions) / static_cast<double>(gpu_faults_on_jobs)
             : 0;
}
double ConfigurationResult::lost_per_gpu_scoped_fault() const {
  return gpu_scoped_faults > 0 ? gpu_scoped_lost_gpu_hours / static_cast<double>(gpu_scoped_faults)
                               : 0;
}

ConfigurationResult run(const Scenario& s, const std::vector<Fault>& faults, Configuration& c) {
  Sim sim(s, faults, c);
  return sim.run();
}

}  // namespace gpufleet::goodput::model
