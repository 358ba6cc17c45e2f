#include "agent/remediation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/journal.h"
#include "agent/nodehealth.h"
#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "remediation-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string error_of(std::string_view text) {
  try {
    parse_remediation_request(text);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(RemediationRequest, ParsesWhatSentinelWrites) {
  auto r = parse_remediation_request(R"({"incident":"gpu-1-mb3x","attempt":2,"action":"reboot"})");
  EXPECT_EQ(r.incident, "gpu-1-mb3x");
  EXPECT_EQ(r.attempt, 2);
  EXPECT_EQ(r.action, "reboot");
  const std::string reordered = R"({"action":"gpu-reset","attempt":1,"incident":"x"})";
  EXPECT_EQ(parse_remediation_request(reordered).action, "gpu-reset");
  EXPECT_TRUE(parse_remediation_request(reordered).gpus.empty());  // none named: whole node
  const auto g = parse_remediation_request(
      R"({"incident":"x","attempt":1,"action":"gpu-reset","gpus":["GPU-ab12-CD34","GPU-ee","GPU-ab12-CD34"]})");
  EXPECT_EQ(g.gpus, (std::vector<std::string>{"GPU-ab12-CD34", "GPU-ee"}));  // once each
}

TEST(RemediationRequest, EachBadInputNamesTheFieldAndValue) {
  struct Case {
    std::string text;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"not json", {"is not JSON", "not json"}},
      {"", {"is not JSON"}},
      {"[1]", {"not a JSON object"}},
      {R"({"attempt":1,"action":"reboot"})", {"missing field \"incident\""}},
      {R"({"incident":"","attempt":1,"action":"reboot"})", {"\"incident\"", "non-empty"}},
      {R"({"incident":7,"attempt":1,"action":"reboot"})", {"\"incident\"", "7"}},
      {R"({"incident":"i","action":"reboot"})", {"missing field \"attempt\""}},
      {R"({"incident":"i","attempt":0,"action":"reboot"})", {"\"attempt\" is 0", "from 1"}},
      {R"({"incident":"i","attempt":-3,"action":"reboot"})", {"\"attempt\" is -3"}},
      {R"({"incident":"i","attempt":"2","action":"reboot"})", {"\"attempt\" is \"2\""}},
      {R"({"incident":"i","attempt":1.5,"action":"reboot"})", {"\"attempt\" is 1.5"}},
      {R"({"incident":"i","attempt":1})", {"missing field \"action\""}},
      {R"({"incident":"i","attempt":1,"action":"powercycle"})",
       {"\"action\" is \"powercycle\"", "\"reboot\" or \"gpu-reset\""}},
      {R"({"incident":"i","attempt":1,"action":"reboot","gpu":0})", {"unknown field \"gpu\""}},
      {std::string(5000, ' '), {"5000 bytes"}},
      {R"({"incident":"i","attempt":1,"action":"reboot","gpus":["GPU-a"]})",
       {"\"gpus\" is set for action \"reboot\"", "only to \"gpu-reset\""}},
      {R"({"incident":"i","attempt":1,"action":"gpu-reset","gpus":"GPU-a"})",
       {"\"gpus\" is", "list of at most 16 GPU UUIDs"}},
      {R"({"incident":"i","attempt":1,"action":"gpu-reset","gpus":["GPU-a",3]})",
       {"\"gpus[1]\" is 3", "GPU UUID"}},
      {R"({"incident":"i","attempt":1,"action":"gpu-reset","gpus":["0000:b3:00"]})",
       {"\"gpus[0]\" is \"0000:b3:00\""}},
      {R"({"incident":"i","attempt":1,"action":"gpu-reset","gpus":["GPU-a;reboot"]})",
       {"\"gpus[0]\" is \"GPU-a;reboot\""}},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(c.text);
    ASSERT_FALSE(e.empty()) << "accepted: " << c.text;
    EXPECT_NE(e.find("sentinel.gpufleet.io/remediation-request"), std::string::npos) << e;
    EXPECT_NE(e.find("sentinel writes"), std::string::npos) << e;  // the fix: the expected shape
    for (const auto& s : c.says) EXPECT_NE(e.find(s), std::string::npos) << c.text << " -> " << e;
  }
}

TEST(SplitCommand, WordsAndQuotesNoShell) {
  EXPECT_EQ(split_command("nsenter -t 1 -- systemctl  reboot", "--reboot-command"),
            (std::vector<std::string>{"nsenter", "-t", "1", "--", "systemctl", "reboot"}));
  EXPECT_EQ(split_command(R"(sh -c 'echo "a b" > f')", "--x"),
            (std::vector<std::string>{"sh", "-c", R"(echo "a b" > f)"}));
  EXPECT_EQ(split_command("a '' b", "--x"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_THROW(split_command("  ", "--reboot-command"), core::InvalidInput);
  EXPECT_THROW(split_command("sh -c 'oops", "--reboot-command"), core::InvalidInput);
}

TEST(RunCommand, ExitCodesOutputTailAndTimeout) {
  auto ok = run_command({"/bin/true"}, 5s);
  EXPECT_TRUE(ok.ok()) << ok.describe();

  auto fail = run_command({"/bin/false"}, 5s);
  EXPECT_TRUE(fail.started);
  EXPECT_FALSE(fail.ok());
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_NE(fail.describe().find("exit status 1"), std::string::npos);

  auto out = run_command({"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"}, 5s);
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_NE(out.output.find("to-stdout"), std::string::npos);
  EXPECT_NE(out.output.find("to-stderr"), std::string::npos);

  auto tail = run_command({"/bin/sh", "-c",
                           "i=0; while [ $i -lt 2000 ]; do echo line$i; "
                           "i=$((i+1)); done; exit 2"},
                          10s, 64);
  EXPECT_LE(tail.output.size(), 64u);
  EXPECT_NE(tail.output.find("line1999"), std::string::npos) << tail.output;

  const auto start = std::chrono::steady_clock::now();
  auto slow = run_command({"/bin/sleep", "5"}, 1s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(slow.timed_out);
  EXPECT_FALSE(slow.ok());
  EXPECT_LT(took, 4s);
  EXPECT_NE(slow.describe().find("timed out"), std::string::npos);

  // The whole process group goes: a child of the command does not outlive the timeout.
  auto group = run_command({"/bin/sh", "-c", "sleep 30 & sleep 30; echo never"}, 500ms);
  EXPECT_TRUE(group.timed_out);

  auto missing = run_command({"/nonexistent/gpufleet-no-such-tool", "x"}, 5s);
  EXPECT_FALSE(missing.started);
  EXPECT_NE(missing.describe().find("cannot run /nonexistent/gpufleet-no-such-tool"),
            std::string::npos)
      << missing.describe();
}

// Counts what it is asked to do; fails when told to.
class FakeExecutor final : public Executor {
 public:
  ExecResult execute(const NodeIdentity&, const RemediationRequest& r) override {
    calls.push_back(r.incident + "/" + std::to_string(r.attempt) + "/" + r.action);
    return {.ok = !fail, .message = fail ? "exit status 1; output: boom" : "done"};
  }
  std::vector<std::string> calls;
  bool fail = false;
};

struct Journalled {
  std::string kind;
  core::Value payload;
};

std::string request(std::string_view incident, int attempt, std::string_view action = "reboot") {
  core::Value v = core::Value::map();
  v["incident"] = std::string(incident);
  v["attempt"] = attempt;
  v["action"] = std::string(action);
  return core::to_json(v);
}

std::string quarantine(std::string_view incident) {
  return R"({"cordoned":true,"taints":[],"entities":["xid/GPU-1"],"incident":")" +
         std::string(incident) + "\"}";
}

class NodeRemediationTest : public ::testing::Test {
 protected:
  std::unique_ptr<NodeRemediation> make(Executor* exec) {
    NodeIdentity id;
    id.node_name = "gpu-1";
    return std::make_unique<NodeRemediation>(
        id, dir.path(), exec, [this](std::string_view kind, const core::Value& payload) {
          journal.push_back({std::string(kind), payload});
        });
  }
  TempDir dir;
  FakeExecutor exec;
  std::vector<Journalled> journal;
};

TEST_F(NodeRemediationTest, ActsOncePerIncidentAndAttemptAcrossRestarts) {
  auto node = make(&exec);
  EXPECT_EQ(node->handle("", ""), Outcome::None);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::Succeeded);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::AlreadyTaken);
  ASSERT_EQ(exec.calls, (std::vector<std::string>{"inc-a/1/reboot"}));
  ASSERT_EQ(journal.size(), 2u);
  EXPECT_EQ(journal[0].kind, kRemediationStartedKind);
  EXPECT_EQ(journal[0].payload.get_string({"incident"}), "inc-a");
  EXPECT_EQ(journal[0].payload.find("attempt")->as_int(), 1);
  EXPECT_EQ(journal[0].payload.get_string({"action"}), "reboot");
  EXPECT_EQ(journal[1].kind, kRemediationSucceededKind);

  // The reboot ended the agent: a new object on the same state dir takes nothing again.
  node = make(&exec);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::AlreadyTaken);
  EXPECT_EQ(exec.calls.size(), 1u);
  EXPECT_TRUE(fs::exists(dir.path() / "remediation" / "requests.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "remediation" / "requests.json.tmp"));

  // The next attempt is a new request; then an older one is never run.
  EXPECT_EQ(node->handle(request("inc-a", 3), quarantine("inc-a")), Outcome::Succeeded);
  EXPECT_EQ(node->handle(request("inc-a", 2), quarantine("inc-a")), Outcome::Stale);
  node = make(&exec);
  EXPECT_EQ(node->handle(request("inc-a", 2), quarantine("inc-a")), Outcome::Stale);
  EXPECT_EQ(node->ledger().attempt_of("inc-a"), 3);
  // Another incident has its own attempts.
  EXPECT_EQ(node->handle(request("inc-b", 1, "gpu-reset"), quarantine("inc-b")),
            Outcome::Succeeded);
  EXPECT_EQ(exec.calls,
            (std::vector<std::string>{"inc-a/1/reboot", "inc-a/3/reboot", "inc-b/1/gpu-reset"}));
}

TEST_F(NodeRemediationTest, RecordsBeforeActing) {
  // An executor that "reboots": the process dies inside execute(). Simulated by checking the
  // ledger on disk from inside the action.
  class Checking final : public Executor {
   public:
    explicit Checking(fs::path d) : dir(std::move(d)) {}
    ExecResult execute(const NodeIdentity&, const RemediationRequest& r) override {
      RemediationLedger on_disk(dir / "remediation");
      seen = on_disk.check(r) == RemediationLedger::Verdict::AlreadyTaken;
      return {.ok = true, .message = ""};
    }
    fs::path dir;
    bool seen = false;
  } checking(dir.path());
  auto node = make(&checking);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::Succeeded);
  EXPECT_TRUE(checking.seen) << "the request was not durably recorded before the action";
}

TEST_F(NodeRemediationTest, FailureIsJournalledAndNotRetriedForTheSameAttempt) {
  exec.fail = true;
  auto node = make(&exec);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::Failed);
  ASSERT_EQ(journal.size(), 2u);
  EXPECT_EQ(journal[1].kind, kRemediationFailedKind);
  EXPECT_EQ(journal[1].payload.get_string({"error"}), "exit status 1; output: boom");
  EXPECT_EQ(journal[1].payload.find("attempt")->as_int(), 1);
  // Sentinel's contract: it times out and asks again with a new attempt.
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::AlreadyTaken);
  exec.fail = false;
  EXPECT_EQ(node->handle(request("inc-a", 2), quarantine("inc-a")), Outcome::Succeeded);
  EXPECT_EQ(exec.calls.size(), 2u);
}

TEST_F(NodeRemediationTest, BadRequestIsReportedOnceEvenAcrossRestarts) {
  auto node = make(&exec);
  const std::string bad = R"({"incident":"inc-a","attempt":1,"action":"powercycle"})";
  EXPECT_EQ(node->handle(bad, quarantine("inc-a")), Outcome::Rejected);
  EXPECT_EQ(node->handle(bad, quarantine("inc-a")), Outcome::Rejected);
  node = make(&exec);
  EXPECT_EQ(node->handle(bad, quarantine("inc-a")), Outcome::Rejected);
  ASSERT_EQ(journal.size(), 1u);
  EXPECT_EQ(journal[0].kind, kRemediationRejectedKind);
  EXPECT_NE(journal[0].payload.get_string({"error"}).find("\"action\" is \"powercycle\""),
            std::string::npos);
  EXPECT_EQ(journal[0].payload.get_string({"annotation"}), bad);
  EXPECT_TRUE(exec.calls.empty());
  // A good request after it works.
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::Succeeded);
}

TEST_F(NodeRemediationTest, ActsOnlyWhileTheQuarantineNamesTheIncident) {
  auto node = make(&exec);
  EXPECT_EQ(node->handle(request("inc-a", 1), ""), Outcome::NotQuarantined);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-other")), Outcome::NotQuarantined);
  EXPECT_EQ(node->handle(request("inc-a", 1), "{broken"), Outcome::NotQuarantined);
  EXPECT_TRUE(exec.calls.empty());
  EXPECT_TRUE(journal.empty());
  // Not recorded: once the quarantine names it, it is acted on.
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::Succeeded);
}

TEST_F(NodeRemediationTest, OffRecordsAndJournalsOnceWithoutActing) {
  auto node = make(nullptr);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::Disabled);
  EXPECT_EQ(node->handle(request("inc-a", 1), quarantine("inc-a")), Outcome::AlreadyTaken);
  ASSERT_EQ(journal.size(), 1u);
  EXPECT_EQ(journal[0].kind, kRemediationFailedKind);
  EXPECT_NE(journal[0].payload.get_string({"error"}).find("--remediation=off"), std::string::npos);
}

TEST_F(NodeRemediationTest, UnreadableLedgerRefusesToGuess) {
  fs::create_directories(dir.path() / "remediation");
  std::ofstream(dir.path() / "remediation" / "requests.json") << "{garbage";
  EXPECT_THROW(make(&exec), core::InvalidInput);
}

TEST(RemediationLedger, BoundedToTheNewestIncidents) {
  TempDir dir;
  RemediationLedger ledger(dir.path());
  for (std::size_t i = 0; i < RemediationLedger::kMaxIncidents + 10; ++i)
    ledger.record({"inc-" + std::to_string(i), 1, "reboot", {}});
  RemediationLedger again(dir.path());
  EXPECT_EQ(again.attempt_of("inc-0"), 0);  // the oldest went
  EXPECT_EQ(again.attempt_of("inc-" + std::to_string(RemediationLedger::kMaxIncidents + 9)), 1);
  EXPECT_EQ(again.attempt_of("inc-10"), 1);
}

TEST(HostCommandExecutor, RunsTheActionsCommandAndReportsFailures) {
  TempDir dir;
  const fs::path marker = dir.path() / "marker";
  HostCommands cmds;
  cmds.reboot = {"/bin/sh", "-c", "echo rebooted >> " + marker.string()};
  cmds.gpu_reset = {"/bin/false"};
  cmds.timeout = 5s;
  HostCommandExecutor exec(cmds);
  NodeIdentity id;
  id.node_name = "gpu-1";
  auto r = exec.execute(id, {"inc", 1, "reboot", {}});
  EXPECT_TRUE(r.ok) << r.message;
  std::ifstream in(marker);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "rebooted");
  auto f = exec.execute(id, {"inc", 1, "gpu-reset", {}});
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.message.find("`/bin/false`: exit status 1"), std::string::npos) << f.message;

  // A reset that names GPUs runs the command once per GPU with -i <uuid>, and no other.
  HostCommands per_gpu;
  per_gpu.gpu_reset = {"/bin/sh", "-c", "echo \"$*\" >> " + marker.string(), "reset"};
  per_gpu.timeout = 5s;
  RemediationRequest two{"inc", 1, "gpu-reset", {"GPU-aa", "GPU-bb"}};
  auto p = HostCommandExecutor(per_gpu).execute(id, two);
  EXPECT_TRUE(p.ok) << p.message;
  std::vector<std::string> lines;
  for (std::ifstream again(marker); std::getline(again, line);) lines.push_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{"rebooted", "-i GPU-aa", "-i GPU-bb"}));
  // The first failing GPU stops the attempt and is named.
  per_gpu.gpu_reset = {"/bin/sh", "-c", "test \"$2\" != GPU-aa", "reset"};
  auto pf = HostCommandExecutor(per_gpu).execute(id, two);
  EXPECT_FALSE(pf.ok);
  EXPECT_NE(pf.message.find("-i GPU-aa`: exit status 1"), std::string::npos) << pf.message;
  EXPECT_EQ(pf.message.find("GPU-bb"), std::string::npos) << pf.message;

  HostCommands slow;
  slow.reboot = {"/bin/sleep", "5"};
  slow.timeout = 1s;
  auto t = HostCommandExecutor(slow).execute(id, {"inc", 1, "reboot", {}});
  EXPECT_FALSE(t.ok);
  EXPECT_NE(t.message.find("timed out"), std::string::npos) << t.message;
}

// The real pieces together: a host command through the service, journalled through an Agent
// (record() from the service's thread while the agent ticks elsewhere).
TEST(RemediationService, OneThreadManyNodesThroughTheAgentJournal) {
  TempDir dir;
  class NullSink final : public Sink {
   public:
    std::size_t deliver(const NodeIdentity&, std::span<const Record> records) override {
      return records.size();
    }
  } sink;
  const fs::path marker = dir.path() / "marker";
  HostCommands cmds;
  cmds.reboot = {"/bin/sh", "-c", "echo \"$0\" >> " + marker.string(), "ran"};
  cmds.timeout = 5s;
  HostCommandExecutor exec(cmds);
  AgentOptions o;
  o.node.identity.node_name = "gpu-1";
  o.node.identity.boot_id = "boot-1";
  o.node.host_root = dir.path() / "host";
  o.node.state_dir = dir.path() / "state";
  o.fsync = false;
  std::vector<std::string> kinds;
  {
    AgentPool pool(1);
    Agent& agent = pool.add(std::make_unique<Agent>(o, sink));
    NodeRemediation node(
        agent.identity(), o.node.state_dir, &exec,
        [&agent](std::string_view kind, const core::Value& p) { agent.record(kind, p); });
    std::vector<Outcome> outcomes;  // only the service's thread writes it; read after drain()
    RemediationService service([&outcomes](Outcome o) { outcomes.push_back(o); });
    service.add_node("gpu-1", &node);
    // Many updates of the same Node (heartbeats) with the same request: one action.
    for (int i = 0; i < 50; ++i) service.offer("gpu-1", request("inc-a", 1), quarantine("inc-a"));
    service.offer("gpu-unknown", request("inc-z", 1), quarantine("inc-z"));  // not this process's
    service.drain();
    EXPECT_EQ(service.last_outcome("gpu-1"), Outcome::Succeeded);
    service.offer("gpu-1", request("inc-a", 1), quarantine("inc-a") + " ");
    service.drain();
    EXPECT_EQ(service.last_outcome("gpu-1"), Outcome::AlreadyTaken);
    service.stop();
    EXPECT_EQ(outcomes, (std::vector<Outcome>{Outcome::Succeeded, Outcome::AlreadyTaken}));
    pool.stop();
  }
  std::ifstream in(marker);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "ran\n");
  JournalOptions jo;
  jo.dir = o.node.state_dir / "journal";
  Journal j(jo);
  for (const auto& r : j.pending(1000)) kinds.push_back(r.kind);
  // agent.boot, remediation.started, remediation.succeeded were journalled. The agent's ticks
  // deliver them (the null sink applies all) at any point, so what is still pending is any
  // suffix of them: the ids tell they were written, the pending kinds that nothing else was.
  EXPECT_GE(j.stats().last_id, 3u);
  const std::vector<std::string> journalled = {std::string(kBootKind),
                                               std::string(kRemediationStartedKind),
                                               std::string(kRemediationSucceededKind)};
  ASSERT_LE(kinds.size(), journalled.size());
  EXPECT_TRUE(std::equal(kinds.begin(), kinds.end(), journalled.end() - kinds.size()))
      << "pending: " << kinds.size() << " record(s), not a suffix of boot, started, succeeded";
}

}  // namespace
}  // namespace gpufleet::agent

namespace gpufleet::agent {
namespace {

TEST(FoldRecords, RemediationRecordsShowInStatusAndUnknownKindsOnlyAdvanceTheMark) {
  core::Value status = core::Value::map();
  std::vector<Record> records = {
      {1, std::string(kRemediationStartedKind),
       R"({"incident":"inc-a","attempt":1,"action":"reboot","message":"reboot started",)"
       R"("time":"2026-12-01T04:00:00.000000Z"})"},
      {2, "some.future.kind", R"({"x":1})"},
      {3, std::string(kRemediationFailedKind),
       R"({"incident":"inc-a","attempt":1,"action":"reboot","message":"reboot failed",)"
       R"("error":"exit status 1; output: boom"})"},
  };
  EXPECT_EQ(fold_records(status, records), 3u);
  EXPECT_EQ(status.find("lastAppliedRecordId")->as_int(), 3);
  EXPECT_EQ(status.find("rejectedRecords"), nullptr);
  const core::Value* rem = status.find("remediation");
  ASSERT_NE(rem, nullptr);
  EXPECT_EQ(rem->get_string({"state"}), "Failed");
  EXPECT_EQ(rem->get_string({"incident"}), "inc-a");
  EXPECT_EQ(rem->find("attempt")->as_int(), 1);
  EXPECT_EQ(rem->get_string({"error"}), "exit status 1; output: boom");
  EXPECT_EQ(rem->find("recordId")->as_int(), 3);
  std::vector<Record> rejected = {
      {4, std::string(kRemediationRejectedKind),
       R"({"annotation":"{}","error":"missing field \"incident\"","message":"rejected"})"}};
  fold_records(status, rejected);
  EXPECT_EQ(status.get_string({"remediation", "state"}), "Rejected");
  EXPECT_EQ(status.get({"remediation", "incident"}), nullptr);
  std::vector<Record> bundle = {
      {5, std::string(kRemediationBundleKind),
       R"({"incident":"inc-b","attempt":1,"action":"reboot","state":"Collected","path":"/b.gz",)"
       R"("sha256":"ab","bytes":10,"sections":["kmsg"],"truncated":[],"errors":[]})"}};
  fold_records(status, bundle);
  EXPECT_EQ(status.get_string({"remediationBundle", "path"}), "/b.gz");
  EXPECT_EQ(status.get_string({"remediationBundle", "state"}), "Collected");
  EXPECT_EQ(status.get({"remediationBundle", "bytes"})->as_int(), 10);
  EXPECT_EQ(status.get({"remediationBundle", "truncated"}), nullptr);  // empty lists left out
  EXPECT_EQ(status.get_string({"remediation", "state"}), "Rejected");  // the request's own state
}

}  // namespace
}  // namespace gpufleet::agent
