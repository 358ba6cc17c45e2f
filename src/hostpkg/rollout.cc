#include "hostpkg/rollout.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include "hostpkg/stage_plan.h"

namespace gpufleet::hostpkg {

namespace {

enum class Class : unsigned char { Done, Pending, InProgress, Failed, Blocked, Malformed };

struct BatchCount {
  std::int64_t started = 0, success = 0, failed = 0, in_progress = 0;
};

struct Work {
  const Compartment* compartment = nullptr;
  CompartmentStatus status;
  std::map<std::int64_t, BatchCount> batches;
  std::vector<const NodeInput*> pending;  // in name order
};

void add_named(std::vector<std::string>& list, std::string s) {
  if (list.size() < kMaxNamedNodes) list.push_back(std::move(s));
}

}  // namespace

RolloutPlan plan_rollout(const RolloutInput& in) {
  RolloutPlan plan;
  const HostPackageSet& set = *in.set;
  static const DeploymentPolicy kConservative = conservative_policy();
  const DeploymentPolicy& policy = in.policy != nullptr ? *in.policy : kConservative;
  DesiredState desired = digest(set);
  plan.target = desired.target;
  plan.paused = set.pause;
  plan.disabled = set.disable;
  if (set.disable) return plan;

  static const std::unordered_set<std::string> kEmpty;
  const auto& outside = in.outside != nullptr ? *in.outside : kEmpty;
  const auto& gated = in.gated != nullptr ? *in.gated : kEmpty;

  // Nodes in name order, so every choice below is deterministic.
  std::vector<const NodeInput*> nodes;
  nodes.reserve(in.nodes.size());
  for (const NodeInput& n : in.nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeInput* a, const NodeInput* b) { return a->facts.name < b->facts.name; });

  // Cluster-wide disruption, over every node (other sets' nodes count too).
  std::unordered_map<std::string_view, std::int64_t> domain_out;
  std::int64_t total_out = 0;
  std::string_view topo = in.cluster != nullptr ? std::string_view(in.cluster->topology_key) : "";
  auto domain_of = [&](const NodeInput& n) -> std::string_view {
    auto it = n.facts.labels.find(topo);
    return it == n.facts.labels.end() ? std::string_view() : std::string_view(it->second);
  };
  auto own_in_progress = [](const NodeInput& n) {
    return n.record != nullptr && n.record->state == NodeState::InProgress;
  };
  auto is_out = [&](const NodeInput& n, Class c) {
    return c == Class::InProgress || c == Class::Failed || !n.facts.ready ||
           n.facts.unschedulable || outside.contains(n.facts.name);
  };

  // Compartment sizes (for percent budgets and the "safer" order) over the set's nodes.
  std::vector<const NodeInput*> members;
  for (const NodeInput* n : nodes) {
    if (set.node_selector.matches(n->facts.labels)) members.push_back(n);
  }
  std::vector<Work> work(policy.compartments.size() + 1);
  for (std::size_t c = 0; c < policy.compartments.size(); ++c)
    work[c].compartment = &policy.compartments[c];
  work.back().compartment = &policy.fallback;
  std::vector<std::int64_t> matched(work.size(), 0);
  for (const NodeInput* n : members) {
    for (std::size_t c = 0; c + 1 < work.size(); ++c) {
      if (work[c].compartment->selector.matches(n->facts.labels)) ++matched[c];
    }
  }
  // Safer first: smaller resolved budget, smaller initial batch, then name.
  std::vector<std::size_t> safety_order;
  for (std::size_t c = 0; c + 1 < work.size(); ++c) safety_order.push_back(c);
  std::sort(safety_order.begin(), safety_order.end(), [&](std::size_t a, std::size_t b) {
    const Compartment& ca = *work[a].compartment;
    const Compartment& cb = *work[b].compartment;
    auto ka = std::make_tuple(ca.budget.resolve(matched[a]), ca.strategy.initial_batch, ca.name);
    auto kb = std::make_tuple(cb.budget.resolve(matched[b]), cb.strategy.initial_batch, cb.name);
    return ka < kb;
  });

  static const NodeRecord kNoRecord;
  bool any_unfinished = false;
  for (const NodeInput* n : nodes) {
    bool member = set.node_selector.matches(n->facts.labels);
    Class cls = Class::Done;
    if (!member) {
      if (own_in_progress(*n)) cls = Class::InProgress;  // left the selector mid-change
    } else if (!n->record_error.empty()) {
      cls = Class::Malformed;
      ++plan.malformed_count;
      add_named(plan.malformed, n->facts.name + ": " + n->record_error);
    } else {
      const NodeRecord& rec = n->record != nullptr ? *n->record : kNoRecord;
      bool current = rec.rollout == desired.target && rec.epoch == in.reset_epoch;
      if (rec.state == NodeState::InProgress) {
        cls = Class::InProgress;
      } else if (rec.state == NodeState::Failed && current) {
        cls = Class::Failed;
      } else {
        std::string reason;
        NodeNeed need =
            rec.state == NodeState::Done && rec.rollout == desired.target && rec.reapply.empty()
                ? NodeNeed::UpToDate  // finished this very change: nothing to plan
                : node_need(desired, rec, &reason);
        if (need == NodeNeed::Blocked) {
          cls = Class::Blocked;
          ++plan.blocked_count;
          add_named(plan.blocked, n->facts.name + ": " + reason);
        } else {
          cls = need == NodeNeed::UpToDate ? Class::Done : Class::Pending;
        }
      }
    }
    if (is_out(*n, cls)) {
      ++total_out;
      ++domain_out[domain_of(*n)];
    }
    if (!member) continue;
    std::size_t c = work.size() - 1;
    for (std::size_t k : safety_order) {
      if (work[k].compartment->selector.matches(n->facts.labels)) {
        c = k;
        break;
      }
    }
    Work& w = work[c];
    CompartmentStatus& st = w.status;
    ++st.nodes;
    if (is_out(*n, cls)) ++st.out;
    switch (cls) {
      case Class::Done: ++st.done; break;
      case Class::Pending:
        ++st.pending;
        w.pending.push_back(n);
        break;
      case Class::InProgress: ++st.in_progress; break;
      case Class::Failed:
        ++st.failed;
        add_named(st.failing_nodes, n->facts.name);
        break;
      case Class::Blocked:
      case Class::Malformed: ++st.blocked; break;
    }
    if (cls != Class::Done) any_unfinished = true;
    const NodeRecord* rec = n->record;
    // A node sent back by onDrift: Reapply (pending again at the same target) left its old
    // batch: it is not a failure of that batch, and it starts in a new one.
    if (rec != nullptr && cls != Class::Malformed && cls != Class::Pending &&
        rec->rollout == desired.target && rec->epoch == in.reset_epoch && rec->batch >= 0) {
      BatchCount& b = w.batches[rec->batch];
      ++b.started;
      if (cls == Class::InProgress)
        ++b.in_progress;
      else if (cls == Class::Failed)
        ++b.failed;
      else if (cls == Class::Done)
        ++b.success;
    }
  }
  plan.complete = !any_unfinished;

  const std::int64_t total_limit =
      in.cluster != nullptr ? in.cluster->max_total.resolve(static_cast<std::int64_t>(nodes.size()))
                            : INT64_MAX;
  const std::int64_t domain_limit = in.cluster != nullptr ? in.cluster->max_per_domain : INT64_MAX;

  for (Work& w : work) {
    CompartmentStatus& st = w.status;
    const Compartment& comp = *w.compartment;
    const Strategy& strat = comp.strategy;
    st.name = comp.name;
    st.budget = comp.budget.resolve(st.nodes);
    // Replay closed batches in order; the last one is closed only once it is full (or
    // nothing is left to start) and none of its nodes runs.
    std::int64_t streak = 0, consecutive = 0;
    std::int64_t open_batch = -1;
    BatchCount open_count;
    std::int64_t open_size = 0;
    for (auto it = w.batches.begin(); it != w.batches.end(); ++it) {
      const BatchCount& b = it->second;
      bool last = std::next(it) == w.batches.end();
      std::int64_t size = strat.batch_size(streak);
      if (last && (b.in_progress > 0 || (b.started < size && st.pending > 0))) {
        open_batch = it->first;
        open_count = b;
        open_size = size;
        break;
      }
      bool pass = static_cast<double>(b.success) * 100.0 >=
                  strat.batch_threshold * static_cast<double>(b.started);
      if (pass) {
        ++streak;
        consecutive = 0;
      } else {
        streak = 0;
        ++consecutive;
      }
    }
    st.streak = streak;
    st.consecutive_failures = consecutive;
    if (consecutive >= strat.failure_threshold) {
      st.stopped = true;
      st.stop_reason = std::to_string(consecutive) +
                       " consecutive failed batches (failureThreshold " +
                       std::to_string(strat.failure_threshold) + ")";
    } else if (st.failed > 0 && static_cast<double>(st.failed) * 100.0 >
                                    strat.safety_limit * static_cast<double>(st.nodes)) {
      st.stopped = true;
      st.stop_reason = std::to_string(st.failed) + " of " + std::to_string(st.nodes) +
                       " nodes failed, over the safetyLimit of " +
                       std::to_string(static_cast<int>(strat.safety_limit)) + "%";
    }
    if (st.stopped) plan.stopped = true;
    std::int64_t room = 0;
    if (open_batch >= 0) {
      st.batch = open_batch;
      st.batch_size = open_size;
      room = open_size - open_count.started;
    } else {
      st.batch = w.batches.empty() ? 0 : w.batches.rbegin()->first + 1;
      st.batch_size = strat.batch_size(streak);
      room = st.batch_size;
    }
    if (st.stopped || set.pause || in.gated_all || st.pending == 0) continue;
    std::int64_t budget_room = st.budget - st.out;
    for (const NodeInput* n : w.pending) {
      if (room <= 0) break;
      if (gated.contains(n->facts.name) || outside.contains(n->facts.name) || !n->facts.ready ||
          (n->facts.unschedulable && !n->facts.cordon_ours)) {
        continue;  // not ours to take: someone else has it out, or an earlier set goes first
      }
      // A node still cordoned by us (failed before a reset) is already counted as out, so it
      // takes a batch slot but no budget.
      if (!n->facts.unschedulable) {
        if (budget_room <= 0) continue;
        std::string_view dom = domain_of(*n);
        if (total_out >= total_limit || domain_out[dom] >= domain_limit) {
          ++plan.waiting_on_cluster_budget;
          continue;
        }
        ++total_out;
        ++domain_out[dom];
        ++st.out;
        --budget_room;
      }
      --room;
      plan.start.push_back(
          NodeStart{n->facts.name, comp.name, st.batch, in.reset_epoch, desired.target});
    }
  }
  for (Work& w : work) {
    if (w.status.nodes > 0 || w.compartment != &policy.fallback)
      plan.compartments.push_back(std::move(w.status));
  }
  return plan;
}

}  // namespace gpufleet::hostpkg
