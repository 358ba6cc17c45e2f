#include "recipe/validate.h"

#include <algorithm>

#include "core/errors.h"
#include "recipe/phase_checks.h"
#include "recipe/requirement.h"

namespace gpufleet::recipe {

using core::Value;

bool ValidationReport::passed() const { return failures() == 0; }

std::size_t ValidationReport::failures() const {
  return static_cast<std::size_t>(
      std::count_if(results.begin(), results.end(),
                    [](const CheckResult& c) { return !c.skipped && c.failed_error(); }));
}

std::size_t ValidationReport::warnings() const {
  return static_cast<std::size_t>(std::count_if(
      results.begin(), results.end(),
      [](const CheckResult& c) { return !c.skipped && !c.passed && !c.failed_error(); }));
}

bool selector_matches(const Value& selector, const Value& labels) {
  const core::Map* sel = selector.if_map();
  if (sel == nullptr) return true;
  for (const auto& e : *sel) {
    const Value* v = labels.find(e.key);
    if (v == nullptr || !(*v == e.value)) return false;
  }
  return true;
}

namespace {

void check_fact(ValidationReport& out, const Constraint& c, const std::string& subject,
                const std::string& actual) {
  Requirement req = parse_requirement(c.requirement, "recipe constraint " + c.name);
  out.results.push_back({"constraint", c.name + " (" + c.fact + ")", subject, c.requirement,
                         actual.empty() ? "unknown" : actual,
                         !actual.empty() && satisfies(req, actual), c.severity, c.remediation});
}

// Nodes of a pool: those its selector matches.
std::vector<const NodeFacts*> pool_nodes(const NodePool& p, const Snapshot& s) {
  std::vector<const NodeFacts*> out;
  for (const NodeFacts& n : s.nodes) {
    if (selector_matches(p.node_selector, n.labels)) out.push_back(&n);
  }
  return out;
}

const WorkloadState* find_workload(const Snapshot& s, const HealthCheck& h) {
  for (const WorkloadState& w : s.workloads) {
    if (w.kind == h.kind && w.name == h.name &&
        (h.kind == "CustomResourceDefinition" || w.namespace_ == h.namespace_)) {
      return &w;
    }
  }
  return nullptr;
}

void check_health(ValidationReport& out, const HealthCheck& h, const Snapshot& s) {
  std::string name =
      h.kind + " " +
      (h.namespace_.empty() ? h.name : h.namespace_ + (h.name.empty() ? "" : "/" + h.name));
  if (h.kind == "Pods") {
    std::vector<std::string> bad;
    for (const PodProblem& p : s.pod_problems) {
      if (p.namespace_ == h.namespace_) {
        bad.push_back(p.pod + " " + (p.init ? "init container " : "container ") + p.container +
                      " " + p.reason + " (phase " + p.phase + ")");
      }
    }
    std::string actual = bad.empty() ? "none" : "";
    for (const std::string& b : bad) actual += (actual.empty() ? "" : "; ") + b;
    out.results.push_back({"health", name, h.component, "no container waiting in a failure state",
                           actual, bad.empty(), "error", ""});
    return;
  }
  const WorkloadState* w = find_workload(s, h);
  if (w == nullptr) {
    out.results.push_back(
        {"health", name, h.component, "present", "not found", false, "error", ""});
    return;
  }
  if (h.kind == "CustomResourceDefinition") {
    out.results.push_back({"health", name, h.component, "Established",
                           w->established ? "Established" : "not Established", w->established,
                           "error", ""});
    return;
  }
  std::string ready_word = h.kind == "Deployment" ? "available" : "ready";
  std::string actual = std::to_string(w->ready) + "/" + std::to_string(w->desired) + " " +
                       ready_word + ", " + std::to_string(w->updated) + " updated";
  // A DaemonSet is fully ready when every scheduled pod is ready and up to date.
  bool ok = h.kind == "DaemonSet" ? w->ready == w->desired && w->updated == w->desired
                                  : w->ready >= w->desired;
  out.results.push_back(
      {"health", name, h.component, "all " + ready_word, actual, ok, "error", ""});
}

// Marks the results from `from` on with their phase.
void set_phase(ValidationReport& out, std::size_t from, std::string_view phase) {
  for (std::size_t i = from; i < out.results.size(); ++i) out.results[i].phase = phase;
}

void check_constraints(ValidationReport& out, const Recipe& recipe, const Snapshot& s) {
  // Node-level facts of cluster-wide constraints hold on every node of every pool (all nodes
  // when no pool selector matches any).
  std::vector<const NodeFacts*> gpu_nodes;
  for (const NodePool& p : recipe.pools) {
    for (const NodeFacts* n : pool_nodes(p, s)) {
      if (std::find(gpu_nodes.begin(), gpu_nodes.end(), n) == gpu_nodes.end())
        gpu_nodes.push_back(n);
    }
  }
  if (gpu_nodes.empty()) {
    for (const NodeFacts& n : s.nodes) gpu_nodes.push_back(&n);
  }
  std::sort(gpu_nodes.begin(), gpu_nodes.end(),
            [](const NodeFacts* a, const NodeFacts* b) { return a->name < b->name; });
  for (const Constraint& c : recipe.constraints) {
    if (c.fact == "kubernetes.version") {
      check_fact(out, c, "cluster", s.kubernetes_version);
      continue;
    }
    for (const NodeFacts* n : gpu_nodes) check_fact(out, c, n->name, n->fact(c.fact));
  }
  for (const NodePool& p : recipe.pools) {
    std::vector<const NodeFacts*> nodes = pool_nodes(p, s);
    if (nodes.empty()) {
      std::string sel;
      for (const auto& e : p.node_selector.as_map()) {
        sel += (sel.empty() ? "" : ",") + e.key + "=" +
               (e.value.if_string() ? *e.value.if_string() : "?");
      }
      out.results.push_back({"constraint", "pool " + p.name + " nodes", "pool " + p.name,
                             "nodes with " + sel, "no node matches", false, "error", ""});
      continue;
    }
    for (const Constraint& c : p.constraints) {
      for (const NodeFacts* n : nodes)
        check_fact(out, c, n->name + " (pool " + p.name + ")", n->fact(c.fact));
    }
  }
}

}  // namespace

ValidationReport validate(const Recipe& recipe, const Snapshot& s) {
  ValidationReport out;
  out.recipe = recipe.name;
  check_constraints(out, recipe, s);
  set_phase(out, 0, "readiness");
  std::size_t from = out.results.size();
  for (const HealthCheck& h : recipe.health) check_health(out, h, s);
  set_phase(out, from, "deployment");
  return out;
}

namespace {

constexpr std::string_view kPhaseNames[] = {"readiness", "deployment", "performance",
                                            "conformance"};

}  // namespace

Phase parse_phase(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  }
  throw core::InvalidInput("--phase '" + std::string(name) +
                           "' is not a phase; use readiness, deployment, performance or "
                           "conformance (several: --phase readiness,deployment)");
}

std::string_view phase_name(Phase p) { return kPhaseNames[static_cast<std::size_t>(p)]; }

ValidationReport validate_phases(const Recipe& recipe, const Snapshot& s,
                                 const std::vector<Phase>& phases,
                                 const PerformancePhase& performance) {
  ValidationReport out;
  out.recipe = recipe.name;
  for (Phase p : phases) {
    std::size_t from = out.results.size();
    switch (p) {
      case Phase::Readiness: check_constraints(out, recipe, s); break;
      case Phase::Deployment:
        for (const HealthCheck& h : recipe.health) check_health(out, h, s);
        detail::check_releases(out, recipe, s);
        detail::check_operator_resources(out, recipe, s);
        break;
      case Phase::Conformance: detail::check_conformance(out, recipe, s); break;
      case Phase::Performance:
        if (!performance) {
          throw core::InvalidInput(
              "--phase performance measures NCCL bus bandwidth on the live cluster (a certify "
              "Certification); it cannot be judged from --snapshot: drop --snapshot and give "
              "--kubeconfig/--context");
        }
        performance(out);
        break;
    }
    set_phase(out, from, phase_name(p));
  }
  return out;
}

std::string report_table(const ValidationReport& r) {
  std::vector<const CheckResult*> rows;
  for (const CheckResult& c : r.results) rows.push_back(&c);
  // Failures first, then warnings, then passed and skipped checks.
  auto rank = [](const CheckResult* c) {
    return c->skipped ? 3 : c->failed_error() ? 0 : c->passed ? 2 : 1;
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const CheckResult* a, const CheckResult* b) { return rank(a) < rank(b); });
  std::size_t w[4] = {6, 5, 7, 8};
  auto cell = [](const std::string& s, std::size_t width) {
    return s + std::string(width > s.size() ? width - s.size() : 0, ' ');
  };
  for (const CheckResult* c : rows) {
    w[0] = std::max(w[0], c->category.size());
    w[1] = std::max(w[1], c->name.size());
    w[2] = std::max(w[2], c->subject.size());
    w[3] = std::max(w[3], c->expected.size());
  }
  std::string out = cell("RESULT", 7) + cell("CHECK", w[0] + 2) + cell("NAME", w[1] + 2) +
                    cell("SUBJECT", w[2] + 2) + cell("EXPECTED", w[3] + 2) + "ACTUAL\n";
  for (const CheckResult* c : rows) {
    out += cell(c->skipped          ? "skip"
                : c->passed         ? "ok"
                : c->failed_error() ? "FAIL"
                                    : "WARN",
                7) +
           cell(c->category, w[0] + 2) + cell(c->name, w[1] + 2) + cell(c->subject, w[2] + 2) +
           cell(c->expected, w[3] + 2) + c->actual + "\n";
  }
  // Each failed check's remediation once, under the table.
  std::vector<std::string> fixes;
  for (const CheckResult* c : rows) {
    if (c->passed || c->remediation.empty()) continue;
    std::string line = "  " + c->name + ": " + c->remediation + "\n";
    if (std::find(fixes.begin(), fixes.end(), line) == fixes.end()) fixes.push_back(line);
  }
  if (!fixes.empty()) {
    out += "remediation:\n";
    for (const std::string& f : fixes) out += f;
  }
  out += std::to_string(r.results.size()) + " checks, " + std::to_string(r.failures()) + " failed" +
         (r.warnings() ? ", " + std::to_string(r.warnings()) + " warnings" : "") + ": recipe " +
         r.recipe + (r.passed() ? " is satisfied\n" : " is NOT satisfied\n");
  return out;
}

Value report_to_value(const ValidationReport& r) {
  Value doc = Value::map();
  doc["recipe"] = r.recipe;
  doc["passed"] = r.passed();
  doc["failures"] = static_cast<std::int64_t>(r.failures());
  doc["warnings"] = static_cast<std::int64_t>(r.warnings());
  Value results = Value::list();
  for (const CheckResult& c : r.results) {
    Value e = Value::map();
    e["category"] = c.category;
    e["name"] = c.name;
    e["subject"] = c.subject;
    e["expected"] = c.expected;
    e["actual"] = c.actual;
    e["passed"] = c.passed;
    e["severity"] = c.severity;
    if (!c.remediation.empty()) e["remediation"] = c.remediation;
    if (!c.phase.empty()) e["phase"] = c.phase;
    if (c.skipped) e["skipped"] = true;
    results.push_back(std::move(e));
  }
  doc["results"] = std::move(results);
  return doc;
}

Value report_to_ctrf(const ValidationReport& r, std::string_view tool_version,
                     std::int64_t start_ms, std::int64_t stop_ms) {
  Value doc = Value::map();
  doc["reportFormat"] = "CTRF";
  doc["specVersion"] = "1.0.0";
  doc["generatedBy"] = "gpufleet validate";
  Value& results = doc["results"];
  results["tool"]["name"] = "gpufleet";
  results["tool"]["version"] = std::string(tool_version);
  std::int64_t passed = 0, failed = 0, skipped = 0, other = 0;
  Value tests = Value::list();
  for (const CheckResult& c : r.results) {
    Value t = Value::map();
    t["name"] = c.name + " [" + c.subject + "]";
    // A failed warning-severity constraint does not fail validation: CTRF's "other".
    std::string status = c.skipped          ? "skipped"
                         : c.passed         ? "passed"
                         : c.failed_error() ? "failed"
                                            : "other";
    t["status"] = status;
    t["duration"] = 0;
    Value suite = Value::list();
    if (!c.phase.empty()) suite.push_back(c.phase);
    suite.push_back(c.category);
    t["suite"] = std::move(suite);
    t["message"] = "expected " + c.expected + ", actual " + c.actual;
    t["type"] = "validation";
    tests.push_back(std::move(t));
    (c.skipped ? skipped : c.passed ? passed : c.failed_error() ? failed : other) += 1;
  }
  Value& sum = results["summary"];
  sum["tests"] = static_cast<std::int64_t>(r.results.size());
  sum["passed"] = passed;
  sum["failed"] = failed;
  sum["skipped"] = skipped;
  sum["pending"] = 0;
  sum["other"] = other;
  sum["start"] = start_ms;
  sum["stop"] = stop_ms;
  results["tests"] = std::move(tests);
  results["environment"]["appName"] = r.recipe;
  return doc;
}

}  // namespace gpufleet::recipe
