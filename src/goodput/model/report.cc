// The benchmark's report: a JSON document and the table printed on stdout.
#include <cmath>
#include <cstdio>
#include <string>

#include "goodput/model/model.h"

namespace gpufleet::goodput::model {
namespace {

// Figures rounded to 4 decimals, so the JSON of a seed is the same bytes everywhere.
double r4(double v) { return static_cast<double>(std::llround(v * 1e4)) / 1e4; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

core::Value report_to_value(const Scenario& s, const std::vector<Fault>& faults,
                            const std::vector<ConfigurationResult>& results) {
  core::Value v;
  core::Value& sc = v["scenario"];
  sc["seed"] = static_cast<std::int64_t>(s.seed);
  sc["nodes"] = s.nodes;
  sc["gpus"] = s.nodes * s.gpus_per_node;
  sc["days"] = s.days;
  sc["interruptionsPerGpuHour"] = s.interruptions_per_gpu_hour * s.rate_multiplier;
  std::array<std::int64_t, kCategoryCount> drawn{};
  for (const Fault& f : faults) ++drawn[static_cast<std::size_t>(f.category)];
  for (std::size_t c = 0; c < kCategoryCount; ++c)
    sc["faultsDrawn"][std::string(category_name(static_cast<Category>(c)))] = drawn[c];
  v["configurations"] = core::Value::list();
  for (const ConfigurationResult& r : results) {
    core::Value c;
    c["name"] = r.name;
    c["ettr"] = r4(r.ettr);
    c["ledgerEttr"] = r4(r.ledger_ettr);
    c["goodputGpuHours"] = r4(r.productive_gpu_hours);
    c["wallGpuHours"] = r4(r.wall_gpu_hours);
    c["capacityGpuHours"] = r4(r.capacity_gpu_hours);
    for (Cause cause : kCauses)
      c["gpuHoursLostByCause"][std::string(cause_name(cause))] =
          r4(r.lost_by_cause[static_cast<std::size_t>(cause)]);
    for (std::size_t k = 0; k < kCategoryCount; ++k)
      c["gpuHoursLostByCategory"][std::string(category_name(static_cast<Category>(k)))] =
          r4(r.lost_by_category[k]);
    c["outOfServiceGpuHours"] = r4(r.out_of_service_gpu_hours);
    c["faults"] = r.faults;
    c["faultsOnJobs"] = r.faults_on_jobs;
    c["disruptions"] = r.disruptions;
    c["jobsDisruptedPerFault"] = r4(r.jobs_disrupted_per_fault());
    c["jobsDisruptedPerGpuFault"] = r4(r.jobs_disrupted_per_gpu_fault());
    c["gpuScopedFaults"] = r.gpu_scoped_faults;
    c["gpuHoursLostPerGpuScopedFault"] = r4(r.lost_per_gpu_scoped_fault());
    c["quarantines"] = r.quarantines;
    c["breakerRefusals"] = r.breaker_refusals;
    c["interruptions"] = r.interruptions;
    c["mtbiHours"] = r4(r.mtbi_hours);
    c["largestJobMtbiHours"] = r4(r.job_mtbi_hours);
    c["lemonNodes"] = r.lemon_nodes;
    v["configurations"].push_back(std::move(c));
  }
  return v;
}

std::string report_table(const Scenario& s, const std::vector<Fault>& faults,
                         const std::vector<ConfigurationResult>& results) {
  std::string out;
  out += "goodput benchmark: " + std::to_string(s.nodes) + " nodes x " +
         std::to_string(s.gpus_per_node) + " GPUs, " + std::to_string(s.days) + " days, seed " +
         std::to_string(s.seed) + ", " + std::to_string(faults.size()) + " faults drawn (" +
         fmt("%.3g", s.interruptions_per_gpu_hour * s.rate_multiplier) +
         " interruptions per GPU-hour)\n";
  const auto row = [&](const std::string& label, auto value) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%-36s", label.c_str());
    out += buf;
    for (const ConfigurationResult& r : results) {
      std::snprintf(buf, sizeof buf, "%22s", value(r).c_str());
      out += buf;
    }
    out += "\n";
  };
  row("", [](const ConfigurationResult& r) { return r.name; });
  row("ETTR", [](const ConfigurationResult& r) { return fmt("%.2f %%", 100 * r.ettr); });
  row("  (ledger ETTR, no slowdown)",
      [](const ConfigurationResult& r) { return fmt("%.2f %%", 100 * r.ledger_ettr); });
  row("goodput (GPU-hours)",
      [](const ConfigurationResult& r) { return fmt("%.0f", r.productive_gpu_hours); });
  for (std::size_t k = 0; k < kCategoryCount; ++k) {
    row("lost: " + std::string(category_name(static_cast<Category>(k))) + " (GPU-h)",
        [k](const ConfigurationResult& r) { return fmt("%.0f", r.lost_by_category[k]); });
  }
  for (Cause cause : kCauses) {
    row("ledger cause " + std::string(cause_name(cause)) + " (GPU-h)",
        [cause](const ConfigurationResult& r) {
          return fmt("%.0f", r.lost_by_cause[static_cast<std::size_t>(cause)]);
        });
  }
  row("GPUs out of service (GPU-h)",
      [](const ConfigurationResult& r) { return fmt("%.0f", r.out_of_service_gpu_hours); });
  row("faults on nodes in service", [](const ConfigurationResult& r) {
    return std::to_string(r.faults) + " (" + std::to_string(r.faults_on_jobs) + " on jobs)";
  });
  row("jobs disrupted per fault",
      [](const ConfigurationResult& r) { return fmt("%.3f", r.jobs_disrupted_per_fault()); });
  row("jobs disrupted per GPU fault",
      [](const ConfigurationResult& r) { return fmt("%.3f", r.jobs_disrupted_per_gpu_fault()); });
  row("GPU-h lost per GPU-scoped fault",
      [](const ConfigurationResult& r) { return fmt("%.1f", r.lost_per_gpu_scoped_fault()); });
  row("quarantines / breaker refusals", [](const ConfigurationResult& r) {
    return std::to_string(r.quarantines) + " / " + std::to_string(r.breaker_refusals);
  });
  row("MTBI, fleet (h)", [](const ConfigurationResult& r) { return fmt("%.2f", r.mtbi_hours); });
  row("MTBI, largest job (h)",
      [](const ConfigurationResult& r) { return fmt("%.2f", r.job_mtbi_hours); });
  row("lemon nodes", [](const ConfigurationResult& r) { return std::to_string(r.lemon_nodes); });
  return out;
}

}  // namespace gpufleet::goodput::model
