#include "sentinel/ib_monitor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/nodehealth.h"

namespace gpufleet::sentinel {
namespace {

namespace fs = std::filesystem;

struct Collect final : agent::Emitter {
  std::vector<std::pair<std::string, core::Value>> items;
  void emit(std::string_view kind, const core::Value& payload) override {
    items.emplace_back(std::string(kind), payload);
  }
  std::vector<core::Value> of(std::string_view kind) const {
    std::vector<core::Value> out;
    for (const auto& [k, v] : items) {
      if (k == kind) out.push_back(v);
    }
    return out;
  }
};

// A node's IB sysfs as the simulator lays it out (docs/sim.md).
class IbNode {
 public:
  IbNode() {
    std::string tmpl = (fs::temp_directory_path() / "sentinel-ib-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
    ctx.host_root = root_;
    set("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
    set("mlx5_1", 1, "4: ACTIVE", "5: LinkUp");
    counter("mlx5_0", 1, "link_downed", 0);
    counter("mlx5_0", 1, "symbol_error", 0);
    counter("mlx5_1", 1, "link_downed", 0);
    opts.now_ms = [this] { return now; };
    opts.flap_downs = 3;
    opts.flap_window_ms = 600'000;
  }
  ~IbNode() { fs::remove_all(root_); }
  fs::path port(const std::string& dev, int p) {
    return root_ / "sys/class/infiniband" / dev / "ports" / std::to_string(p);
  }
  void set(const std::string& dev, int p, const std::string& state, const std::string& phys) {
    fs::create_directories(port(dev, p) / "counters");
    std::ofstream(port(dev, p) / "state") << state << "\n";
    std::ofstream(port(dev, p) / "phys_state") << phys << "\n";
  }
  void counter(const std::string& dev, int p, const std::string& name, std::uint64_t v) {
    std::ofstream(port(dev, p) / "counters" / name) << v << "\n";
  }

  agent::NodeContext ctx;
  IbMonitorOptions opts;
  std::int64_t now = 1'000'000;

 private:
  fs::path root_;
};

TEST(CounterDelta, SaturatingAndReset) {
  bool sat = false;
  EXPECT_EQ(counter_delta(10, 15, 0xffff, sat), 5u);
  EXPECT_FALSE(sat);
  EXPECT_EQ(counter_delta(65530, 65535, 0xffff, sat), 5u);  // a lower bound
  EXPECT_TRUE(sat);
  EXPECT_EQ(counter_delta(65535, 65535, 0xffff, sat), 0u);  // stuck: unknown, flagged
  EXPECT_TRUE(sat);
  EXPECT_EQ(counter_delta(200, 3, 0xff, sat), 3u);  // reset by perfquery -R
  EXPECT_FALSE(sat);
}

TEST(IbMonitor, BaselineThenDownAndUp) {
  IbNode n;
  IbMonitor m(n.ctx, n.opts);
  Collect first;
  m.poll(first);
  auto h = first.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].get_string({"entity"}), "mlx5_0/1");
  EXPECT_EQ(h[0].get_string({"state"}), "Healthy");
  EXPECT_TRUE(first.of(kPortEventKind).empty());
  Collect same;
  m.poll(same);
  EXPECT_TRUE(same.items.empty());  // nothing changed, nothing said

  n.set("mlx5_0", 1, "1: DOWN", "3: Disabled");
  n.counter("mlx5_0", 1, "link_downed", 1);
  n.now += 1000;
  Collect down;
  m.poll(down);
  auto ev = down.of(kPortEventKind);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].get_string({"type"}), "PortDown");
  EXPECT_EQ(ev[0].get({"deltas", "link_downed"})->as_uint(), 1u);
  h = down.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"state"}), "Fatal");
  EXPECT_EQ(h[0].get_string({"reason"}), "PortDown");

  n.set("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
  n.now += 1000;
  Collect up;
  m.poll(up);
  EXPECT_EQ(up.of(kPortEventKind)[0].get_string({"type"}), "PortUp");
  EXPECT_EQ(up.of(agent::kHealthKind)[0].get_string({"state"}), "Healthy");
}

TEST(IbMonitor, FlapsBetweenPollsAreCaughtAndExpire) {
  IbNode n;
  IbMonitor m(n.ctx, n.opts);
  Collect out;
  m.poll(out);
  // The port stays ACTIVE at every poll, but link_downed rises: it flapped in between.
  for (int i = 1; i <= 3; ++i) {
    n.counter("mlx5_1", 1, "link_downed", static_cast<std::uint64_t>(i));
    n.now += 1000;
    Collect c;
    m.poll(c);
    auto ev = c.of(kPortEventKind);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].get_string({"type"}), "PortFlap");
    if (i == 3) {
      auto h = c.of(agent::kHealthKind);
      ASSERT_EQ(h.size(), 1u);
      EXPECT_EQ(h[0].get_string({"state"}), "Warning");
      EXPECT_EQ(h[0].get_string({"reason"}), "PortFlapping");
    }
  }
  n.now += 600'000;  // the window passes without a flap
  Collect later;
  m.poll(later);
  auto h = later.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"state"}), "Healthy");
}

TEST(IbMonitor, SaturatedCounterReportedOnce) {
  IbNode n;
  IbMonitor m(n.ctx, n.opts);
  Collect out;
  m.poll(out);
  n.counter("mlx5_0", 1, "symbol_error", 65535);
  Collect c;
  m.poll(c);
  auto ev = c.of(kPortEventKind);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].get_string({"type"}), "Counters");
  EXPECT_EQ(ev[0].get({"deltas", "symbol_error"})->as_uint(), 65535u);
  EXPECT_EQ(ev[0].find("saturated")->size(), 1u);
  Collect again;
  m.poll(again);
  EXPECT_TRUE(again.items.empty());  // stuck at the maximum: no delta, no repeat
}

TEST(IbMonitor, NoInfinibandIsQuietAndJunkIsIgnored) {
  IbNode n;
  n.counter("mlx5_0", 1, "symbol_error", 0);
  std::ofstream(n.port("mlx5_0", 1) / "counters" / "port_rcv_errors") << "garbage\n";
  IbMonitor m(n.ctx, n.opts);
  Collect out;
  m.poll(out);
  EXPECT_EQ(out.of(agent::kHealthKind).size(), 2u);
  agent::NodeContext empty;
  empty.host_root = fs::temp_directory_path() / "sentinel-no-such-root";
  IbMonitor none(empty);
  Collect nothing;
  none.poll(nothing);
  EXPECT_TRUE(nothing.items.empty());
}

}  // namespace
}  // namespace gpufleet::sentinel
