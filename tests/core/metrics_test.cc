#include "core/metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"

namespace gpufleet::core::metrics {
namespace {

TEST(Metrics, ExpositionGolden) {
  Registry r;
  auto& drains = r.counter("gpufleet_drains_total", "Nodes drained.", {"reason", "pool"});
  drains.with({"xid", "a"}).inc();
  drains.with({"xid", "a"}).inc(2);
  drains.with({"ecc", "b"}).inc(0.5);
  auto& temp = r.gauge("gpufleet_gpu_temperature_celsius", "GPU temperature.\nSecond \\ line");
  temp.set(71.25);
  auto& lat = r.histogram("gpufleet_reconcile_seconds", "Reconcile latency.", {0.1, 1, 2.5},
                          {"controller"});
  auto h = lat.with({"sentinel"});
  h.observe(0.05);
  h.observe(0.1);  // bounds are inclusive
  h.observe(2);
  h.observe(100);
  auto& idle = r.counter("a_idle_total", "Never incremented.");
  (void)idle;
  EXPECT_EQ(r.render(),
            "# HELP a_idle_total Never incremented.\n"
            "# TYPE a_idle_total counter\n"
            "a_idle_total 0\n"
            "# HELP gpufleet_drains_total Nodes drained.\n"
            "# TYPE gpufleet_drains_total counter\n"
            "gpufleet_drains_total{reason=\"ecc\",pool=\"b\"} 0.5\n"
            "gpufleet_drains_total{reason=\"xid\",pool=\"a\"} 3\n"
            "# HELP gpufleet_gpu_temperature_celsius GPU temperature.\\nSecond \\\\ line\n"
            "# TYPE gpufleet_gpu_temperature_celsius gauge\n"
            "gpufleet_gpu_temperature_celsius 71.25\n"
            "# HELP gpufleet_reconcile_seconds Reconcile latency.\n"
            "# TYPE gpufleet_reconcile_seconds histogram\n"
            "gpufleet_reconcile_seconds_bucket{controller=\"sentinel\",le=\"0.1\"} 2\n"
            "gpufleet_reconcile_seconds_bucket{controller=\"sentinel\",le=\"1\"} 2\n"
            "gpufleet_reconcile_seconds_bucket{controller=\"sentinel\",le=\"2.5\"} 3\n"
            "gpufleet_reconcile_seconds_bucket{controller=\"sentinel\",le=\"+Inf\"} 4\n"
            "gpufleet_reconcile_seconds_sum{controller=\"sentinel\"} 102.15\n"
            "gpufleet_reconcile_seconds_count{controller=\"sentinel\"} 4\n");
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 102.15);
}

// A labelled family is on the page from its registration, before any series: dashboards and
// alerts can name it (tests/integration/dashboards), as with the Prometheus client libraries.
// Its last series removed, it stays there too.
TEST(Metrics, LabelledFamilyWithoutSeriesKeepsItsHeader) {
  Registry r;
  (void)r.counter("c_total", "Counted.", {"kind"});
  (void)r.histogram("h_seconds", "Latency.", {1}, {"stage"});
  auto& g = r.gauge("g", "Gauged.", {"set"});
  g.with({"a"}).set(1);
  EXPECT_TRUE(g.remove({"a"}));
  EXPECT_EQ(r.render(),
            "# HELP c_total Counted.\n# TYPE c_total counter\n"
            "# HELP g Gauged.\n# TYPE g gauge\n"
            "# HELP h_seconds Latency.\n# TYPE h_seconds histogram\n");
}

TEST(Metrics, UnlabeledHistogramAndSpecialValues) {
  Registry r;
  auto& h = r.histogram("h", "x", {1, std::numeric_limits<double>::infinity()});
  h.observe(std::nan(""));
  auto& g = r.gauge("g", "y", {"k"});
  g.with({"inf"}).set(std::numeric_limits<double>::infinity());
  g.with({"neg"}).set(-std::numeric_limits<double>::infinity());
  g.with({"big"}).set(1e20);
  g.with({"small"}).set(-0.000125);
  g.with({"nan"}).set(std::nan(""));
  EXPECT_EQ(r.render(),
            "# HELP g y\n# TYPE g gauge\n"
            "g{k=\"big\"} 1e+20\n"
            "g{k=\"inf\"} +Inf\n"
            "g{k=\"nan\"} NaN\n"
            "g{k=\"neg\"} -Inf\n"
            "g{k=\"small\"} -0.000125\n"
            "# HELP h x\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\n"
            "h_bucket{le=\"+Inf\"} 1\n"
            "h_sum NaN\n"
            "h_count 1\n");
}

TEST(Metrics, LabelValuesAreEscaped) {
  Registry r;
  auto& c = r.counter("c_total", "h", {"path"});
  c.with({"a\"b\\c\nd"}).inc();
  c.with({"bad\xff"}).inc();
  c.with({""}).inc();
  EXPECT_EQ(r.render(),
            "# HELP c_total h\n# TYPE c_total counter\n"
            "c_total{path=\"\"} 1\n"
            "c_total{path=\"a\\\"b\\\\c\\nd\"} 1\n"
            "c_total{path=\"bad\xEF\xBF\xBD\"} 1\n");
}

TEST(Metrics, CardinalityCapOverflowsIntoOther) {
  Registry r;
  auto& c = r.counter("errors_total", "h", {"kind", "node"}, MetricOptions{.max_series = 2});
  c.with({"a", "n1"}).inc();
  c.with({"b", "n2"}).inc();
  c.with({"c", "n3"}).inc();
  c.with({"d", "n4"}).inc(2);
  c.with({"a", "n1"}).inc();  // existing series still count on their own
  EXPECT_EQ(c.with({"zzz", "n9"}).value(), 3);
  EXPECT_EQ(r.render(),
            "# HELP errors_total h\n# TYPE errors_total counter\n"
            "errors_total{kind=\"a\",node=\"n1\"} 2\n"
            "errors_total{kind=\"b\",node=\"n2\"} 1\n"
            "errors_total{kind=\"other\",node=\"other\"} 3\n");
}

TEST(Metrics, HandlesAreStableAndCheap) {
  Registry r;
  auto& g = r.gauge("queue_depth", "h", {"queue"});
  const Gauge::Handle q = g.with({"certify"});
  q.inc();
  q.inc();
  q.dec();
  q.add(10);
  EXPECT_EQ(q.value(), 11);
  EXPECT_EQ(g.with({"certify"}).value(), 11);
  g.with({"other-queue"}).set(1);  // more series do not move existing ones
  EXPECT_EQ(q.value(), 11);
}

TEST(Metrics, SeriesRemovedByLabelLeaveTheExposition) {
  Registry r;
  auto& nodes = r.gauge("set_nodes", "h", {"set", "state"});
  auto& steps = r.counter("set_steps_total", "h", {"set"});
  auto& seconds = r.histogram("set_seconds", "h", {1.0}, {"set"});
  for (const char* set : {"gone", "kept"}) {
    nodes.with({set, "done"}).set(3);
    nodes.with({set, "failed"}).set(1);
    steps.with({set}).inc();
    seconds.with({set}).observe(0.5);
  }
  const Gauge::Handle held = nodes.with({"gone", "done"});  // another thread's handle
  EXPECT_EQ(nodes.remove_matching("set", "gone"), 2u);
  EXPECT_EQ(steps.remove_matching("set", "gone"), 1u);
  EXPECT_TRUE(seconds.remove({"gone"}));
  EXPECT_FALSE(seconds.remove({"gone"}));
  EXPECT_EQ(nodes.remove_matching("set", "never-there"), 0u);
  const std::string text = r.render();
  EXPECT_EQ(text.find("\"gone\""), std::string::npos) << text;
  EXPECT_NE(text.find("set_nodes{set=\"kept\",state=\"done\"} 3"), std::string::npos) << text;
  // The held handle still works (no dangling series); its writes are no longer exported, and
  // looking the labels up again starts a fresh series.
  held.set(7);
  EXPECT_EQ(held.value(), 7);
  EXPECT_EQ(r.render().find("\"gone\""), std::string::npos);
  EXPECT_EQ(nodes.with({"gone", "done"}).value(), 0);
  EXPECT_EQ(nodes.series_count(), 3u);
  // Bad removals name the metric and the fix.
  EXPECT_THROW((void)nodes.remove_matching("nope", "x"), InvalidInput);
  EXPECT_THROW((void)nodes.remove({"only-one"}), InvalidInput);
  auto& plain = r.counter("plain_total", "h");
  EXPECT_THROW((void)plain.remove({}), InvalidInput);
}

TEST(Metrics, RemovalFreesRoomUnderTheCardinalityCap) {
  Registry r;
  auto& c = r.counter("capped_total", "h", {"id"}, MetricOptions{2});
  c.with({"a"}).inc();
  c.with({"b"}).inc();
  c.with({"c"}).inc();  // over the cap: counted as "other"
  EXPECT_EQ(c.remove_matching("id", "a"), 1u);
  c.with({"d"}).inc();  // room again
  const std::string text = r.render();
  EXPECT_NE(text.find("capped_total{id=\"d\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("capped_total{id=\"other\"} 1"), std::string::npos) << text;
}

// Writers holding handles and looking series up, a remover and a scraper at once: nothing
// dangles (ASan) and the registry stays consistent.
TEST(Metrics, RemovalUnderConcurrentUse) {
  Registry r;
  auto& g = r.gauge("busy", "h", {"set", "state"});
  auto& c = r.counter("busy_total", "h", {"set"});
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      const std::string set = "s" + std::to_string(t % 2);
      Counter::Handle kept = c.with({set});
      while (!stop) {
        kept.inc();
        g.with({set, "done"}).inc();
        c.with({set}).inc();
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop) {
      (void)g.remove_matching("set", "s0");
      (void)c.remove_matching("set", "s0");
      std::this_thread::yield();
    }
  });
  threads.emplace_back([&] {
    while (!stop) (void)r.render();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& th : threads) th.join();
  const std::size_t before = g.series_count();
  EXPECT_LE(before, 2u);
  EXPECT_EQ(g.remove_matching("set", "s0") + g.remove_matching("set", "s1"), before);
  EXPECT_EQ(g.series_count(), 0u);
}

TEST(Metrics, RegistrationRules) {
  Registry r;
  auto& a = r.counter("x_total", "h", {"a"});
  EXPECT_EQ(&r.counter("x_total", "other help", {"a"}), &a);  // same definition: same metric
  EXPECT_THROW(r.counter("x_total", "h", {"b"}), InvalidInput);
  EXPECT_THROW(r.gauge("x_total", "h", {"a"}), InvalidInput);
  EXPECT_THROW(r.counter("1bad", "h"), InvalidInput);
  EXPECT_THROW(r.counter("bad-name", "h"), InvalidInput);
  EXPECT_THROW(r.counter("", "h"), InvalidInput);
  EXPECT_NO_THROW(r.counter("ns:sub_total", "h"));
  EXPECT_THROW(r.counter("y", "h", {"a:b"}), InvalidInput);
  EXPECT_THROW(r.counter("y", "h", {"__x"}), InvalidInput);
  EXPECT_THROW(r.counter("y", "h", {"a", "a"}), InvalidInput);
  EXPECT_THROW(r.histogram("y", "h", {1, 2}, {"le"}), InvalidInput);
  EXPECT_THROW(r.histogram("y", "h", {2, 1}), InvalidInput);
  EXPECT_THROW(r.histogram("y", "h", {1, 1}), InvalidInput);
  EXPECT_THROW(r.histogram("y", "h", {std::nan("")}), InvalidInput);
  auto& h = r.histogram("z", "h", {1, 2});
  EXPECT_EQ(&r.histogram("z", "h", {1, 2}), &h);
  EXPECT_THROW(r.histogram("z", "h", {1, 3}), InvalidInput);
  try {
    (void)a.with({"1", "2"});
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("x_total has 1 label(s) (a) but was given 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(a.with({"v"}).inc(-1), InvalidInput);
  EXPECT_THROW(a.with({"v"}).inc(std::nan("")), InvalidInput);
}

TEST(Metrics, BucketHelpers) {
  EXPECT_EQ(exponential_buckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(linear_buckets(0, 5, 3), (std::vector<double>{0, 5, 10}));
  EXPECT_EQ(default_buckets().size(), 11u);
  EXPECT_THROW(exponential_buckets(0, 2, 3), InvalidInput);
  EXPECT_THROW(exponential_buckets(1, 1, 3), InvalidInput);
  EXPECT_THROW(linear_buckets(0, 0, 3), InvalidInput);
  EXPECT_THROW(linear_buckets(0, 1, 0), InvalidInput);
}

}  // namespace
}  // namespace gpufleet::core::metrics
