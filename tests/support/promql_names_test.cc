#include "support/promql_names.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/json.h"
#include "support/source_paths.h"

namespace gpufleet::testing {
namespace {

using Names = std::vector<std::string>;

TEST(PromqlNames, QueriesOfTheDashboards) {
  EXPECT_EQ(promql_metric_names("histogram_quantile(0.99, sum by (le) "
                                "(rate(gpufleet_sentinel_fault_to_cordon_seconds_bucket[5m])))"),
            Names{"gpufleet_sentinel_fault_to_cordon_seconds_bucket"});
  EXPECT_EQ(promql_metric_names("max by (phase) (gpufleet_sentinel_incidents)"),
            Names{"gpufleet_sentinel_incidents"});
  EXPECT_EQ(
      promql_metric_names("sum by (controller) (rate(gpufleet_controller_reconcile_errors_total"
                          "[$__rate_interval])) / sum by (controller) "
                          "(rate(gpufleet_controller_reconcile_total[$__rate_interval]))"),
      (Names{"gpufleet_controller_reconcile_errors_total", "gpufleet_controller_reconcile_total"}));
  EXPECT_EQ(promql_metric_names("sum(rate(gpufleet_hostpkg_stage_duration_seconds_sum[1h])) by "
                                "(stage) / sum(rate(gpufleet_hostpkg_stage_duration_seconds_count"
                                "[1h])) by (stage)"),
            (Names{"gpufleet_hostpkg_stage_duration_seconds_count",
                   "gpufleet_hostpkg_stage_duration_seconds_sum"}));
}

TEST(PromqlNames, LabelNamesAreNotMetrics) {
  // Inside {...}, in by/without lists, and in the vector-matching lists.
  EXPECT_EQ(promql_metric_names("sum without (instance, pod) (a_total{controller=~\"cer.*\", "
                                "result!=\"error\"})"),
            Names{"a_total"});
  EXPECT_EQ(promql_metric_names("a / on (set) group_left (stage) b * ignoring(le) c "
                                "+ on(x) group_right d"),
            (Names{"a", "b", "c", "d"}));
  EXPECT_EQ(promql_metric_names("a / ignoring (result) group_left b"), (Names{"a", "b"}));
  // An aggregation's list before its parentheses; a metric named like one is still a metric.
  EXPECT_EQ(promql_metric_names("SUM BY (le) (x) + topk without (pod) (3, y) + count + bytes"),
            (Names{"bytes", "count", "x", "y"}));
}

TEST(PromqlNames, KeywordsFunctionsAndLiteralsAreNotMetrics) {
  EXPECT_EQ(promql_metric_names("a > bool 0 and b or c unless d"), (Names{"a", "b", "c", "d"}));
  EXPECT_EQ(promql_metric_names("a offset 1h + max_over_time(b[1h30m:1m] offset -1d) @ start()"),
            (Names{"a", "b"}));
  EXPECT_EQ(promql_metric_names("atan2(a, b) * 1e3 + 0.5 - Inf + NaN + 0x1f + .5"),
            (Names{"a", "b"}));
  // A function name used as a metric name (no '(' after it) is a metric.
  EXPECT_EQ(promql_metric_names("rate + sum ( rate(x[5m]) )"), (Names{"rate", "x"}));
  EXPECT_EQ(promql_metric_names("vector(1)"), Names{});
  EXPECT_EQ(promql_metric_names("namespace:gpufleet_goodput_ettr:avg5m"),
            Names{"namespace:gpufleet_goodput_ettr:avg5m"});
}

TEST(PromqlNames, StringsCommentsAndGrafanaVariablesAreSkipped) {
  EXPECT_EQ(promql_metric_names("label_replace(up, \"dst\", \"rate(x) \\\" y\", 'src', `(.*)`)"),
            Names{"up"});
  EXPECT_EQ(promql_metric_names("count_values(\"version\", gpufleet_build_info)"),
            Names{"gpufleet_build_info"});
  EXPECT_EQ(promql_metric_names("a # b + c\n + d"), (Names{"a", "d"}));
  EXPECT_EQ(promql_metric_names("rate(a{job=\"$job\"}[$__rate_interval]) * ${factor} + $scale"),
            Names{"a"});
}

TEST(PromqlNames, NameMatcherNamesTheMetric) {
  EXPECT_EQ(promql_metric_names("{job=\"x\", __name__=\"gpufleet_x_total\"}"),
            Names{"gpufleet_x_total"});
  EXPECT_EQ(promql_metric_names("sum({__name__ = \"a\"}) + b"), (Names{"a", "b"}));
  // A regex cannot be checked: it names nothing.
  EXPECT_EQ(promql_metric_names("{__name__=~\"gpufleet_.*\"}"), Names{});
  EXPECT_EQ(promql_metric_names("a + a + a_total"), (Names{"a", "a_total"}));
}

TEST(PromqlNames, UnbalancedInputIsReported) {
  EXPECT_THROW((void)promql_metric_names("sum(a"), std::invalid_argument);
  EXPECT_THROW((void)promql_metric_names("a)"), std::invalid_argument);
  EXPECT_THROW((void)promql_metric_names("a{job=\"x\""), std::invalid_argument);
  EXPECT_THROW((void)promql_metric_names("rate(a[5m)"), std::invalid_argument);
  EXPECT_THROW((void)promql_metric_names("a{job=\"x}"), std::invalid_argument);
  try {
    (void)promql_metric_names("sum(a");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'(' without ')' at offset 5 of \"sum(a\""),
              std::string::npos)
        << e.what();
  }
}

constexpr std::string_view kExposition =
    "# HELP c_total Counted.\n"
    "# TYPE c_total counter\n"
    "c_total{a=\"x\"} 1\n"
    "# HELP idle_total Labelled, no series yet.\n"
    "# TYPE idle_total counter\n"
    "# HELP h_seconds Latency.\n"
    "# TYPE h_seconds histogram\n"
    "h_seconds_bucket{le=\"+Inf\"} 0\n"
    "h_seconds_sum 0\n"
    "h_seconds_count 0\n"
    "# TYPE s summary\n"
    "# TYPE g gauge\n"
    "# HELP only_help No TYPE line.\n"
    "sample_only 1\n";

TEST(ExpositionFamilies, HeadersNameTheFamilies) {
  const MetricFamilies f = parse_exposition_families(kExposition);
  EXPECT_EQ(f, (MetricFamilies{{"c_total", "counter"},
                               {"g", "gauge"},
                               {"h_seconds", "histogram"},
                               {"idle_total", "counter"},
                               {"only_help", "untyped"},
                               {"s", "summary"}}));
  EXPECT_TRUE(parse_exposition_families("").empty());
  EXPECT_EQ(parse_exposition_families("# TYPE x gauge\r\n"), (MetricFamilies{{"x", "gauge"}}));
}

TEST(ExpositionFamilies, SuffixesMapToHistogramAndSummaryFamilies) {
  const MetricFamilies f = parse_exposition_families(kExposition);
  EXPECT_EQ(exported_family("c_total", f), "c_total");
  EXPECT_EQ(exported_family("idle_total", f), "idle_total");
  EXPECT_EQ(exported_family("h_seconds_bucket", f), "h_seconds");
  EXPECT_EQ(exported_family("h_seconds_sum", f), "h_seconds");
  EXPECT_EQ(exported_family("h_seconds_count", f), "h_seconds");
  EXPECT_EQ(exported_family("h_seconds", f), "h_seconds");
  EXPECT_EQ(exported_family("s_count", f), "s");
  EXPECT_EQ(exported_family("s_bucket", f), "");  // a summary has no buckets
  EXPECT_EQ(exported_family("g_count", f), "");   // nor a gauge a count
  EXPECT_EQ(exported_family("c", f), "");
  EXPECT_EQ(exported_family("sample_only", f), "");
}

TEST(UnexportedMetrics, ABogusMetricIsNamedWithItsDashboardAndPanel) {
  const std::string json = R"json({"panels": [
    {"title": "Fine", "targets": [
      {"refId": "A", "expr": "sum(rate(c_total[5m]))"},
      {"refId": "B", "expr": "histogram_quantile(0.9, sum by (le) (rate(h_seconds_bucket[5m])))"}]},
    {"type": "row", "title": "Collapsed", "panels": [
      {"title": "Bogus", "targets": [
        {"refId": "C", "expr": "sum(gpufleet_bogus_total) / sum(c_total)"}]}]},
    {"title": "Broken", "targets": [{"refId": "D", "expr": "sum(c_total"}]},
    {"title": "Constant", "targets": [{"refId": "E", "expr": "vector(1)"}]},
    {"title": "Text"}]})json";
  const auto queries = dashboard_queries(json, "test.json");
  ASSERT_EQ(queries.size(), 5u);
  EXPECT_EQ(queries[2].panel, "Bogus");
  const auto problems = unexported_metrics(queries, parse_exposition_families(kExposition));
  ASSERT_EQ(problems.size(), 3u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0],
            "test.json: panel \"Bogus\" (C): gpufleet_bogus_total is not exported by any process "
            "(query: sum(gpufleet_bogus_total) / sum(c_total))");
  EXPECT_NE(problems[1].find("test.json: panel \"Broken\" (D): the query does not parse"),
            std::string::npos)
      << problems[1];
  EXPECT_EQ(problems[2], "test.json: panel \"Constant\" (E): the query reads no metric: vector(1)");
  EXPECT_THROW((void)dashboard_queries("{", "bad.json"), std::runtime_error);
}

std::string dashboards_dir() { return GPUFLEET_SOURCE_DIR + "/deploy/chart/gpufleet/dashboards"; }

// The chart's dashboards: every query parses and reads only gpufleet's own metrics; the
// integration test (tests/integration/dashboards) checks that the processes export them.
TEST(ChartDashboards, EveryQueryReadsGpufleetMetrics) {
  const auto queries = read_dashboard_queries(dashboards_dir());
  std::set<std::string> dashboards;
  for (const DashboardQuery& q : queries) {
    dashboards.insert(q.dashboard);
    SCOPED_TRACE(q.dashboard + ": " + q.panel + ": " + q.expr);
    EXPECT_FALSE(q.panel.empty());
    EXPECT_FALSE(q.ref_id.empty());
    Names names;
    ASSERT_NO_THROW(names = promql_metric_names(q.expr));
    EXPECT_FALSE(names.empty());
    for (const std::string& n : names) {
      EXPECT_TRUE(n.starts_with("gpufleet_") || n.starts_with("process_")) << n;
    }
  }
  EXPECT_EQ(dashboards, (std::set<std::string>{"certify.json", "controllers.json", "goodput.json",
                                               "hostpkg.json", "sentinel.json"}));
}

// Each dashboard picks its Prometheus from a datasource variable, and has a uid of its own.
TEST(ChartDashboards, DatasourceVariableAndUniqueUids) {
  std::set<std::string> uids;
  for (const auto& e : std::filesystem::directory_iterator(dashboards_dir())) {
    SCOPED_TRACE(e.path().filename().string());
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const core::Value doc = core::parse_json(text.str(), e.path().string());
    ASSERT_TRUE(doc.find("uid") && doc.find("uid")->is_string());
    EXPECT_TRUE(uids.insert(doc.find("uid")->as_string()).second) << "uid used twice";
    bool has_datasource = false;
    for (const core::Value& v : doc.get({"templating", "list"})->as_list()) {
      if (v.find("type") && v.find("type")->as_string() == "datasource") has_datasource = true;
      EXPECT_NE(v.find("type")->as_string(), "query") << "query variables are not checked";
    }
    EXPECT_TRUE(has_datasource);
    for (const core::Value& p : doc.find("panels")->as_list()) {
      if (p.find("targets") == nullptr) continue;
      SCOPED_TRACE(p.find("title")->as_string());
      ASSERT_TRUE(p.get({"datasource", "uid"}));
      EXPECT_EQ(p.get({"datasource", "uid"})->as_string(), "${datasource}");
    }
  }
}

}  // namespace
}  // namespace gpufleet::testing
