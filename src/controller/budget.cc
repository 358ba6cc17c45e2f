#include "controller/budget.h"

#include <unordered_set>

#include "api/resources.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "controller/status.h"
#include "core/errors.h"
#include "core/log.h"
#include "kube/api/conditions.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/client.h"

namespace gpufleet::controller {
namespace {

using namespace std::chrono_literals;

constexpr const char* kFieldManager = "gpufleet-budget";

std::string joined(const core::Value& list, std::string_view key, std::size_t most) {
  std::string out;
  std::size_t n = 0;
  for (const auto& e : list.as_list()) {
    if (n++ == most) {
      out += ", ...";
      break;
    }
    if (!out.empty()) out += ", ";
    out += e.get_string({key});
  }
  return out;
}

class BudgetReconciler : public Reconciler {
 public:
  BudgetReconciler(kube::Client& client, const Cache& budgets, const Cache& nodes,
                   const Cache& incidents)
      : budgets_(budgets),
        nodes_(nodes),
        incidents_(incidents),
        status_(client, api::disruption_budgets(), "DisruptionBudget", kFieldManager) {}

  Result reconcile(const Request& req, std::stop_token) override {
    kube::ObjectPtr obj = budgets_.get(req.key());
    if (obj == nullptr) return {};
    const auto now = std::chrono::system_clock::now();
    const core::Value* old_status = obj->find("status");
    core::Value status = core::Value::map();
    core::Value conditions = core::Value::list();
    if (old_status != nullptr) {
      if (const core::Value* c = old_status->find("conditions"); c && c->is_list()) conditions = *c;
    }
    const std::int64_t generation = obj->get({"metadata", "generation"}) != nullptr
                                        ? obj->get({"metadata", "generation"})->as_int()
                                        : 0;
    auto cond = [&](std::string type, bool on, std::string reason, std::string message) {
      kube::Condition c;
      c.type = std::move(type);
      c.status = on ? "True" : "False";
      c.reason = std::move(reason);
      c.message = std::move(message);
      c.observed_generation = generation;
      kube::set_condition(conditions, c, now);
    };
    kube::DisruptionBudgetSpec spec;
    try {
      spec = kube::parse_disruption_budget(*obj);
    } catch (const core::InvalidInput& e) {
      // Stored past the CRD's rules (no webhook at the time): say so; the controllers reading
      // it fall back to their own settings.
      cond("Valid", false, "InvalidSpec", e.what());
      kube::remove_condition(conditions, "Exhausted");
      kube::remove_condition(conditions, "DomainsAtLimit");
      status["observedGeneration"] = generation;
      status["conditions"] = std::move(conditions);
      write(*obj, old_status, status);
      return {};
    }
    std::unordered_set<std::string> open;
    incidents_.for_each_compact([&](const kube::CompactObject& o) {
      std::string_view node = o.root().get_string({"metadata", "labels", kube::kIncidentNodeLabel});
      if (!node.empty() && kube::incident_open(o.root().get_string({"status", "phase"})))
        open.emplace(node);
    });
    std::vector<kube::NodeOutFacts> facts;
    nodes_.for_each_compact([&](const kube::CompactObject& o) {
      facts.push_back(
          kube::node_out_facts(o, spec.topology_key, open.contains(std::string(o.name()))));
    });
    status = kube::budget_status(spec, facts);
    const std::int64_t out = status.find("unavailable")->as_int();
    const std::int64_t max = status.find("maxUnavailable")->as_int();
    const std::string counts = std::to_string(out) + " of " + std::to_string(facts.size()) +
                               " nodes out, maxUnavailable " + spec.max_unavailable.to_string() +
                               " = " + std::to_string(max);
    cond("Valid", true, "SpecValid", "the spec is valid");
    if (out > max) {
      cond("Exhausted", true, "OverLimit",
           counts + "; nothing new is taken out (quarantines still go on at once)");
    } else if (out == max) {
      cond("Exhausted", true, "AtLimit", counts + "; nothing new is taken out until one returns");
    } else {
      cond("Exhausted", false, "WithinBudget", counts);
    }
    if (spec.topology_key.empty()) {
      kube::remove_condition(conditions, "DomainsAtLimit");
    } else {
      const std::int64_t full = status.find("domainsAtLimit")->as_int();
      if (full > 0) {
        cond("DomainsAtLimit", true, "DomainFull",
             std::to_string(full) + " " + spec.topology_key +
                 " domain(s) at maxUnavailablePerDomain " + std::to_string(spec.max_per_domain) +
                 " (" + joined(*status.find("domains"), "domain", 5) + "); their nodes wait");
      } else {
        cond("DomainsAtLimit", false, "WithinBudget",
             "every " + spec.topology_key + " domain is below maxUnavailablePerDomain " +
                 std::to_string(spec.max_per_domain));
      }
    }
    status["observedGeneration"] = generation;
    status["conditions"] = std::move(conditions);
    write(*obj, old_status, status);
    return {};
  }

 private:
  void write(const core::Value& obj, const core::Value* old_status, const core::Value& status) {
    if (old_status != nullptr && *old_status == status) return;  // converged: write nothing
    status_.apply("", kube::name_of(obj), status);
  }

  const Cache& budgets_;
  const Cache& nodes_;
  const Cache& incidents_;
  StatusWriter status_;
};

}  // namespace

BudgetReader::BudgetReader(kube::Client& client, std::chrono::milliseconds ttl)
    : client_(client), ttl_(ttl) {}

BudgetReader::Snapshot BudgetReader::get() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (read_at_ && now - *read_at_ < ttl_) return last_;
  Snapshot s;
  std::optional<core::Value> obj =
      client_.try_get(api::disruption_budgets(), "", std::string(kube::kDisruptionBudgetName));
  if (obj) {
    try {
      s.spec = kube::parse_disruption_budget(*obj);
      s.present = true;
    } catch (const core::InvalidInput& e) {
      s.error = e.what();
    }
  }
  last_ = s;
  read_at_ = now;
  return s;
}

void setup_budget(Manager& manager, const Context&) {
  const kube::ResourceId& res = api::disruption_budgets();
  manager.admission().add(res.group, "DisruptionBudget", [](const AdmissionRequest& r) {
    if (r.operation != "CREATE" && r.operation != "UPDATE") return AdmissionResult::allow();
    (void)kube::parse_disruption_budget(r.object);  // InvalidInput: denied with its words
    return AdmissionResult::allow();
  });
  SourceOptions nodes_src;
  nodes_src.cache.shape.prune = {"status.images"};
  // Kubelets rewrite status every few seconds; only what "out" reads matters.
  nodes_src.predicates.push_back([](const WatchEvent& ev) {
    if (ev.old_obj == nullptr) return true;
    const core::Value& a = *ev.old_obj;
    const core::Value& b = ev.obj;
    auto same = [&](std::initializer_list<std::string_view> path) {
      const core::Value* x = a.get(path);
      const core::Value* y = b.get(path);
      return x == nullptr ? y == nullptr : y != nullptr && *x == *y;
    };
    return kube::node::unschedulable(a) != kube::node::unschedulable(b) ||
           kube::node::ready(a) != kube::node::ready(b) || !same({"metadata", "annotations"}) ||
           !same({"metadata", "labels"});
  });
  Cache& budgets = manager.cache(res);
  Cache& nodes = manager.cache(kube::resources::nodes(), nodes_src.cache);
  Cache& incidents = manager.cache(api::remediations());
  MapFunc to_default = [](const core::Value&) {
    return std::vector<Request>{Request{"", std::string(kube::kDisruptionBudgetName)}};
  };
  manager.controller("budget")
      .for_resource(res, "DisruptionBudget")
      .watches(kube::resources::nodes(), to_default, nodes_src)
      .watches(api::remediations(), to_default)
      .max_concurrent_reconciles(1)
      .complete(std::make_shared<BudgetReconciler>(manager.client(), budgets, nodes, incidents));
}

}  // namespace gpufleet::controller
