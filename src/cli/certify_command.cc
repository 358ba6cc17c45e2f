// The certify subsystem in the gpufleet binary: the `certify` controller registration
// (`gpufleet controller --controllers=certify`) and `gpufleet certify report NAME`, which
// prints a Certification's (or WorkloadRun's) results as a table, JSON, or JUnit XML for CI
// systems, read from its status and the result ConfigMaps it owns (docs/certify.md).
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <memory>

#include "certify/controller.h"
#include "cli/command.h"
#include "controller/registry.h"
#include "core/errors.h"
#include "core/json.h"
#include "kube/api/meta.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace gpufleet::cli {
namespace {

const controller::Registration kCertify({
    .name = "certify",
    .description = "runs Certifications, WorkloadRuns and answers ValidationRequests "
                   "(NCCL, DCGM, training workloads; judges them; isolates faulty nodes)",
    .settings = {{"certify.namespace",
                  "namespace of the Certifications answering ValidationRequests (default: "
                  "$POD_NAMESPACE, else default)"},
                 {"certify.launcher",
                  "what multi-node MPI workloads run as: auto (an MPIJob where the cluster "
                  "serves kubeflow.org/v2beta1 MPIJob, else an indexed Job; the default), job, "
                  "mpijob"},
                 {"certify.overdue-grace",
                  "how long past its deadline a group's Job or MPIJob may go without ending "
                  "before it is judged Infrastructure (default 2m, at least 1s)"},
                 {"certify.max-nodes",
                  "the most nodes one Certification or WorkloadRun may test (default 5000); "
                  "a larger one is refused at admission and when it starts"},
                 {"certify.max-gpus",
                  "the most GPUs (the nodes' nvidia.com/gpu.count) one run may occupy "
                  "(default 40000)"},
                 {"certify.max-duration",
                  "the default and the upper bound of a run's spec.maxDuration (default 24h, "
                  "at least 1m); past it the run's workloads are deleted and it ends Failed"}},
    .setup = certify::setup_certify,
});

struct ReportFlags {
  std::string name;
  std::string namespace_;
  std::string kubeconfig;
  std::string context;
  std::string output = "table";
  std::string kind = "certification";
};

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') break;
        out += c;
    }
  }
  return out;
}

struct Report {
  core::Value obj;
  std::optional<certify::Selection> targets;
  std::vector<std::string> category_names;
  std::vector<std::optional<certify::CategoryState>> categories;
};

core::Value report_json(const Report& r) {
  core::Value out;
  out["name"] = kube::name_of(r.obj);
  out["namespace"] = kube::namespace_of(r.obj);
  out["kind"] = r.obj.get_string({"kind"});
  out["phase"] = r.obj.get_string({"status", "phase"}, "Pending");
  out["message"] = r.obj.get_string({"status", "message"});
  core::Value cats = core::Value::list();
  std::map<std::string, core::Value> nodes;
  if (r.targets)
    for (const auto& n : r.targets->nodes) {
      core::Value x;
      x["node"] = n.name;
      x["verdict"] = "Passed";
      nodes[n.name] = std::move(x);
    }
  for (std::size_t i = 0; i < r.category_names.size(); ++i) {
    core::Value c;
    c["name"] = r.category_names[i];
    const auto& st = r.categories[i];
    c["phase"] = st ? st->phase : std::string("Pending");
    if (st) {
      c["groups"] = static_cast<std::int64_t>(st->groups.size());
      if (st->rounds > 0) c["rounds"] = st->rounds;
      if (!st->message.empty()) c["message"] = st->message;
      // Wall time from the category's start to its end (or to now while it runs).
      if (auto start = kube::parse_rfc3339(st->start_time)) {
        auto end = kube::parse_rfc3339(st->completion_time);
        auto until = end ? *end : std::chrono::system_clock::now();
        c["wallSeconds"] =
            std::chrono::duration_cast<std::chrono::milliseconds>(until - *start).count() / 1000.0;
      }
      core::Value groups = core::Value::list();
      for (const auto& g : st->groups) {
        core::Value x;
        x["id"] = static_cast<std::uint64_t>(g.id);
        x["purpose"] = g.purpose;
        for (const auto& n : g.nodes) x["nodes"].push_back(n);
        if (g.result) {
          x["passed"] = g.result->passed;
          if (!g.result->reason.empty()) x["reason"] = g.result->reason;
          if (!g.result->message.empty()) x["message"] = g.result->message;
          for (const auto& [k, v] : g.result->metrics) x["metrics"][k] = v;
        }
        groups.push_back(std::move(x));
      }
      c["groupResults"] = std::move(groups);
      for (const auto& f : st->failed) {
        core::Value& x = nodes[f.node];
        if (x.get_string({"verdict"}) == "Failed") continue;
        x["node"] = f.node;
        x["verdict"] = "Failed";
        x["category"] = st->name;
        x["reason"] = f.reason;
        x["message"] = f.message;
      }
      for (const auto& f : st->infrastructure) {
        core::Value x;
        for (const auto& n : f.nodes) x["nodes"].push_back(n);
        x["message"] = f.message;
        x["category"] = st->name;
        out["infrastructure"].push_back(std::move(x));
      }
    }
    cats.push_back(std::move(c));
  }
  out["categories"] = std::move(cats);
  // A node passed only once every category ran to its end; before that (or when the run's
  // maxDuration cut a category short) it is Pending, or Incomplete once the run has ended.
  const std::string_view phase = out.get_string({"phase"});
  const bool ended = phase == "Passed" || phase == "Failed";
  std::string unfinished;
  for (std::size_t i = 0; i < r.category_names.size() && unfinished.empty(); ++i) {
    const auto& st = r.categories[i];
    if (st ? !st->done() : !ended) unfinished = r.category_names[i];
    if (st && st->phase == "Failed") break;  // later categories were skipped, not unfinished
  }
  for (auto& [n, x] : nodes) {
    if (!unfinished.empty() && x.get_string({"verdict"}) == "Passed") {
      x["verdict"] = ended ? "Incomplete" : "Pending";
      x["category"] = unfinished;
      x["message"] =
          unfinished + (ended ? " did not finish before the run ended" : " not finished");
    }
  }
  core::Value list = core::Value::list();
  for (auto& [n, x] : nodes) list.push_back(x);
  if (r.targets)
    for (const auto& e : r.targets->excluded) {
      core::Value x;
      x["node"] = e.node;
      x["verdict"] = "Excluded";
      x["reason"] = e.reason;
      x["message"] = e.message;
      list.push_back(std::move(x));
    }
  out["nodes"] = std::move(list);
  return out;
}

void print_table(const core::Value& j) {
  std::cout << j.get_string({"kind"}) << " " << j.get_string({"namespace"}) << "/"
            << j.get_string({"name"}) << ": " << j.get_string({"phase"}) << " ("
            << j.get_string({"message"}) << ")\n\n";
  auto or_dash = [](std::string_view v) { return v.empty() ? std::string("-") : std::string(v); };
  std::printf("%-36s %-8s %6s %6s %8s %s\n", "CATEGORY", "PHASE", "ROUNDS", "TESTS", "WALL",
              "DETAIL");
  for (const auto& c : j.find("categories")->as_list()) {
    const core::Value* g = c.find("groups");
    const core::Value* rounds = c.find("rounds");
    const core::Value* wall = c.find("wallSeconds");
    char wall_text[32] = "-";
    if (wall != nullptr && wall->is_number())
      std::snprintf(wall_text, sizeof wall_text, "%.1fs", wall->as_double());
    std::printf("%-36s %-8s %6s %6lld %8s %s\n", std::string(c.get_string({"name"})).c_str(),
                std::string(c.get_string({"phase"})).c_str(),
                rounds ? std::to_string(rounds->as_int()).c_str() : "-",
                g ? static_cast<long long>(g->as_int()) : 0LL, wall_text,
                or_dash(c.get_string({"message"})).c_str());
  }
  std::cout << "\n";
  std::printf("%-28s %-9s %-34s %-19s %s\n", "NODE", "VERDICT", "CATEGORY", "REASON", "MESSAGE");
  for (const auto& n : j.find("nodes")->as_list()) {
    std::printf(
        "%-28s %-9s %-34s %-19s %s\n", std::string(n.get_string({"node"})).c_str(),
        std::string(n.get_string({"verdict"})).c_str(), or_dash(n.get_string({"category"})).c_str(),
        or_dash(n.get_string({"reason"})).c_str(), or_dash(n.get_string({"message"})).c_str());
  }
  if (const core::Value* inf = j.find("infrastructure"); inf && inf->is_list()) {
    std::cout << "\nINFRASTRUCTURE\n";
    for (const auto& f : inf->as_list()) {
      std::string nodes;
      for (const auto& n : f.find("nodes")->as_list())
        nodes += (nodes.empty() ? "" : ",") + n.as_string();
      std::cout << "  " << nodes << ": " << f.get_string({"message"}) << "\n";
    }
  }
}

// One <testsuite> per category, one <testcase> per tested node: CI systems show a failed
// node as a failed test with the verdict reason as the failure type.
void print_junit(const Report& r) {
  std::string name(kube::name_of(r.obj));
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"" +
                    xml_escape(name) + "\">\n";
  for (std::size_t i = 0; i < r.category_names.size(); ++i) {
    const auto& st = r.categories[i];
    std::map<std::string, const certify::NodeFailure*> failed;
    if (st)
      for (const auto& f : st->failed) failed[f.node] = &f;
    std::size_t tests = r.targets ? r.targets->nodes.size() : 0;
    std::size_t skipped = !st || !st->done() ? tests : 0;
    out += "  <testsuite name=\"" + xml_escape(r.category_names[i]) + "\" tests=\"" +
           std::to_string(tests) + "\" failures=\"" + std::to_string(st ? failed.size() : 0) +
           "\" skipped=\"" + std::to_string(skipped) + "\">\n";
    if (r.targets)
      for (const auto& n : r.targets->nodes) {
        out += "    <testcase classname=\"" + xml_escape(name + "." + r.category_names[i]) +
               "\" name=\"" + xml_escape(n.name) + "\"";
        auto it = failed.find(n.name);
        if (st && st->done() && it == failed.end()) {
          out += "/>\n";
          continue;
        }
        out += ">\n";
        if (!st || !st->done())
          out += "      <skipped message=\"" +
                 std::string(st ? "category still running" : "category not run") + "\"/>\n";
        else
          out += "      <failure type=\"" + xml_escape(it->second->reason) + "\" message=\"" +
                 xml_escape(it->second->message) + "\">" + xml_escape(it->second->message) +
                 "</failure>\n";
        out += "    </testcase>\n";
      }
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  std::cout << out;
}

void run_report(const ReportFlags& f) {
  if (f.output != "table" && f.output != "json" && f.output != "junit")
    throw core::InvalidInput("-o " + f.output + ": use table, json or junit");
  kube::ResourceId res;
  if (f.kind == "certification")
    res = certify::resources::certifications();
  else if (f.kind == "workloadrun")
    res = certify::resources::workload_runs();
  else
    throw core::InvalidInput("--kind " + f.kind + ": use certification or workloadrun");
  kube::Client client(kube::load_default_config(f.kubeconfig, f.context));
  std::string ns = f.namespace_.empty() ? client.default_namespace() : f.namespace_;
  Report r;
  auto obj = client.try_get(res, ns, f.name);
  if (!obj) throw core::NotFound(f.kind + " " + ns + "/" + f.name + " not found (check -n)");
  r.obj = *obj;
  if (f.kind == "workloadrun") {
    r.category_names.push_back("workload");
  } else if (const core::Value* cats = r.obj.get({"spec", "categories"}); cats && cats->is_list()) {
    for (const auto& c : cats->as_list()) r.category_names.emplace_back(c.get_string({"name"}));
  }
  std::string store = certify::storage_name(f.kind == "workloadrun", f.name);
  r.targets = certify::read_targets(client, ns, store);
  for (std::size_t i = 0; i < r.category_names.size(); ++i)
    r.categories.push_back(certify::read_category(client, ns, store, static_cast<int>(i)));
  if (f.output == "junit") return print_junit(r);
  core::Value j = report_json(r);
  if (f.output == "json") {
    std::cout << core::to_json(j, core::JsonStyle::Pretty) << "\n";
    return;
  }
  print_table(j);
}

void setup_certify_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("certify", "Certification results (see docs/certify.md)");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<ReportFlags>();
  auto* report = cmd->add_subcommand("report", "Print a Certification's results");
  report->add_option("name", flags->name, "the Certification (or WorkloadRun)")->required();
  report->add_option("-n,--namespace", flags->namespace_, "its namespace (default: kubeconfig's)");
  report->add_option("-o,--output", flags->output, "table | json | junit")->capture_default_str();
  report->add_option("--kind", flags->kind, "certification | workloadrun")->capture_default_str();
  report->add_option("--kubeconfig", flags->kubeconfig, "kubeconfig file");
  report->add_option("--context", flags->context, "kubeconfig context");
  report->callback([flags] { run_report(*flags); });
}

const CommandRegistration kCertifyCommand(setup_certify_command);

}  // namespace
}  // namespace gpufleet::cli
