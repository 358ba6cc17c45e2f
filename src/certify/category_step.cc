#include "certify/category_step.h"

#include <algorithm>
#include <map>

#include "certify/controller_shared.h"
#include "certify/verdict.h"
#include "core/text.h"

namespace gpufleet::certify {

using detail::cut;

namespace {

std::vector<std::vector<std::string>> chunk(const std::vector<std::string>& nodes, int size) {
  std::vector<std::vector<std::string>> out;
  if (size <= 0) size = static_cast<int>(std::max<std::size_t>(nodes.size(), 1));
  for (std::size_t i = 0; i < nodes.size(); i += static_cast<std::size_t>(size))
    out.emplace_back(nodes.begin() + static_cast<std::ptrdiff_t>(i),
                     nodes.begin() + static_cast<std::ptrdiff_t>(std::min(
                                         nodes.size(), i + static_cast<std::size_t>(size))));
  return out;
}

std::vector<std::vector<std::string>> domains(const std::vector<NodeInfo>& nodes) {
  std::map<std::string, std::vector<std::string>> by;
  std::vector<std::vector<std::string>> out;
  for (const auto& n : nodes) {
    if (n.clique.empty())
      out.push_back({n.name});
    else
      by[n.clique].push_back(n.name);
  }
  for (auto& [c, members] : by) out.push_back(std::move(members));
  std::sort(out.begin(), out.end());
  return out;
}

// A node whose device plugin reports fewer GPUs than it has cannot run a full-node workload:
// judged HardwareFailure at once instead of leaving its pods Pending until the timeout.
std::optional<std::string> gpu_shortfall(const NodeInfo& n) {
  if (n.gpu_count <= 0 || n.gpu_allocatable < 0 || n.gpu_allocatable >= n.gpu_count)
    return std::nullopt;
  return "allocatable nvidia.com/gpu is " + std::to_string(n.gpu_allocatable) + " of " +
         std::to_string(n.gpu_count) + " GPUs (a GPU is unhealthy or gone)";
}

}  // namespace

CategoryStart start_category_state(const CategoryPlan& plan, const std::vector<NodeInfo>& targets) {
  CategoryStart out;
  CategoryState& st = out.state;
  st.name = plan.name;
  std::vector<std::string> runnable;
  std::vector<NodeInfo> runnable_info;
  for (const auto& n : targets) {
    if (auto why = gpu_shortfall(n)) {
      st.failed.push_back({n.name, "HardwareFailure", *why});
      continue;
    }
    runnable.push_back(n.name);
    runnable_info.push_back(n);
  }
  std::vector<std::vector<std::string>> groups;
  Scale scale = plan.scale;
  if (scale == Scale::Diagnose && runnable.size() < 2) scale = Scale::PerNode;
  if (scale == Scale::Diagnose) {
    std::vector<std::vector<std::string>> topo;
    for (auto& d : domains(runnable_info))
      if (d.size() > 1) topo.push_back(std::move(d));
    PlannerOptions o;
    o.min_group_size = std::max<std::size_t>(2, static_cast<std::size_t>(plan.workload.min_nodes));
    IsolationPlanner planner(runnable, topo, o);
    add_planner_round(st, planner);
    st.planner = planner.to_value();
  } else {
    if (scale == Scale::PerNode) groups = chunk(runnable, 1);
    if (scale == Scale::WholeSet) groups = chunk(runnable, plan.nodes_per_job);
    if (scale == Scale::NvlinkDomain)
      for (const auto& d : domains(runnable_info))
        for (auto& c : chunk(d, plan.nodes_per_job)) groups.push_back(std::move(c));
    std::uint32_t id = 1;
    for (auto& g : groups) {
      if (g.empty()) continue;
      GroupState gs;
      gs.id = id++;
      gs.purpose = std::string(spec_scale_name(scale));
      gs.nodes = std::move(g);
      st.groups.push_back(std::move(gs));
    }
  }
  out.scale = scale;
  out.runnable = runnable.size();
  return out;
}

void add_planner_round(CategoryState& st, const IsolationPlanner& planner) {
  const Round* r = planner.pending();
  if (r == nullptr) return;
  std::set<std::uint32_t> known;
  for (const auto& g : st.groups) known.insert(g.id);
  for (const GroupTest& t : r->tests) {
    if (known.count(t.id) > 0) continue;
    GroupState g;
    g.id = t.id;
    g.round = r->number;
    g.purpose = std::string(purpose_name(t.purpose));
    g.nodes = t.nodes;
    st.groups.push_back(std::move(g));
  }
  st.rounds = r->number;
}

bool overdue(bool finished, std::optional<std::chrono::system_clock::time_point> since,
             std::chrono::system_clock::time_point now, std::chrono::milliseconds limit) {
  return !finished && since && now - *since > limit;
}

std::string overdue_message(std::string_view kind, std::string_view name,
                            std::chrono::milliseconds limit, bool acknowledged, bool no_launcher) {
  const std::string within =
      " within " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
      " s";
  std::string message = std::string(kind) + " " + std::string(name);
  if (!acknowledged)
    message += " got no condition from an MPI operator" + within +
               ": is the mpi-operator running? (or set certify.launcher=job)";
  else if (no_launcher)
    message += " started no launcher" + within +
               ": its workers were never all Ready (GPUs in use, an image pull failing?)";
  else
    message += " did not end" + within + " (its controller stopped updating it?)";
  return message;
}

AttemptStep decide_attempt(const GroupState& g, GroupResult result, int retries) {
  AttemptStep step;
  const int attempts = retries + 1;
  if (!result.passed && should_retry(result.reason, g.attempt, retries)) {
    // The next attempt is stored before its Job exists (it starts on a later pass).
    step.retry = true;
    step.earlier = cut(result.reason + ": " + result.message, 240);
    step.note = "group " + std::to_string(g.id) + " (" + cut(core::join(g.nodes), 200) +
                "): " + step.earlier + "; attempt " + std::to_string(g.attempt + 1) + " of " +
                std::to_string(attempts);
    return step;
  }
  result.attempts = g.attempt;
  if (g.attempt > 1)
    result.message =
        cut((result.message.empty() ? "" : result.message + "; ") + "attempt " +
                std::to_string(g.attempt) + " of " + std::to_string(attempts) + " (attempt " +
                std::to_string(g.attempt - 1) + ": " + g.earlier.back() + ")",
            480);
  step.result = std::move(result);
  return step;
}

CategoryOutcome decide_outcome(const CategoryState& st, const IsolationVerdict* diagnose) {
  CategoryOutcome out;
  std::map<std::string, NodeFailure> failed;
  for (const auto& f : st.failed) failed[f.node] = f;
  auto first_failure = [&](const std::string& node) -> const GroupState* {
    for (const auto& g : st.groups)
      if (g.result && !g.result->passed &&
          std::find(g.nodes.begin(), g.nodes.end(), node) != g.nodes.end())
        return &g;
    return nullptr;
  };
  if (diagnose != nullptr) {
    const IsolationVerdict& v = *diagnose;
    for (const auto& o : v.nodes) {
      if (o.verdict == NodeVerdict::Healthy) continue;
      const GroupState* g = first_failure(o.node);
      std::string reason = g != nullptr ? g->result->reason : "WorkloadFailed";
      std::string msg = o.message;
      if (g != nullptr) msg += (msg.empty() ? "" : "; ") + g->result->message;
      failed[o.node] = {o.node, reason, cut(msg, 480)};
    }
    for (const auto& f : v.infrastructure) {
      out.infrastructure.push_back({f.nodes, f.message});
      for (const auto& n : f.nodes)
        if (failed.count(n) == 0) failed[n] = {n, "Infrastructure", cut(f.message, 480)};
    }
    out.message = std::to_string(v.rounds) + " rounds, " + std::to_string(v.tests) + " tests";
  } else {
    for (const auto& g : st.groups) {
      if (g.result->passed) continue;
      for (const auto& n : g.nodes) {
        std::string msg = g.nodes.size() > 1 ? "group of " + std::to_string(g.nodes.size()) +
                                                   " nodes failed (scale diagnose names the "
                                                   "node): " +
                                                   g.result->message
                                             : g.result->message;
        failed[n] = {n, g.result->reason, cut(msg, 480)};
      }
    }
  }
  for (auto& [n, f] : failed) out.failed.push_back(std::move(f));
  out.phase = out.failed.empty() ? "Passed" : "Failed";
  return out;
}

std::vector<std::size_t> groups_to_start(const std::vector<const GroupState*>& waiting,
                                         std::set<std::string> busy, int running,
                                         int max_concurrent) {
  std::vector<std::size_t> out;
  const int limit = std::max(1, max_concurrent);
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    const GroupState* g = waiting[i];
    if (running >= limit) break;
    bool clash = std::any_of(g->nodes.begin(), g->nodes.end(),
                             [&](const std::string& n) { return busy.count(n) > 0; });
    if (clash) continue;
    out.push_back(i);
    ++running;
    busy.insert(g->nodes.begin(), g->nodes.end());
  }
  return out;
}

}  // namespace gpufleet::certify
