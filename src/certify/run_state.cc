#include "certify/run_state.h"

#include <algorithm>

#include "core/errors.h"

namespace gpufleet::certify {
namespace {

core::Value strings(const std::vector<std::string>& v) {
  core::Value l = core::Value::list();
  for (const auto& s : v) l.push_back(s);
  return l;
}

std::vector<std::string> strings_of(const core::Value* v) {
  std::vector<std::string> out;
  if (v == nullptr || !v->is_list()) return out;
  for (const auto& s : v->as_list())
    if (s.is_string()) out.push_back(s.as_string());
  return out;
}

std::int64_t int_of(const core::Value& v, std::string_view key) {
  const core::Value* x = v.find(key);
  return x != nullptr && x->is_int() ? x->as_int() : 0;
}

}  // namespace

core::Value CategoryState::to_value() const {
  core::Value v;
  v["name"] = name;
  v["phase"] = phase;
  if (!start_time.empty()) v["startTime"] = start_time;
  if (!completion_time.empty()) v["completionTime"] = completion_time;
  if (!message.empty()) v["message"] = message;
  v["rounds"] = rounds;
  core::Value gs = core::Value::list();
  for (const auto& g : groups) {
    core::Value x;
    x["id"] = static_cast<std::uint64_t>(g.id);
    if (g.round > 0) x["round"] = g.round;
    x["purpose"] = g.purpose;
    x["nodes"] = strings(g.nodes);
    if (g.attempt > 1) x["attempt"] = g.attempt;
    if (!g.earlier.empty()) x["earlier"] = strings(g.earlier);
    if (g.result) {
      core::Value r;
      r["passed"] = g.result->passed;
      if (!g.result->reason.empty()) r["reason"] = g.result->reason;
      if (!g.result->message.empty()) r["message"] = g.result->message;
      if (g.result->attempts > 1) r["attempts"] = g.result->attempts;
      if (!g.result->metrics.empty()) {
        core::Value m = core::Value::map();
        for (const auto& [k, val] : g.result->metrics) m[k] = val;
        r["metrics"] = std::move(m);
      }
      x["result"] = std::move(r);
    }
    gs.push_back(std::move(x));
  }
  v["groups"] = std::move(gs);
  if (!planner.is_null()) v["planner"] = planner;
  core::Value f = core::Value::list();
  for (const auto& n : failed) {
    core::Value x;
    x["node"] = n.node;
    x["reason"] = n.reason;
    x["message"] = n.message;
    f.push_back(std::move(x));
  }
  v["failed"] = std::move(f);
  core::Value inf = core::Value::list();
  for (const auto& i : infrastructure) {
    core::Value x;
    x["nodes"] = strings(i.nodes);
    x["message"] = i.message;
    inf.push_back(std::move(x));
  }
  v["infrastructure"] = std::move(inf);
  return v;
}

CategoryState CategoryState::from_value(const core::Value& v) {
  if (!v.is_map()) throw core::InvalidInput("certify state: not a JSON object");
  CategoryState s;
  s.name = std::string(v.get_string({"name"}));
  s.phase = std::string(v.get_string({"phase"}, "Running"));
  s.start_time = std::string(v.get_string({"startTime"}));
  s.completion_time = std::string(v.get_string({"completionTime"}));
  s.message = std::string(v.get_string({"message"}));
  s.rounds = static_cast<int>(int_of(v, "rounds"));
  if (const core::Value* gs = v.find("groups"); gs != nullptr && gs->is_list()) {
    for (const auto& x : gs->as_list()) {
      GroupState g;
      g.id = static_cast<std::uint32_t>(int_of(x, "id"));
      if (const core::Value* id = x.find("id"); id != nullptr && id->is_uint())
        g.id = static_cast<std::uint32_t>(id->as_uint());
      g.round = static_cast<int>(int_of(x, "round"));
      g.purpose = std::string(x.get_string({"purpose"}));
      g.nodes = strings_of(x.find("nodes"));
      g.attempt = std::max(1, static_cast<int>(int_of(x, "attempt")));
      g.earlier = strings_of(x.find("earlier"));
      if (const core::Value* r = x.find("result"); r != nullptr && r->is_map()) {
        GroupResult res;
        const core::Value* p = r->find("passed");
        res.passed = p != nullptr && p->is_bool() && p->as_bool();
        res.reason = std::string(r->get_string({"reason"}));
        res.message = std::string(r->get_string({"message"}));
        res.attempts = std::max(1, static_cast<int>(int_of(*r, "attempts")));
        if (const core::Value* m = r->find("metrics"); m != nullptr && m->is_map())
          for (const auto& [k, val] : m->as_map())
            if (val.is_number()) res.metrics[k] = val.as_double();
        g.result = std::move(res);
      }
      s.groups.push_back(std::move(g));
    }
  }
  if (const core::Value* p = v.find("planner")) s.planner = *p;
  if (const core::Value* f = v.find("failed"); f != nullptr && f->is_list())
    for (const auto& x : f->as_list())
      s.failed.push_back({std::string(x.get_string({"node"})),
                          std::string(x.get_string({"reason"})),
                          std::string(x.get_string({"message"}))});
  if (const core::Value* f = v.find("infrastructure"); f != nullptr && f->is_list())
    for (const auto& x : f->as_list())
      s.infrastructure.push_back(
          {strings_of(x.find("nodes")), std::string(x.get_string({"message"}))});
  return s;
}

}  // namespace gpufleet::certify
