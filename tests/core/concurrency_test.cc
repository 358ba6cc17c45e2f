// Concurrent use of log and metrics; also built under ThreadSanitizer (label tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/http_server.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http_test_client.h"

namespace gpufleet::core {
namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 2000;

TEST(MetricsConcurrency, IncrementsAreExactAndRenderIsSafe) {
  metrics::Registry r;
  auto& c = r.counter("ops_total", "h", {"worker"}, metrics::MetricOptions{.max_series = 4});
  auto& g = r.gauge("in_flight", "h");
  auto& h = r.histogram("latency_seconds", "h", metrics::default_buckets(), {"worker"});
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) (void)r.render();
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      const std::string name = "w" + std::to_string(t);
      for (int i = 0; i < kIterations; ++i) {
        c.with({name}).inc();  // lookups and series creation race with each other
        g.add(1);
        h.with({name}).observe(0.001 * (i % 100));
        g.add(-1);
      }
    });
  }
  for (auto& w : workers) w.join();
  stop.store(true);
  scraper.join();
  // The first four workers to arrive got their own series; the other four share "other".
  int own = 0;
  int shared = 0;
  for (int t = 0; t < kThreads; ++t) {
    const double v = c.with({"w" + std::to_string(t)}).value();
    own += v == kIterations ? 1 : 0;
    shared += v == 4.0 * kIterations ? 1 : 0;
  }
  EXPECT_EQ(own, 4);
  EXPECT_EQ(shared, 4);
  EXPECT_EQ(c.with({"other"}).value(), 4.0 * kIterations);
  EXPECT_EQ(g.with({}).value(), 0);
  std::uint64_t observed = 0;
  for (int t = 0; t < kThreads; ++t) observed += h.with({"w" + std::to_string(t)}).count();
  EXPECT_EQ(observed, static_cast<std::uint64_t>(kThreads) * kIterations);
}

TEST(LogConcurrency, LinesStayWholeAcrossThreads) {
  std::mutex mu;
  std::vector<std::string> lines;
  log::set_sink([&](std::string_view l) {
    std::lock_guard<std::mutex> lock(mu);  // the logger already serializes; this guards `lines`
    lines.emplace_back(l);
  });
  log::set_timestamps(false);
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        log::info("tick", {{"thread", t}, {"i", i}, {"text", "a b c"}});
        if (i == 100 && t == 0) log::set_level(log::Level::Info);  // runtime changes race too
      }
    });
  }
  for (auto& w : workers) w.join();
  log::set_sink({});
  log::set_timestamps(true);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads) * 200);
  for (const std::string& l : lines) {
    ASSERT_EQ(l.rfind("level=info msg=tick thread=", 0), 0u) << l;
    ASSERT_EQ(l.find('\n'), l.size() - 1) << l;
    ASSERT_NE(l.find(" text=\"a b c\"\n"), std::string::npos) << l;
  }
}

TEST(HttpServerConcurrency, ParallelScrapesWhileMetricsChange) {
  metrics::Registry r;
  auto& c = r.counter("hits_total", "h", {"worker"});
  std::atomic<bool> ready{true};
  HttpServerOptions options;
  options.registry = &r;
  options.readyz = [&] {
    return ready.load() ? HealthStatus::healthy() : HealthStatus::unhealthy("flipping");
  };
  HttpServer server(std::move(options));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      c.with({"w" + std::to_string(i % 50)}).inc();
      ready.store(i % 2 == 0);
    }
  });
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        const auto m = testing::http_request(server.url() + "/metrics");
        const auto rz = testing::http_request(server.url() + "/readyz");
        if (m.status == 200 && m.body.rfind("# HELP hits_total h\n", 0) == 0 &&
            (rz.status == 200 || (rz.status == 503 && rz.body == "flipping"))) {
          ++good;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  stop.store(true);
  writer.join();
  EXPECT_EQ(good.load(), 100);
}

}  // namespace
}  // namespace gpufleet::core
