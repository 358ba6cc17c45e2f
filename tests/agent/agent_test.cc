#include "agent/agent.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "agent/metrics.h"
#include "agent/nodehealth.h"
#include "core/errors.h"
#include "core/json.h"
#include "kube/errors.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "agent-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << text << "\n";
}

// A simulated host: one IB port and a boot id, as the simulator lays them out.
fs::path make_host(const fs::path& root, const std::string& node) {
  fs::path host = root / "nodes" / node;
  write(host / "proc/sys/kernel/random/boot_id", "boot-1-" + node);
  write(host / "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  return host;
}

// The API side, in memory, with the real fold (the kube integration test covers the server).
// `outage` makes every delivery throw; `lose_reply` applies and then throws, as when the
// API server applied a write but the reply never reached the agent.
class MemorySink final : public Sink {
 public:
  std::size_t deliver(const NodeIdentity& node, std::span<const Record> records) override {
    std::lock_guard lock(mu);
    ++calls;
    if (outage) throw std::runtime_error("connection refused");
    if (deny) {
      throw kube::ApiError(403, kube::Reason::Forbidden, "denied by policy",
                           {"patch", "nodehealths.gpufleet.io", "", node.node_name});
    }
    for (const auto& r : records) order[node.node_name].push_back(r.id);
    fold_records(status[node.node_name], records);
    if (lose_reply) {
      lose_reply = false;
      throw std::runtime_error("reply lost");
    }
    return records.size();
  }
  std::mutex mu;
  bool outage = false;
  bool lose_reply = false;
  bool deny = false;  // the API server refuses the write (an admission denial)
  int calls = 0;
  std::map<std::string, core::Value> status;
  std::map<std::string, std::vector<std::uint64_t>> order;
};

AgentOptions options_for(const fs::path& host, const std::string& node) {
  AgentOptions o;
  o.node.identity.node_name = node;
  o.node.host_root = host;
  o.node.state_dir = host / "var/lib/gpufleet/agent";
  o.monitors = {"ib-port"};  // the example monitor of docs/agent.md
  o.fsync = false;
  o.retry_min = std::chrono::milliseconds(1);
  o.retry_max = std::chrono::milliseconds(4);
  return o;
}

const core::Value* entity(const core::Value& status, std::string_view check, std::string_view id) {
  for (const auto& c : status.find("checks")->as_list())
    if (c.get_string({"name"}) == check)
      for (const auto& e : c.find("entities")->as_list())
        if (e.get_string({"id"}) == id) return &e;
  return nullptr;
}

TEST(Agent, JournalsAndDeliversMonitorObservationsAndBoot) {
  TempDir tmp;
  auto host = make_host(tmp.path(), "n1");
  MemorySink sink;
  Agent a(options_for(host, "n1"), sink);
  a.tick(Clock::now());
  const auto& st = sink.status["n1"];
  EXPECT_EQ(st.get_string({"bootID"}), "boot-1-n1");
  const auto* e = entity(st, "ib-port", "mlx5_0/1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->get_string({"state"}), "Healthy");
  EXPECT_EQ(e->get_string({"kind"}), "NIC");
  EXPECT_EQ(a.stats().journal.acked_id, 2u);
}

TEST(Agent, BacklogAfterOutageIsDeliveredInOrder) {
  TempDir tmp;
  auto host = make_host(tmp.path(), "n1");
  MemorySink sink;
  sink.outage = true;
  Agent a(options_for(host, "n1"), sink);
  auto now = Clock::now();
  a.tick(now);
  const char* states[] = {"1: DOWN", "4: ACTIVE", "2: INIT", "1: DOWN"};
  for (const char* s : states) {
    write(host / "sys/class/infiniband/mlx5_0/ports/1/state", s);
    now += std::chrono::seconds(2);
    a.tick(now);
  }
  EXPECT_GT(a.stats().delivery_failures, 0u);
  EXPECT_EQ(a.stats().journal.acked_id, 0u);
  sink.outage = false;
  now += std::chrono::seconds(2);
  a.tick(now);
  EXPECT_EQ(sink.order["n1"], (std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6}));
  const auto* e = entity(sink.status["n1"], "ib-port", "mlx5_0/1");
  EXPECT_EQ(e->get_string({"state"}), "Fatal");
  EXPECT_EQ(e->get_string({"message"}), "port state 1: DOWN");
  // Healthy, Fatal, Healthy, Fatal: the boot is not a health event, and DOWN after INIT
  // changes only the message of the same Fatal state (not a transition).
  EXPECT_EQ(sink.status["n1"].find("history")->size(), 4u);
}

TEST(Agent, LostReplyRedeliversWithoutDuplicateEffect) {
  TempDir tmp;
  auto host = make_host(tmp.path(), "n1");
  MemorySink sink;
  sink.lose_reply = true;
  Agent a(options_for(host, "n1"), sink);
  auto now = Clock::now();
  a.tick(now);  // applied, but the agent saw an error: nothing acked
  EXPECT_EQ(a.stats().journal.acked_id, 0u);
  core::Value after_first = sink.status["n1"];
  a.tick(now + std::chrono::milliseconds(50));  // redelivered
  EXPECT_EQ(a.stats().journal.acked_id, 2u);
  EXPECT_EQ(sink.order["n1"], (std::vector<std::uint64_t>{1, 2, 1, 2}));
  EXPECT_EQ(sink.status["n1"], after_first);  // the second apply was a no-op
}

TEST(Agent, RestartKeepsIdentityAndJournalsAReboot) {
  TempDir tmp;
  auto host = make_host(tmp.path(), "n1");
  MemorySink sink;
  { Agent a(options_for(host, "n1"), sink); }
  {
    Agent a(options_for(host, "n1"), sink);  // same boot: no new boot record
    EXPECT_EQ(a.stats().journal.last_id, 1u);
  }
  write(host / "proc/sys/kernel/random/boot_id", "boot-2-n1");
  Agent a(options_for(host, "n1"), sink);
  EXPECT_EQ(a.stats().journal.last_id, 2u);
  auto p = a.stats();
  EXPECT_EQ(p.journal.acked_id, 0u);
  a.tick(Clock::now());
  EXPECT_EQ(sink.status["n1"].get_string({"bootID"}), "boot-2-n1");
}

TEST(Agent, UnknownMonitorAndEmptyNodeAreClearErrors) {
  TempDir tmp;
  auto host = make_host(tmp.path(), "n1");
  MemorySink sink;
  auto o = options_for(host, "n1");
  o.monitors = {"no-such"};
  try {
    Agent a(o, sink);
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("monitor 'no-such' is not registered; known: ib-port"),
              std::string::npos)
        << e.what();
  }
  o = options_for(host, "");
  EXPECT_THROW(Agent(o, sink), core::InvalidInput);
}

TEST(AgentPool, ManyNodesOnTwoThreads) {
  TempDir tmp;
  MemorySink sink;
  constexpr int kNodes = 200;
  {
    AgentPool pool(2);
    for (int i = 0; i < kNodes; ++i) {
      std::string node = "node-" + std::to_string(i);
      pool.add(std::make_unique<Agent>(options_for(make_host(tmp.path(), node), node), sink));
    }
    for (int i = 0; i < 200; ++i) {
      {
        std::lock_guard lock(sink.mu);
        if (sink.status.size() == kNodes) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // A fault on one node reaches that node's object only.
    write(tmp.path() / "nodes/node-7/sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
    for (int i = 0; i < 300; ++i) {
      {
        std::lock_guard lock(sink.mu);
        const auto* e = entity(sink.status["node-7"], "ib-port", "mlx5_0/1");
        if (e != nullptr && e->get_string({"state"}) == "Fatal") break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pool.stop();
  }
  ASSERT_EQ(sink.status.size(), static_cast<std::size_t>(kNodes));
  for (const auto& [node, st] : sink.status) {
    const auto* e = entity(st, "ib-port", "mlx5_0/1");
    ASSERT_NE(e, nullptr) << node;
    EXPECT_EQ(e->get_string({"state"}), node == "node-7" ? "Fatal" : "Healthy") << node;
    EXPECT_EQ(st.get_string({"bootID"}), "boot-1-" + node);
  }
}

// A sink whose deliveries hang until released: an API server that stopped answering.
class HangingSink final : public Sink {
 public:
  std::size_t deliver(const NodeIdentity& node, std::span<const Record> records) override {
    std::unique_lock lock(mu);
    ++waiting;
    cv.wait(lock, [&] { return released; });
    fold_records(status[node.node_name], records);
    return records.size();
  }
  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int waiting = 0;
  std::map<std::string, core::Value> status;
};

// Polls run apart from deliveries: with every delivery thread stuck in a request the API
// server does not answer, the monitors still poll and journal (a port going down is on the
// node's disk at once), and it is delivered once the server answers again.
TEST(AgentPool, PollsGoOnWhileEveryDeliveryHangs) {
  TempDir tmp;
  HangingSink sink;
  AgentPool pool(1, 1);
  struct Release {  // before the pool stops, even when an assertion returns early
    HangingSink& sink;
    ~Release() { sink.release(); }
  } release_on_exit{sink};
  std::vector<Agent*> agents;
  for (const char* node : {"n1", "n2"})
    agents.push_back(
        &pool.add(std::make_unique<Agent>(options_for(make_host(tmp.path(), node), node), sink)));
  auto wait_for = [](const std::function<bool()>& f) {
    for (int i = 0; i < 500 && !f(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return f();
  };
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard lock(sink.mu);
    return sink.waiting == 1;  // the one delivery thread is stuck
  }));
  const std::uint64_t before = agents[1]->stats().journal.last_id;
  write(tmp.path() / "nodes/n2/sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
  EXPECT_TRUE(wait_for([&] { return agents[1]->stats().journal.last_id > before; }))
      << "n2's poll waited for n1's delivery";
  sink.release();
  EXPECT_TRUE(wait_for([&] {
    std::lock_guard lock(sink.mu);
    const core::Value& st = sink.status["n2"];
    const core::Value* e =
        st.find("checks") != nullptr ? entity(st, "ib-port", "mlx5_0/1") : nullptr;
    return e != nullptr && e->get_string({"state"}) == "Fatal";
  }));
  pool.stop();
}

// The process-wide counters: appended, delivered, rejected vs unavailable deliveries, latency,
// and the backlog gauges aggregated over nodes (no label per node).
TEST(AgentMetrics, CountsDeliveriesByResultAndAggregatesBacklogOverNodes) {
  TempDir tmp;
  core::metrics::Registry registry;
  AgentMetrics m(registry);
  MemorySink sink;
  sink.deny = true;
  AgentPool pool(1);
  std::vector<Agent*> agents;
  for (const char* node : {"n1", "n2", "n3"}) {
    auto o = options_for(make_host(tmp.path(), node), node);
    o.metrics = &m;
    agents.push_back(&pool.add(std::make_unique<Agent>(o, sink)));
  }
  // Each agent journals its boot (1) and the port (2) and is refused.
  auto wait_for = [](const std::function<bool()>& f) {
    for (int i = 0; i < 500 && !f(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return f();
  };
  ASSERT_TRUE(wait_for([&] {
    for (Agent* a : agents)
      if (a->stats().rejected == 0) return false;
    return true;
  }));
  EXPECT_EQ(m.appended.value(), 6);
  EXPECT_EQ(m.delivered.value(), 0);
  EXPECT_EQ(m.unavailable.value(), 0);
  m.observe(pool);
  EXPECT_EQ(m.backlog.value(), 6);
  EXPECT_EQ(m.backlog_max.value(), 2);
  EXPECT_EQ(m.nodes_with_backlog.value(), 3);
  EXPECT_EQ(m.nodes.value(), 3);
  EXPECT_GT(m.journal_bytes.value(), 0);
  EXPECT_GE(m.rejected.value(), 3);
  {
    std::lock_guard lock(sink.mu);
    sink.deny = false;
    sink.outage = true;  // an outage is "unavailable", not "rejected"
  }
  ASSERT_TRUE(wait_for([&] { return m.unavailable.value() >= 1; }));
  {
    std::lock_guard lock(sink.mu);
    sink.outage = false;
  }
  ASSERT_TRUE(wait_for([&] { return m.delivered.value() == 6; }));
  EXPECT_GE(m.delivered_ok.value(), 3);
  EXPECT_EQ(m.record_latency.count(), 6u);  // every record timed from append to ack
  EXPECT_GE(m.delivery_duration.count(), 4u);
  pool.stop();
  m.observe(pool);
  EXPECT_EQ(m.backlog.value(), 0);
  EXPECT_EQ(m.nodes_with_backlog.value(), 0);
  // Bounded: no series names a node.
  EXPECT_EQ(registry.render().find("n1"), std::string::npos);
}

// status.history records transitions only (issue 29: one fault, one entry; escalation rules
// count the entries): a record that changes only the reason or message of an entity's (or a
// check's) state updates the status and adds no entry; recoveries are transitions too.
TEST(FoldRecords, HistoryRecordsTransitionsOnly) {
  core::Value st;
  auto rec = [](std::uint64_t id, std::string_view json) {
    return Record{id, std::string(kHealthKind), std::string(json)};
  };
  std::vector<Record> rs = {
      rec(1,
          R"({"check":"xid","entity":"GPU-a","state":"Fatal","reason":"Xid79","message":"off"})"),
      rec(2, R"({"check":"xid","entity":"GPU-a","state":"Fatal","reason":"RecoveryAction",)"
             R"("message":"reboot"})"),
      rec(3, R"({"check":"xid","entity":"GPU-a","state":"Fatal","reason":"Xid79",)"
             R"("message":"off; then reboot"})"),
      rec(4, R"({"check":"xid","entity":"GPU-b","state":"Warning","reason":"Xid13"})"),
      rec(5, R"({"check":"xid","entity":"GPU-b","state":"Fatal","reason":"Xid48"})"),
      rec(6, R"({"check":"xid","entity":"GPU-a","state":"Healthy","reason":"NodeRebooted"})"),
      rec(7, R"({"check":"xid","entity":"GPU-a","state":"Fatal","reason":"Xid79"})"),
      rec(8, R"({"check":"nvml","state":"Unknown","reason":"NvmlUnavailable"})"),
      rec(9, R"({"check":"nvml","state":"Unknown","reason":"NvmlUnavailable","message":"again"})"),
  };
  EXPECT_EQ(fold_records(st, rs), 9u);
  std::vector<std::string> h;
  for (const auto& e : st.find("history")->as_list())
    h.push_back(std::to_string(e.find("recordId")->as_int()) + " " +
                std::string(e.get_string({"entity"})) + " " + std::string(e.get_string({"state"})));
  EXPECT_EQ(h, (std::vector<std::string>{"1 GPU-a Fatal", "4 GPU-b Warning", "5 GPU-b Fatal",
                                         "6 GPU-a Healthy", "7 GPU-a Fatal", "8  Unknown"}));
  // The entity still shows the newest reason and message of its state.
  const auto* a = entity(st, "xid", "GPU-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->get_string({"reason"}), "Xid79");
  const auto* b = entity(st, "xid", "GPU-b");
  EXPECT_EQ(b->get_string({"reason"}), "Xid48");
  st = core::Value{};
  fold_records(st, std::span(rs).first(3));
  EXPECT_EQ(entity(st, "xid", "GPU-a")->get_string({"message"}), "off; then reboot");
  EXPECT_EQ(st.find("history")->size(), 1u);
}

TEST(FoldRecords, RejectsMalformedHealthRecordsVisibly) {
  core::Value st;
  std::vector<Record> rs = {
      {1, std::string(kHealthKind), R"({"state":"Fatal"})"},
      {2, std::string(kHealthKind), R"({"check":"xid","state":"Broken"})"},
      {3, std::string(kHealthKind),
       R"({"check":"xid","state":"Warning","message":")" + std::string(3000, 'm') + "\"}"},
      {4, std::string(kCompactedKind), R"({"firstId":1,"lastId":9,"counts":{"health":7}})"},
  };
  EXPECT_EQ(fold_records(st, rs), 4u);
  EXPECT_EQ(st.find("rejectedRecords")->as_int(), 2);
  EXPECT_NE(st.get_string({"lastRejection"}).find("'Broken' is not one of"), std::string::npos);
  const auto& msg = st.find("checks")->as_list()[0].get_string({"message"});
  EXPECT_LE(msg.size(), kMaxMessage);
  EXPECT_NE(msg.find("more bytes)"), std::string::npos);
  EXPECT_EQ(st.find("compactedRecords")->find("health")->as_int(), 7);
  EXPECT_EQ(st.find("lastAppliedRecordId")->as_int(), 4);
  EXPECT_EQ(fold_records(st, rs), 0u);  // all redelivered
}

}  // namespace
}  // namespace gpufleet::agent
