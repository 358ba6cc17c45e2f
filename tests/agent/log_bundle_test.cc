#include "agent/log_bundle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "agent/remediation.h"
#include "core/gzip.h"
#include "core/json.h"
#include "core/sha256.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class BundleDir {
 public:
  BundleDir() {
    std::string tmpl = (fs::temp_directory_path() / "log-bundle-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~BundleDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream(path_ / rel, std::ios::binary) << text;
  }

 private:
  fs::path path_;
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A simulated node's host files: a kernel ring with GPU lines among others, nvidia-smi's
// CSV, one IB port.
void write_host(const BundleDir& host, int noise_lines) {
  std::string kmsg;
  for (int i = 0; i < noise_lines; ++i)
    kmsg += "6," + std::to_string(i) + ",100,-;systemd[1]: Started session " + std::to_string(i) +
            ".\n";
  kmsg += "3,900001,200,-;NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, GPU has fallen off\n";
  kmsg += "4,900002,300,-;mlx5_core 0000:1a:00.0: mlx5_port_module_event: Cable unplugged\n";
  host.write("root/dev/kmsg", kmsg);
  host.write("root/run/nvidia-smi/query-gpu.csv", "index, uuid\n0, GPU-aa\n");
  host.write("root/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  host.write("root/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "12\n");
}

TEST(LogBundle, CollectsTheSectionsCompressedWithItsDigest) {
  BundleDir d;
  write_host(d, 50);
  LogBundleSource src;
  src.host_root = d.path() / "root";
  src.node_health = [] {
    return core::parse_json(R"({"status":{"history":[{"check":"xid","state":"Fatal"}]}})");
  };
  LogBundle b = collect_log_bundle(src, d.path() / "bundles", "gpu-1", "gpu-1-abc");
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.path, (d.path() / "bundles" / "gpu-1-abc.json.gz").string());
  const std::string packed = read_all(b.path);
  EXPECT_EQ(b.bytes, packed.size());
  EXPECT_EQ(b.sha256, core::sha256_hex(packed));
  const core::Value doc = core::parse_json(core::gunzip(packed, "bundle"));
  EXPECT_EQ(doc.get_string({"incident"}), "gpu-1-abc");
  const std::string kmsg(doc.get_string({"sections", "kmsg"}));
  EXPECT_NE(kmsg.find("Xid (PCI:0000:5d:00): 79"), std::string::npos) << kmsg;
  EXPECT_NE(kmsg.find("mlx5_core"), std::string::npos) << kmsg;
  EXPECT_EQ(kmsg.find("systemd"), std::string::npos) << "lines not about the hardware kept";
  EXPECT_EQ(doc.get_string({"sections", "nvidia-smi/query-gpu.csv"}), "index, uuid\n0, GPU-aa\n");
  EXPECT_EQ(doc.get_string({"sections", "infiniband", "mlx5_0/1", "state"}), "4: ACTIVE");
  EXPECT_EQ(doc.get_string({"sections", "infiniband", "mlx5_0/1", "counters", "symbol_error"}),
            "12");
  EXPECT_EQ(doc.get_string({"sections", "nodehealth", "history"}), "");  // a list, not a string
  ASSERT_NE(doc.get({"sections", "nodehealth", "history"}), nullptr);
  EXPECT_TRUE(b.errors.empty()) << b.errors.front();
}

// Sizes are bounded: the kernel section keeps its newest bytes, a bundle over its bound is cut
// until it fits, and the directory keeps the newest bundles only.
TEST(LogBundle, BoundedInBytesAndOnDisk) {
  bool cut = false;
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "NVRM: Xid line " + std::to_string(i) + "\n";
  const std::string kept = filter_kernel_lines(many, 200, &cut);
  EXPECT_TRUE(cut);
  EXPECT_LE(kept.size(), 200u);
  EXPECT_NE(kept.find("line 999\n"), std::string::npos) << "the newest line must stay";

  BundleDir d;
  // Incompressible GPU lines: 2 MiB of kernel text through a 64 KiB compressed bound.
  std::mt19937 rng(7);
  std::string kmsg;
  while (kmsg.size() < (2u << 20)) {
    std::string noise(100, ' ');
    for (auto& c : noise) c = static_cast<char>('!' + rng() % 90);
    kmsg += "3,1,1,-;NVRM: Xid " + noise + "\n";
  }
  d.write("root/dev/kmsg", kmsg);
  LogBundleSource src;
  src.host_root = d.path() / "root";
  LogBundleOptions o;
  o.kmsg_bytes = 512 << 10;
  o.max_bundle_bytes = 64 << 10;
  o.keep = 2;
  for (const char* inc : {"inc-1", "inc-2", "inc-3"}) {
    LogBundle b = collect_log_bundle(src, d.path() / "bundles", "gpu-1", inc, o);
    ASSERT_TRUE(b.ok) << b.error;
    EXPECT_LE(b.bytes, 64u << 10);
    EXPECT_EQ(fs::file_size(b.path), b.bytes);
    EXPECT_NE(std::find(b.truncated.begin(), b.truncated.end(), "kmsg"), b.truncated.end());
    std::this_thread::sleep_for(20ms);  // distinct modification times
  }
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path() / "bundles"))
    files += e.path().string().ends_with(".json.gz") ? 1 : 0;
  EXPECT_EQ(files, 2);
  EXPECT_FALSE(fs::exists(d.path() / "bundles" / "inc-1.json.gz"));
}

// A section that cannot be read is named, the rest is written; a deadline already passed
// collects nothing but still writes what it could (and names what it skipped).
TEST(LogBundle, FailuresAreNamedAndTheDeadlineHolds) {
  BundleDir d;
  LogBundleSource src;
  src.host_root = d.path() / "missing-root";
  src.node_health = []() -> core::Value { throw std::runtime_error("apiserver away"); };
  LogBundle b = collect_log_bundle(src, d.path() / "bundles", "gpu-1", "inc-x");
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_EQ(b.errors.size(), 2u);
  EXPECT_NE(b.errors[0].find("kmsg: cannot open"), std::string::npos) << b.errors[0];
  EXPECT_EQ(b.errors[1], "nodehealth: apiserver away");

  LogBundleOptions late;
  late.deadline = 0ms;
  write_host(d, 1);
  src.host_root = d.path() / "root";
  LogBundle l = collect_log_bundle(src, d.path() / "bundles", "gpu-1", "inc-y", late);
  ASSERT_TRUE(l.ok);
  EXPECT_TRUE(l.sections.empty());
  EXPECT_NE(l.errors.front().find("deadline passed"), std::string::npos) << l.errors.front();

  // A directory that cannot be written: not ok, and why.
  d.write("file", "x");
  LogBundle w = collect_log_bundle(src, d.path() / "file" / "sub", "gpu-1", "inc-z");
  EXPECT_FALSE(w.ok);
  EXPECT_NE(w.error.find("cannot write"), std::string::npos) << w.error;
}

// Before an incident's first action the agent collects once and journals where the bundle is;
// the next attempt of the same incident does not collect again. A failed collection does not
// stop the action.
TEST(LogBundle, NodeRemediationCollectsBeforeTheFirstActionOnly) {
  BundleDir d;
  write_host(d, 3);
  struct Exec final : Executor {
    ExecResult execute(const NodeIdentity&, const RemediationRequest&) override {
      ++runs;
      return {.ok = true, .message = "ok"};
    }
    int runs = 0;
  } exec;
  std::vector<std::pair<std::string, core::Value>> journal;
  NodeIdentity id;
  id.node_name = "gpu-1";
  NodeRemediation node(
      id, d.path() / "state", &exec,
      [&](std::string_view k, const core::Value& p) { journal.emplace_back(std::string(k), p); });
  LogBundleSource src;
  src.host_root = d.path() / "root";
  node.set_log_bundle(src);
  const std::string q = R"({"cordoned":true,"entities":[],"incident":"inc-a"})";
  ASSERT_EQ(node.handle(R"({"incident":"inc-a","attempt":1,"action":"reboot"})", q),
            Outcome::Succeeded);
  ASSERT_EQ(journal.size(), 3u);
  EXPECT_EQ(journal[0].first, kRemediationBundleKind);  // before the action started
  EXPECT_EQ(journal[0].second.get_string({"state"}), "Collected");
  const std::string path(journal[0].second.get_string({"path"}));
  EXPECT_EQ(journal[0].second.get_string({"sha256"}), core::sha256_hex(read_all(path)));
  EXPECT_EQ(journal[1].first, kRemediationStartedKind);
  ASSERT_EQ(node.handle(R"({"incident":"inc-a","attempt":2,"action":"reboot"})", q),
            Outcome::Succeeded);
  EXPECT_EQ(journal.size(), 5u);  // started + succeeded, no second bundle
  EXPECT_EQ(exec.runs, 2);

  // Collection fails (the bundle directory is a file): journalled Failed, the action runs.
  d.write("state2/remediation/bundles", "not a directory");
  journal.clear();
  NodeRemediation other(
      id, d.path() / "state2", &exec,
      [&](std::string_view k, const core::Value& p) { journal.emplace_back(std::string(k), p); });
  other.set_log_bundle(src);
  ASSERT_EQ(other.handle(R"({"incident":"inc-a","attempt":1,"action":"reboot"})", q),
            Outcome::Succeeded);
  ASSERT_EQ(journal.size(), 3u);
  EXPECT_EQ(journal[0].second.get_string({"state"}), "Failed");
  EXPECT_NE(journal[0].second.get_string({"error"}).find("cannot write"), std::string::npos);
  EXPECT_EQ(exec.runs, 3);
}

}  // namespace
}  // namespace gpufleet::agent
