// Which metrics a dashboard reads, and which ones a process exports: the metric names of a
// PromQL expression, the families of a /metrics page (text exposition format), and the check
// that ties them together (tests/integration/dashboards).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::testing {

// The metric names an expression reads, sorted and unique: identifiers that are not function
// or aggregation names (an identifier followed by '('), keywords (by, without, on, ignoring,
// group_left, group_right, bool, offset, and, or, unless, atan2, inf, nan) or Grafana
// variables ($__rate_interval, ${datasource}); label names inside {...} and by(...) /
// without(...) / on(...) / ignoring(...) / group_left(...) lists, strings, numbers and
// durations ([5m], offset 1h) are skipped. {__name__="x"} reads x. Throws
// std::invalid_argument naming the offset for an unclosed bracket or string.
std::vector<std::string> promql_metric_names(std::string_view expr);

// Family name -> type ("counter", "gauge", "histogram", "summary", "untyped") from the
// `# TYPE` and `# HELP` lines of a text exposition; a family with HELP but no TYPE is
// "untyped". Sample lines are not read: a family is known by its header alone, so one
// without series yet still counts.
using MetricFamilies = std::map<std::string, std::string, std::less<>>;
MetricFamilies parse_exposition_families(std::string_view text);

// The family a queried name belongs to: the name itself, or for name_bucket (histogram) and
// name_sum / name_count (histogram or summary) the family without the suffix; "" when none.
std::string exported_family(std::string_view metric, const MetricFamilies& families);

// One query of a Grafana dashboard: its file, panel title, target refId and expression.
struct DashboardQuery {
  std::string dashboard;
  std::string panel;
  std::string ref_id;
  std::string expr;
};

// Every target expression of the dashboard JSON documents in `dir` (*.json, sorted; panels
// nested in rows included). Throws std::runtime_error naming the file on bad JSON.
std::vector<DashboardQuery> read_dashboard_queries(const std::string& dir);
// The same for one document's text; `dashboard` names it in the queries.
std::vector<DashboardQuery> dashboard_queries(std::string_view json, const std::string& dashboard);

// One line per metric a query reads that no family exports (or per query that does not
// parse): `sentinel.json: panel "Breaker tripped" (A): gpufleet_x is not exported ...`.
std::vector<std::string> unexported_metrics(const std::vector<DashboardQuery>& queries,
                                            const MetricFamilies& families);

}  // namespace gpufleet::testing
