#include "goodput/ledger.h"

#include <algorithm>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/time.h"

namespace gpufleet::goodput {

std::string_view cause_name(Cause c) noexcept {
  switch (c) {
    case Cause::GpuXid: return "GpuXid";
    case Cause::Nic: return "Nic";
    case Cause::HostPackage: return "HostPackage";
    case Cause::SentinelRemediation: return "SentinelRemediation";
    case Cause::User: return "User";
    case Cause::Unknown: return "Unknown";
  }
  return "Unknown";
}

std::optional<Cause> parse_cause(std::string_view name) noexcept {
  for (Cause c : kCauses)
    if (cause_name(c) == name) return c;
  return std::nullopt;
}

Observation observation_of(const Job& job, std::int64_t time) {
  Observation o;
  o.time = time;
  o.state = job.state;
  o.nodes = job.nodes;
  o.gpus = job.gpus;
  o.reports_checkpoints = job.reports_checkpoints;
  o.last_checkpoint = job.last_checkpoint;
  o.step_time_seconds = job.step_time_seconds;
  return o;
}

namespace {

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// The last checkpoint that saved work up to the fault: a checkpoint after the fault (written
// while the job still ran) saved everything before it.
std::optional<std::int64_t> checkpoint_for(std::optional<std::int64_t> ckpt, std::int64_t fault) {
  if (!ckpt) return std::nullopt;
  return std::min(*ckpt, fault);
}

// Phases of `i` with the job not running since i.stopped_at until `restart_end`, or (never
// stopped) looking Running until `running_end`.
Phases compute(const Interruption& i, std::int64_t running_end, std::int64_t restart_end) {
  Phases p;
  const std::int64_t f = i.fault_at;
  const std::int64_t run_end = i.stopped_at ? *i.stopped_at : running_end;
  const std::int64_t detect_end =
      i.acted_at ? std::clamp(*i.acted_at, std::min(f, run_end), run_end) : run_end;
  p.detection = std::max<std::int64_t>(0, detect_end - f);
  p.drain = std::max<std::int64_t>(0, run_end - std::max(detect_end, f));
  if (i.stopped_at) p.restart = std::max<std::int64_t>(0, restart_end - *i.stopped_at);
  if (i.reports_checkpoints) {
    const std::int64_t from = std::max(i.checkpoint.value_or(i.run_since), i.run_since);
    p.redone = std::max<std::int64_t>(0, std::min(f, run_end) - from);
  }
  return p;
}

bool node_matches(const std::vector<std::string>& nodes, const std::string& node) {
  return node.empty() || std::binary_search(nodes.begin(), nodes.end(), node);
}

}  // namespace

void Ledger::add_totals(const Interruption& i, int sign) {
  CauseTotals& t = totals_[static_cast<std::size_t>(i.cause)];
  t.interruptions += sign;
  t.detection += sign * i.phases.detection;
  t.drain += sign * i.phases.drain;
  t.restart += sign * i.phases.restart;
  if (i.phases.redone)
    t.redone += sign * *i.phases.redone;
  else
    t.redone_unknown += sign;
}

void Ledger::settle_open(std::int64_t at, bool resumed) {
  Interruption i = std::move(*open_);
  open_.reset();
  if (resumed) i.resumed_at = at;
  i.phases = compute(i, at, at);
  add_totals(i, +1);
  history_.push_back(std::move(i));
  if (history_.size() > kMaxHistory)
    history_.erase(history_.begin(), history_.end() - static_cast<std::ptrdiff_t>(kMaxHistory));
}

void Ledger::cancel_open(std::int64_t upto) {
  running_ += std::max<std::int64_t>(0, upto - open_->fault_at);
  open_.reset();
}

bool Ledger::observe(const Observation& o) {
  if (terminal() || (observed_at_ && o.time < *observed_at_)) return false;
  const Ledger before = *this;
  const std::int64_t t = o.time;
  if (observed_at_) {
    const std::int64_t prev = *observed_at_;
    if (!started_at_) {
      queued_ += t - prev;
    } else if (state_ == JobState::Running) {
      std::int64_t upto = t;
      if (open_) upto = std::min(t, std::max(prev, open_->fault_at));
      running_ += std::max<std::int64_t>(0, upto - prev);
      if (open_ && open_->ended_at && *open_->ended_at <= t) cancel_open(t);
    }
  }
  const JobState next = o.state;
  const bool next_terminal = next == JobState::Succeeded || next == JobState::Failed;
  if (!started_at_) {
    if (next == JobState::Running) {
      started_at_ = t;
      run_since_ = t;
    } else if (next_terminal) {
      ended_at_ = t;
    }
    state_ = next == JobState::Interrupted ? JobState::Pending : next;
  } else if (state_ == JobState::Running && next != JobState::Running) {
    if (!open_ && !next_terminal) {
      Interruption i;
      i.fault_at = t;
      i.run_since = run_since_;
      open_ = std::move(i);
    }
    if (open_) {
      open_->stopped_at = t;
      open_->reports_checkpoints = open_->reports_checkpoints || reports_checkpoints_;
      if (open_->incident.empty())
        open_->checkpoint = checkpoint_for(last_checkpoint_, open_->fault_at);
    }
    if (next_terminal) {
      if (open_) settle_open(t, false);
      ended_at_ = t;
      state_ = next;
    } else {
      state_ = JobState::Interrupted;
    }
  } else if (state_ != JobState::Running && next == JobState::Running) {
    run_since_ = t;
    if (open_) settle_open(t, true);
    state_ = next;
  } else if (next_terminal) {
    if (open_) settle_open(t, false);
    ended_at_ = t;
    state_ = next;
  }
  if (next == JobState::Running) {
    nodes_ = sorted_unique(o.nodes);
    gpus_ = o.gpus;
  }
  reports_checkpoints_ = reports_checkpoints_ || o.reports_checkpoints || o.last_checkpoint;
  if (o.last_checkpoint)
    last_checkpoint_ = std::max(last_checkpoint_.value_or(*o.last_checkpoint), *o.last_checkpoint);
  if (o.step_time_seconds) step_time_seconds_ = o.step_time_seconds;
  if (open_) {
    open_->reports_checkpoints = open_->reports_checkpoints || reports_checkpoints_;
    if (auto c = checkpoint_for(last_checkpoint_, open_->fault_at))
      open_->checkpoint = std::max(open_->checkpoint.value_or(*c), *c);
  }
  observed_at_ = t;
  return !(before == *this);
}

bool Ledger::interruption(const InterruptionEvent& e) {
  if (!started_at_ || terminal() || !observed_at_) return false;
  const Ledger before = *this;
  if (e.fault_at > *observed_at_ && node_matches(nodes_, e.node)) {
    // A fault after the last observation: the state held until it (the pods did not change).
    Observation held;
    held.time = e.fault_at;
    held.state = state_;
    held.nodes = nodes_;
    held.gpus = gpus_;
    observe(held);
  }
  const std::int64_t now = *observed_at_;
  if (open_ && !e.incident.empty() && open_->incident == e.incident) {
    // The same incident again, maybe with more of its times known.
    if (e.acted_at) open_->acted_at = std::min(open_->acted_at.value_or(*e.acted_at), *e.acted_at);
    if (e.ended_at) open_->ended_at = std::min(open_->ended_at.value_or(*e.ended_at), *e.ended_at);
    if (!open_->stopped_at && open_->ended_at && *open_->ended_at <= now) cancel_open(now);
    return !(before == *this);
  }
  if (!node_matches(nodes_, e.node) || e.fault_at < run_since_) return false;
  if (!open_) {
    // The job still runs: the incident may yet stop it. One that ended while the job kept
    // running did not harm it.
    if (e.ended_at && *e.ended_at <= now) return false;
    Interruption i;
    i.incident = e.incident;
    i.cause = e.cause;
    i.node = e.node;
    i.fault_at = e.fault_at;
    i.acted_at = e.acted_at;
    i.ended_at = e.ended_at;
    i.run_since = run_since_;
    i.reports_checkpoints = reports_checkpoints_;
    i.checkpoint = checkpoint_for(last_checkpoint_, e.fault_at);
    running_ -= now - e.fault_at;  // counted Running, now held back as detection or drain
    open_ = std::move(i);
    return true;
  }
  if (open_->incident.empty() && open_->stopped_at && e.fault_at <= *open_->stopped_at &&
      (!e.ended_at || *e.ended_at >= *open_->stopped_at)) {
    // The job stopped with no known cause; this incident, begun before, explains it.
    running_ -= *open_->stopped_at - e.fault_at;
    open_->incident = e.incident;
    open_->cause = e.cause;
    open_->node = e.node;
    open_->fault_at = e.fault_at;
    open_->acted_at = e.acted_at;
    open_->ended_at = e.ended_at;
    if (open_->checkpoint) open_->checkpoint = std::min(*open_->checkpoint, e.fault_at);
    return true;
  }
  // Another incident while the job is already interrupted: the first known stays the cause.
  if (e.incident.empty() || e.incident == open_->incident) return false;
  auto& also = open_->also;
  if (std::find(also.begin(), also.end(), e.incident) != also.end() || also.size() >= kMaxAlso)
    return false;
  also.insert(std::upper_bound(also.begin(), also.end(), e.incident), e.incident);
  return !(before == *this);
}

Phases Ledger::phases_of(const Interruption& i, std::int64_t now) const {
  if (!open_ || !(i == *open_)) return i.phases;
  const std::int64_t end = std::max(now, observed_at_.value_or(now));
  return compute(i, end, end);
}

Summary Ledger::summary(std::int64_t now) const {
  Summary s;
  s.state = state_;
  s.gpus = gpus_;
  s.queued = queued_;
  if (!started_at_) return s;
  // The last state holds until `now`: a copy observes it again then.
  Ledger at = *this;
  const std::int64_t end = ended_at_ ? *ended_at_ : std::max(now, observed_at_.value_or(now));
  if (!terminal() && end > *observed_at_) {
    Observation o;
    o.time = end;
    o.state = state_;
    o.nodes = nodes_;
    o.gpus = gpus_;
    at.observe(o);
  }
  s.queued = at.queued_;
  s.by_cause = at.totals_;
  if (at.open_) {
    Interruption open = *at.open_;
    open.phases = compute(open, end, end);
    CauseTotals& t = s.by_cause[static_cast<std::size_t>(open.cause)];
    t.interruptions += 1;
    t.detection += open.phases.detection;
    t.drain += open.phases.drain;
    t.restart += open.phases.restart;
    if (open.phases.redone)
      t.redone += *open.phases.redone;
    else
      t.redone_unknown += 1;
  }
  std::int64_t redone = 0;
  for (const auto& t : s.by_cause) {
    s.interruptions += t.interruptions;
    s.redone_unknown += t.redone_unknown;
    redone += t.redone;
  }
  s.wall = end - *started_at_;
  s.productive = std::max<std::int64_t>(0, at.running_ - redone);
  s.lost = s.wall - s.productive;
  s.ettr = s.wall > 0 ? static_cast<double>(s.productive) / static_cast<double>(s.wall) : 1.0;
  return s;
}

// --- persisted form ------------------------------------------------------------------------

namespace {

constexpr std::int64_t kPersistedVersion = 1;

std::string rfc3339(std::int64_t t) {
  core::Timestamp ts;
  ts.seconds = t;
  return ts.to_rfc3339(core::TimestampPrecision::Seconds);
}

void set_time(core::Value& m, std::string_view key, const std::optional<std::int64_t>& t) {
  if (t) m[key] = rfc3339(*t);
}

core::Value strings_value(const std::vector<std::string>& v) {
  core::Value l = core::Value::list();
  for (const auto& s : v) l.push_back(s);
  return l;
}

core::Value interruption_value(const Interruption& i, bool settled) {
  core::Value m = core::Value::map();
  if (!i.incident.empty()) m["incident"] = i.incident;
  m["cause"] = std::string(cause_name(i.cause));
  if (!i.node.empty()) m["node"] = i.node;
  m["faultAt"] = rfc3339(i.fault_at);
  set_time(m, "actedAt", i.acted_at);
  set_time(m, "endedAt", i.ended_at);
  set_time(m, "stoppedAt", i.stopped_at);
  set_time(m, "resumedAt", i.resumed_at);
  m["runSince"] = rfc3339(i.run_since);
  m["reportsCheckpoints"] = i.reports_checkpoints;
  set_time(m, "checkpointAt", i.checkpoint);
  if (!i.also.empty()) m["also"] = strings_value(i.also);
  if (settled) {
    m["detectionSeconds"] = i.phases.detection;
    m["drainSeconds"] = i.phases.drain;
    m["restartSeconds"] = i.phases.restart;
    if (i.phases.redone) m["redoneSeconds"] = *i.phases.redone;
  }
  return m;
}

constexpr std::string_view kTimeFix = "write an RFC 3339 time, e.g. \"2025-03-01T12:00:00Z\"";
constexpr std::int64_t kMaxSeconds = core::Timestamp::kMaxSeconds - core::Timestamp::kMinSeconds;

std::optional<std::int64_t> read_time(core::FieldReader& r, std::string_view key) {
  const core::Value* v = r.get(key);
  if (v == nullptr) return std::nullopt;
  const auto t = v->is_string() ? core::Timestamp::try_parse_rfc3339(v->as_string())
                                : std::optional<core::Timestamp>{};
  if (!t) r.fail(key, *v, "is not an RFC 3339 time", kTimeFix);
  return t->seconds;
}

std::int64_t required_time(core::FieldReader& r, std::string_view key) {
  if (!r.has(key)) r.required_string(key, kTimeFix);  // throws "is required"
  return *read_time(r, key);
}

std::int64_t seconds(core::FieldReader& r, std::string_view key) {
  return r.integer(key, 0, 0, kMaxSeconds, "write whole seconds, 0 or more");
}

std::vector<std::string> read_strings(core::FieldReader& r, std::string_view key, std::size_t max) {
  std::vector<std::string> out;
  const core::Value* v = r.get(key);
  if (v == nullptr) return out;
  if (!v->is_list()) r.fail(key, *v, "is not a list", "write a list of names");
  if (v->size() > max)
    r.fail(key, *v, "has " + std::to_string(v->size()) + " entries",
           "at most " + std::to_string(max));
  for (std::size_t i = 0; i < v->size(); ++i) {
    const core::Value& e = (*v)[i];
    if (!e.is_string() || e.as_string().empty())
      core::fail_field(r.source(), r.field(key) + "[" + std::to_string(i) + "]",
                       "value " + core::describe_value(e) + " is not a name",
                       "write a non-empty string");
    out.push_back(e.as_string());
  }
  if (!std::is_sorted(out.begin(), out.end()) ||
      std::adjacent_find(out.begin(), out.end()) != out.end())
    r.fail(key, *v, "is not sorted or has duplicates", "list each name once, sorted");
  return out;
}

Cause read_cause(core::FieldReader& r, std::string_view key) {
  return *parse_cause(
      r.one_of(key, std::nullopt,
               {"GpuXid", "Nic", "HostPackage", "SentinelRemediation", "User", "Unknown"}));
}

Interruption read_interruption(const core::Value& v, const std::string& source,
                               const std::string& path, bool settled) {
  if (!v.is_map())
    core::fail_field(source, path, "value " + core::describe_value(v) + " is not a map",
                     "write an interruption as a map");
  core::FieldReader r(v, source, path);
  Interruption i;
  i.incident = r.string("incident", "");
  i.cause = read_cause(r, "cause");
  i.node = r.string("node", "");
  i.fault_at = required_time(r, "faultAt");
  i.acted_at = read_time(r, "actedAt");
  i.ended_at = read_time(r, "endedAt");
  i.stopped_at = read_time(r, "stoppedAt");
  i.resumed_at = read_time(r, "resumedAt");
  i.run_since = required_time(r, "runSince");
  i.reports_checkpoints = r.boolean("reportsCheckpoints", false);
  i.checkpoint = read_time(r, "checkpointAt");
  i.also = read_strings(r, "also", kMaxAlso);
  if (settled) {
    i.phases.detection = seconds(r, "detectionSeconds");
    i.phases.drain = seconds(r, "drainSeconds");
    i.phases.restart = seconds(r, "restartSeconds");
    if (r.has("redoneSeconds")) i.phases.redone = seconds(r, "redoneSeconds");
    if (i.phases.redone && !i.reports_checkpoints)
      r.fail("redoneSeconds", *v.find("redoneSeconds"), "is set for a job without checkpoints",
             "leave it out: without checkpoints the redone work is unknown");
  } else {
    for (const char* k :
         {"detectionSeconds", "drainSeconds", "restartSeconds", "redoneSeconds", "resumedAt"})
      if (r.has(k))
        r.fail(k, *v.find(k), "is set on the open interruption",
               "only a settled interruption (in history) has it");
  }
  r.done();
  if (i.fault_at < i.run_since)
    r.fail("faultAt", *v.find("faultAt"), "is before runSince",
           "an interruption's fault lies within the run it stopped");
  if (i.stopped_at && *i.stopped_at < i.run_since)
    r.fail("stoppedAt", *v.find("stoppedAt"), "is before runSince",
           "the job stops after its run began");
  if (i.resumed_at && (!i.stopped_at || *i.resumed_at < *i.stopped_at))
    r.fail("resumedAt", *v.find("resumedAt"), "is not after stoppedAt",
           "a job resumes after it stopped");
  return i;
}

}  // namespace

core::Value Ledger::to_value() const {
  core::Value m = core::Value::map();
  m["version"] = kPersistedVersion;
  core::Value job = core::Value::map();
  job["namespace"] = key_.ns;
  if (!key_.label.empty()) job["label"] = key_.label;
  job["name"] = key_.name;
  m["job"] = std::move(job);
  m["state"] = std::string(state_name(state_));
  set_time(m, "observedAt", observed_at_);
  set_time(m, "startedAt", started_at_);
  set_time(m, "endedAt", ended_at_);
  if (started_at_) m["runSince"] = rfc3339(run_since_);
  m["gpus"] = gpus_;
  if (!nodes_.empty()) m["nodes"] = strings_value(nodes_);
  core::Value ck = core::Value::map();
  ck["reported"] = reports_checkpoints_;
  set_time(ck, "lastAt", last_checkpoint_);
  if (step_time_seconds_) ck["stepTimeSeconds"] = *step_time_seconds_;
  m["checkpoints"] = std::move(ck);
  m["queuedSeconds"] = queued_;
  m["runningSeconds"] = running_;
  core::Value totals = core::Value::map();
  for (Cause c : kCauses) {
    const CauseTotals& t = totals_[static_cast<std::size_t>(c)];
    if (t == CauseTotals{}) continue;
    core::Value tv = core::Value::map();
    tv["interruptions"] = t.interruptions;
    tv["detectionSeconds"] = t.detection;
    tv["drainSeconds"] = t.drain;
    tv["restartSeconds"] = t.restart;
    tv["redoneSeconds"] = t.redone;
    tv["redoneUnknown"] = t.redone_unknown;
    totals[cause_name(c)] = std::move(tv);
  }
  m["totals"] = std::move(totals);
  if (open_) m["open"] = interruption_value(*open_, false);
  if (!history_.empty()) {
    core::Value h = core::Value::list();
    for (const auto& i : history_) h.push_back(interruption_value(i, true));
    m["history"] = std::move(h);
  }
  return m;
}

Ledger Ledger::from_value(const core::Value& v, std::string_view source_view) {
  const std::string source(source_view);
  if (!v.is_map())
    core::fail_field(source, "", "value " + core::describe_value(v) + " is not a map",
                     "a goodput ledger is a map (Ledger::to_value)");
  core::FieldReader r(v, source, "");
  r.integer("version", std::nullopt, kPersistedVersion, kPersistedVersion,
            "this gpufleet reads ledger version 1");
  Ledger l;
  {
    const core::Value* job = r.get("job");
    if (job == nullptr) r.required_string("job", "write {namespace, name[, label]}");
    if (!job->is_map()) r.fail("job", *job, "is not a map", "write {namespace, name[, label]}");
    core::FieldReader jr(*job, source, "job");
    l.key_.ns = jr.string("namespace", "");
    l.key_.label = jr.string("label", "");
    l.key_.name = jr.string("name", "");
    jr.done();
  }
  const std::string state =
      r.one_of("state", std::nullopt, {"Pending", "Running", "Interrupted", "Succeeded", "Failed"});
  l.state_ = *parse_state(state);
  l.observed_at_ = read_time(r, "observedAt");
  l.started_at_ = read_time(r, "startedAt");
  l.ended_at_ = read_time(r, "endedAt");
  if (auto rs = read_time(r, "runSince")) l.run_since_ = *rs;
  l.gpus_ = r.integer("gpus", 0, 0, 1'000'000, "the job's GPU count");
  l.nodes_ = read_strings(r, "nodes", kMaxNodes);
  if (const core::Value* ck = r.get("checkpoints")) {
    if (!ck->is_map())
      r.fail("checkpoints", *ck, "is not a map", "write {reported, lastAt, stepTimeSeconds}");
    core::FieldReader cr(*ck, source, "checkpoints");
    l.reports_checkpoints_ = cr.boolean("reported", false);
    l.last_checkpoint_ = read_time(cr, "lastAt");
    if (cr.has("stepTimeSeconds"))
      l.step_time_seconds_ =
          cr.number("stepTimeSeconds", std::nullopt, 1e-9, 1e9, "seconds per training step");
    cr.done();
  }
  l.queued_ = seconds(r, "queuedSeconds");
  l.running_ = seconds(r, "runningSeconds");
  if (const core::Value* totals = r.get("totals")) {
    if (!totals->is_map()) r.fail("totals", *totals, "is not a map", "write a map per cause");
    for (const auto& [name, tv] : totals->as_map()) {
      const auto c = parse_cause(name);
      if (!c)
        core::fail_field(source, "totals." + name, "is not a cause",
                         "use one of: GpuXid, Nic, HostPackage, SentinelRemediation, User, "
                         "Unknown");
      if (!tv.is_map())
        core::fail_field(source, "totals." + name,
                         "value " + core::describe_value(tv) + " is not a map",
                         "write the totals of one cause");
      core::FieldReader tr(tv, source, "totals." + name);
      CauseTotals& t = l.totals_[static_cast<std::size_t>(*c)];
      t.interruptions = seconds(tr, "interruptions");
      t.detection = seconds(tr, "detectionSeconds");
      t.drain = seconds(tr, "drainSeconds");
      t.restart = seconds(tr, "restartSeconds");
      t.redone = seconds(tr, "redoneSeconds");
      t.redone_unknown = seconds(tr, "redoneUnknown");
      tr.done();
      if (t.redone_unknown > t.interruptions)
        tr.fail("redoneUnknown", *tv.find("redoneUnknown"), "exceeds interruptions",
                "at most one per interruption");
    }
  }
  if (const core::Value* open = r.get("open"))
    l.open_ = read_interruption(*open, source, "open", false);
  if (const core::Value* h = r.get("history")) {
    if (!h->is_list()) r.fail("history", *h, "is not a list", "write a list of interruptions");
    if (h->size() > kMaxHistory)
      r.fail("history", *h, "has " + std::to_string(h->size()) + " entries",
             "at most " + std::to_string(kMaxHistory));
    for (std::size_t i = 0; i < h->size(); ++i)
      l.history_.push_back(
          read_interruption((*h)[i], source, "history[" + std::to_string(i) + "]", true));
  }
  r.done();
  // What the state machine never produces.
  const bool running = l.state_ == JobState::Running || l.state_ == JobState::Interrupted;
  const bool ended = l.state_ == JobState::Succeeded || l.state_ == JobState::Failed;
  if (running && !l.started_at_)
    r.fail("state", *v.find("state"), "needs startedAt",
           "a job runs or is interrupted only after it started");
  if (ended != l.ended_at_.has_value())
    r.fail("state", *v.find("state"), ended ? "needs endedAt" : "is not final but endedAt is set",
           "endedAt is set exactly when the state is Succeeded or Failed");
  if ((l.started_at_ || l.ended_at_) && !l.observed_at_) r.required_string("observedAt", kTimeFix);
  if (l.started_at_ && (*l.observed_at_ < *l.started_at_ || l.run_since_ < *l.started_at_ ||
                        l.run_since_ > *l.observed_at_))
    r.fail("runSince", v.find("runSince") ? *v.find("runSince") : core::Value(),
           "is not between startedAt and observedAt", "startedAt <= runSince <= observedAt");
  if (l.open_) {
    if (!running)
      r.fail("open", *v.find("open"), "is set while the job is " + state,
             "an open interruption belongs to a Running or Interrupted job");
    if (l.open_->stopped_at.has_value() != (l.state_ == JobState::Interrupted))
      core::fail_field(source, "open.stoppedAt",
                       l.open_->stopped_at ? "is set while the job is Running"
                                           : "is missing while the job is Interrupted",
                       "stoppedAt is set exactly when the job is Interrupted");
  } else if (l.state_ == JobState::Interrupted) {
    r.fail("state", *v.find("state"), "is Interrupted without an open interruption",
           "an Interrupted job has `open`");
  }
  return l;
}

}  // namespace gpufleet::goodput
