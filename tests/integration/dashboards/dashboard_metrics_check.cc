// dashboard_metrics_check DASHBOARD_DIR METRICS_FILE...: every metric the dashboards' queries
// read must be a family of one of the scraped /metrics pages (text exposition format). Prints
// one line per dashboard, panel and metric that no page exports, and exits 1; exits 2 on bad
// input (a page without any family, a dashboard that is not JSON).
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "support/promql_names.h"

namespace t = gpufleet::testing;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: dashboard_metrics_check DASHBOARD_DIR METRICS_FILE...\n";
    return 2;
  }
  try {
    t::MetricFamilies families;
    for (int i = 2; i < argc; ++i) {
      std::ifstream in(argv[i]);
      std::stringstream text;
      text << in.rdbuf();
      const t::MetricFamilies page = t::parse_exposition_families(text.str());
      if (!in || page.empty()) {
        std::cerr << "dashboard_metrics_check: " << argv[i]
                  << " has no metric family (no # TYPE line): scrape /metrics into it first\n";
        return 2;
      }
      families.insert(page.begin(), page.end());
    }
    const auto queries = t::read_dashboard_queries(argv[1]);
    if (queries.empty()) {
      std::cerr << "dashboard_metrics_check: no dashboard query in " << argv[1] << "\n";
      return 2;
    }
    std::set<std::string> dashboards, metrics;
    for (const t::DashboardQuery& q : queries) {
      dashboards.insert(q.dashboard);
      try {
        for (const std::string& n : t::promql_metric_names(q.expr)) metrics.insert(n);
      } catch (const std::invalid_argument&) {
        // reported by unexported_metrics
      }
    }
    const auto problems = t::unexported_metrics(queries, families);
    for (const std::string& p : problems) std::cerr << p << "\n";
    if (!problems.empty()) {
      std::cerr << problems.size() << " problem(s) in the dashboards: each metric a panel reads "
                << "must be exported by a gpufleet process (fix the query, or the metric's "
                << "registration)\n";
      return 1;
    }
    std::cout << "ok: " << queries.size() << " queries of " << dashboards.size()
              << " dashboards read " << metrics.size() << " metric names, all exported ("
              << families.size() << " families scraped)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dashboard_metrics_check: " << e.what() << "\n";
    return 2;
  }
}
