// The agent carries out sentinel's remediation request exactly once per (incident, attempt),
// against the real API server: the real `gpufleet agent --node N` binary watches its Node,
// runs a host command (here a script that appends a line to a file) when the annotation
// sentinel.gpufleet.io/remediation-request appears, and reports through its journal to
// NodeHealth status.remediation. Re-patching the same request, other changes of the Node and a
// restart of the agent do not run it again; a higher attempt does; an older one never does.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "agent/nodehealth.h"
#include "agent/remediation.h"
#include "core/json.h"
#include "integration/kube/test_env.h"
#include "support/source_paths.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using kube::testing::admin_config;
using kube::testing::unique_name;

const kube::ResourceId kNodes{"", "v1", "nodes", false};

std::string kubectl() {
  std::string bin = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  return ::system("kubectl version --client >/dev/null 2>&1") == 0 ? "kubectl" : bin + " kubectl";
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "agent-rem-it-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int lines_in(const fs::path& p) {
  std::string s = read_all(p);
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

bool eventually(const std::function<bool()>& f, std::chrono::seconds timeout = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return f();
}

// `gpufleet agent` as a child process, its log in a file.
class AgentProcess {
 public:
  AgentProcess(std::vector<std::string> args, fs::path log) : log_(std::move(log)) {
    const std::string bin = kube::testing::env_or_empty("GPUFLEET_BIN");
    args.insert(args.begin(), {bin, "agent"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~AgentProcess() { stop(); }
  // Waits for the agent's start line (written after its Node watch began).
  bool wait_started() {
    return eventually([&] {
      started_lines_ = count_started();
      return started_lines_ > previous_started_;
    });
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  void expect_started_after(int previous) { previous_started_ = previous; }
  int count_started() const {
    std::string s = read_all(log_);
    int n = 0;
    for (std::size_t at = 0; (at = s.find("agent: started", at)) != std::string::npos; ++at) ++n;
    return n;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int started_lines_ = 0;
  int previous_started_ = 0;
};

std::string request(std::string_view incident, int attempt, std::string_view action) {
  core::Value v = core::Value::map();
  v["incident"] = std::string(incident);
  v["attempt"] = attempt;
  v["action"] = std::string(action);
  return core::to_json(v);
}

TEST(AgentRemediation, RunsTheHostCommandOncePerIncidentAndAttempt) {
  const std::string kc = kube::testing::env_or_empty("KUBECONFIG");
  const std::string src = GPUFLEET_SOURCE_DIR;
  ASSERT_EQ(::system((kubectl() + " --kubeconfig " + kc +
                      " apply --server-side --force-conflicts --field-manager=agent-it -f " + src +
                      "/deploy/crds/nodehealth.yaml >/dev/null")
                         .c_str()),
            0);
  ASSERT_EQ(::system((kubectl() + " --kubeconfig " + kc +
                      " wait --for=condition=Established --timeout=30s "
                      "crd/nodehealths.gpufleet.io >/dev/null")
                         .c_str()),
            0);

  kube::Client admin(admin_config());
  TempDir dir;
  const std::string node = unique_name("rem-node");
  const std::string incident = node + "-mb3x01";
  core::Value n = core::Value::map();
  n["apiVersion"] = "v1";
  n["kind"] = "Node";
  n["metadata"]["name"] = node;
  // Sentinel quarantines before it asks: the quarantine names the incident.
  n["metadata"]["annotations"][kQuarantineAnnotation] =
      R"({"cordoned":true,"taints":[],"entities":["xid/GPU-1"],"incident":")" + incident + "\"}";
  admin.create(kNodes, n);
  struct Cleanup {
    kube::Client& c;
    std::string node;
    ~Cleanup() {
      try {
        c.remove(kNodes, "", node);
        c.remove(kNodeHealthResource, "", node);
      } catch (...) {
      }
    }
  } cleanup{admin, node};

  const fs::path marker = dir.path() / "reboots";
  const fs::path script = dir.path() / "reboot.sh";
  std::ofstream(script) << "echo reboot >> '" << marker.string() << "'\n";
  fs::create_directories(dir.path() / "host");
  const std::vector<std::string> args = {"--node",
                                         node,
                                         "--kubeconfig",
                                         kc,
                                         "--host-root",
                                         (dir.path() / "host").string(),
                                         "--state-dir",
                                         (dir.path() / "state").string(),
                                         "--metrics-address",
                                         "",
                                         "--fsync",
                                         "false",
                                         "--reboot-command",
                                         "/bin/sh " + script.string(),
                                         "--gpu-reset-command",
                                         "/bin/sh -c 'echo no GPU here >&2; exit 3'",
                                         "--remediation-timeout",
                                         "10s"};
  const fs::path log = dir.path() / "agent.log";

  auto patch_request = [&](const std::string& text) {
    core::Value p;
    p["metadata"]["annotations"][kRemediationRequestAnnotation] = text;
    admin.patch(kNodes, "", node, kube::PatchType::Merge, p);
  };
  auto remediation_status = [&]() -> core::Value {
    auto nh = admin.try_get(kNodeHealthResource, "", node);
    if (!nh) return {};
    const core::Value* r = nh->get({"status", "remediation"});
    return r != nullptr ? *r : core::Value();
  };
  auto status_is = [&](std::string_view state, int attempt) {
    core::Value r = remediation_status();
    return r.get_string({"state"}) == state && r.find("attempt") != nullptr &&
           r.find("attempt")->as_int() == attempt;
  };

  auto agent = std::make_unique<AgentProcess>(args, log);
  ASSERT_TRUE(agent->wait_started()) << read_all(log);

  // Attempt 1: the command runs once, the outcome reaches NodeHealth.
  patch_request(request(incident, 1, "reboot"));
  ASSERT_TRUE(eventually([&] { return lines_in(marker) == 1; })) << read_all(log);
  ASSERT_TRUE(eventually([&] { return status_is("Succeeded", 1); }))
      << core::to_json(remediation_status()) << "\n"
      << read_all(log);
  EXPECT_EQ(remediation_status().get_string({"incident"}), incident);
  EXPECT_EQ(remediation_status().get_string({"action"}), "reboot");

  // The same request again (rewritten in another key order, and other Node changes): nothing.
  patch_request(R"({"action":"reboot","attempt":1,"incident":")" + incident + "\"}");
  core::Value label;
  label["metadata"]["labels"]["touched"] = "yes";
  admin.patch(kNodes, "", node, kube::PatchType::Merge, label);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(lines_in(marker), 1);

  // A restart of the agent (as after the reboot it asked for): nothing again.
  agent->stop();
  const int started = agent->count_started();
  agent = std::make_unique<AgentProcess>(args, log);
  agent->expect_started_after(started);
  ASSERT_TRUE(agent->wait_started()) << read_all(log);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(lines_in(marker), 1) << read_all(log);

  // A higher attempt runs; an older one afterwards never does.
  patch_request(request(incident, 2, "reboot"));
  ASSERT_TRUE(eventually([&] { return lines_in(marker) == 2; })) << read_all(log);
  ASSERT_TRUE(eventually([&] { return status_is("Succeeded", 2); }));
  patch_request(request(incident, 1, "reboot"));
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(lines_in(marker), 2);

  // A failing command: journalled with its exit status and output, for sentinel to retry.
  patch_request(request(incident, 3, "gpu-reset"));
  ASSERT_TRUE(eventually([&] { return status_is("Failed", 3); }))
      << core::to_json(remediation_status()) << "\n"
      << read_all(log);
  const std::string error(remediation_status().get_string({"error"}));
  EXPECT_NE(error.find("exit status 3"), std::string::npos) << error;
  EXPECT_NE(error.find("no GPU here"), std::string::npos) << error;

  // A malformed request: rejected with the field named, nothing run.
  patch_request(R"({"incident":")" + incident + R"(","attempt":4,"action":"powercycle"})");
  ASSERT_TRUE(eventually([&] { return remediation_status().get_string({"state"}) == "Rejected"; }))
      << read_all(log);
  EXPECT_NE(std::string(remediation_status().get_string({"error"})).find("powercycle"),
            std::string::npos);
  EXPECT_EQ(lines_in(marker), 2);
  agent->stop();
}

}  // namespace
}  // namespace gpufleet::agent
