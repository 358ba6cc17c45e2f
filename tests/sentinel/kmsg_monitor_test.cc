#include "sentinel/kmsg_monitor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/nodehealth.h"
#include "core/json.h"
#include "core/xid_catalog.h"
#include "sim/fault.h"
#include "sim/kmsg_log.h"
#include "sim/xid_text.h"

namespace gpufleet::sentinel {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sentinel-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

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

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << text;
}

// A simulated node: its kernel ring written by the simulator's KmsgLog, a boot id file and
// nvidia-smi's GPU list, as `gpufleet sim` lays them out.
class Node {
 public:
  Node() {
    ctx.identity.node_name = "h100-00-01";
    ctx.host_root = dir.path() / "root";
    ctx.state_dir = dir.path() / "state";
    fs::create_directories(ctx.state_dir);
    boot("boot-1");
    write(ctx.host_root / "run/nvidia-smi/query-gpu.csv",
          "index, pci.bus_id, uuid, name, memory.total [MiB]\n"
          "0, 00000000:18:00.0, GPU-aaaa, NVIDIA H100 80GB HBM3, 81559 MiB\n"
          "1, 00000000:2A:00.0, GPU-bbbb, NVIDIA H100 80GB HBM3, 81559 MiB\n");
    flush();
  }
  void boot(const std::string& id) {
    log.reset();
    write(ctx.host_root / "proc/sys/kernel/random/boot_id", id + "\n");
    log.append(sim::kKernNotice, 0, "Linux version 6.8.0-45-generic");
  }
  void xid(std::string_view pci, int code, std::uint64_t usec, std::string_view msg = "msg") {
    log.append(sim::kKernWarning, usec, sim::xid_line(pci, code, std::nullopt, "", msg));
  }
  void recovery(std::string_view pci, sim::RecoveryAction from, sim::RecoveryAction to,
                std::uint64_t usec) {
    log.append(sim::kKernWarning, usec,
               sim::xid_line(pci, 154, std::nullopt, "", sim::xid154_message(from, to)));
  }
  void flush() { write(ctx.host_root / "dev/kmsg", log.render()); }

  TempDir dir;
  agent::NodeContext ctx;
  sim::KmsgLog log;
};

TEST(KmsgMonitor, XidBecomesTypedEventAndGpuHealth) {
  Node n;
  n.xid("0000:2a:00", 79, 5'000'000, "GPU has fallen off the bus.");
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  auto ev = out.of(kKernelEventKind);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].get_string({"type"}), "Xid");
  EXPECT_EQ(ev[0].find("code")->as_int(), 79);
  EXPECT_EQ(ev[0].find("gpu")->as_int(), 1);
  EXPECT_EQ(ev[0].get_string({"uuid"}), "GPU-bbbb");
  EXPECT_EQ(ev[0].get_string({"severity"}), "critical");
  EXPECT_EQ(ev[0].get_string({"action"}), core::action_name(core::XidAction::RebootNode));
  EXPECT_EQ(ev[0].get_string({"bootId"}), "boot-1");
  auto h = out.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"check"}), "xid");
  EXPECT_EQ(h[0].get_string({"entity"}), "GPU-bbbb");
  EXPECT_EQ(h[0].get_string({"state"}), "Fatal");
  EXPECT_EQ(h[0].get_string({"reason"}), "Xid79");
  EXPECT_EQ(m.stats().records, 2u);
}

TEST(KmsgMonitor, UnknownAddressIsNamedByPci) {
  Node n;
  n.xid("0000:99:00", 48, 1);
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  auto h = out.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"entity"}), "PCI:0000:99:00");
  EXPECT_EQ(out.of(kKernelEventKind)[0].find("gpu"), nullptr);
}

TEST(KmsgMonitor, RestartResumesWithoutReemitting) {
  Node n;
  n.xid("0000:18:00", 48, 1'000'000);
  n.flush();
  {
    KmsgMonitor m(n.ctx);
    Collect out;
    m.poll(out);
    EXPECT_EQ(out.of(kKernelEventKind).size(), 1u);
    m.poll(out);  // persists the position of the first poll (journalled by now)
    EXPECT_EQ(out.of(kKernelEventKind).size(), 1u);
  }
  n.xid("0000:2a:00", 48, 60'000'000);
  n.flush();
  KmsgMonitor again(n.ctx);
  Collect out;
  again.poll(out);
  auto ev = out.of(kKernelEventKind);
  ASSERT_EQ(ev.size(), 1u);  // only the record written after the restart
  EXPECT_EQ(ev[0].get_string({"uuid"}), "GPU-bbbb");
  // The GPU that was faulty before the restart is still known as faulty: a reset clears it.
  n.recovery("0000:18:00", sim::RecoveryAction::GpuReset, sim::RecoveryAction::None, 61'000'000);
  n.flush();
  Collect later;
  again.poll(later);
  auto h = later.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].get_string({"entity"}), "GPU-aaaa");
  EXPECT_EQ(h[0].get_string({"state"}), "Healthy");
  EXPECT_EQ(h[0].get_string({"reason"}), "GpuResetSucceeded");
}

TEST(KmsgMonitor, CrashBeforeJournalReemitsNeverLoses) {
  Node n;
  n.xid("0000:18:00", 48, 1'000'000);
  n.flush();
  {
    KmsgMonitor m(n.ctx);
    Collect out;
    m.poll(out);  // the agent dies before journalling this batch: no second poll
  }
  KmsgMonitor again(n.ctx);
  Collect out;
  again.poll(out);
  EXPECT_EQ(out.of(kKernelEventKind).size(), 1u);
}

TEST(KmsgMonitor, RebootIsOneEventNotAStormOfStaleOnes) {
  Node n;
  for (int i = 0; i < 50; ++i) n.xid(i % 2 ? "0000:18:00" : "0000:2a:00", 79, 1'000'000 + i);
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  EXPECT_EQ(out.of(agent::kHealthKind).size(), 2u);
  m.poll(out);

  n.boot("boot-2");
  n.log.append(sim::kKernInfo, 10, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module");
  n.flush();
  Collect after;
  m.poll(after);
  EXPECT_EQ(after.of(kKernelEventKind).size(), 0u);  // nothing of the old boot replayed
  auto h = after.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 2u);  // each faulty GPU recovered once
  for (const auto& v : h) {
    EXPECT_EQ(v.get_string({"state"}), "Healthy");
    EXPECT_EQ(v.get_string({"reason"}), "NodeRebooted");
  }
  EXPECT_EQ(m.stats().reboots, 1u);
  // The new boot's records (seq restarts at 0) are read, not skipped as old.
  n.xid("0000:18:00", 48, 20);
  n.flush();
  Collect next;
  m.poll(next);
  EXPECT_EQ(next.of(kKernelEventKind).size(), 1u);

  // A restart after the reboot does not replay the old boot either.
  m.poll(next);
  KmsgMonitor restarted(n.ctx);
  Collect r;
  restarted.poll(r);
  EXPECT_TRUE(r.items.empty());
}

TEST(KmsgMonitor, RingRestartWithoutBootIdIsAReboot) {
  Node n;
  fs::remove(n.ctx.host_root / "proc/sys/kernel/random/boot_id");
  for (int i = 0; i < 20; ++i) n.xid("0000:18:00", 13, 1'000'000 + i * 20'000'000);
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  EXPECT_EQ(out.of(kKernelEventKind).size(), 20u);
  n.log.reset();  // a reboot: seq restarts at 0, no boot id to tell
  n.log.append(sim::kKernNotice, 0, "Linux version 6.8.0-45-generic");
  n.xid("0000:2a:00", 48, 10);
  n.flush();
  Collect after;
  m.poll(after);
  auto ev = after.of(kKernelEventKind);
  ASSERT_EQ(ev.size(), 1u);  // the new boot's Xid is read, not skipped as old
  EXPECT_EQ(ev[0].get_string({"uuid"}), "GPU-bbbb");
  EXPECT_EQ(m.stats().reboots, 1u);
  // Unchanged ring: nothing re-read, nothing said.
  const auto records = m.stats().records;
  Collect again;
  m.poll(again);
  EXPECT_TRUE(again.items.empty());
  EXPECT_EQ(m.stats().records, records);
}

TEST(KmsgMonitor, BurstsAreSuppressedAtTheSource) {
  Node n;
  for (int i = 0; i < 100; ++i) n.xid("0000:18:00", 13, 1'000'000 + i * 1000);
  n.xid("0000:18:00", 31, 1'200'000);   // another code: its own event
  n.xid("0000:18:00", 13, 30'000'000);  // after the window: a new event with the count
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  auto ev = out.of(kKernelEventKind);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[2].find("suppressedBefore")->as_uint(), 99u);
  EXPECT_EQ(m.stats().suppressed, 99u);
  // Health is said once per change, not per event: Xid13 makes the GPU Warning; Xid31 on the
  // Warning GPU is part of that fault (its message says so, the reason stays); Xid13 again is
  // its repeat and says nothing new.
  auto h = out.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].get_string({"state"}), "Warning");
  EXPECT_EQ(h[1].get_string({"reason"}), "Xid13");
  EXPECT_NE(h[1].get_string({"message"}).find("; then Xid31 on GPU-aaaa"), std::string::npos)
      << h[1].get_string({"message"});
}

TEST(KmsgMonitor, BurstStateIsBounded) {
  Node n;
  KmsgMonitorOptions o;
  o.max_keys = 4;
  for (int i = 0; i < 10; ++i) n.xid("0000:18:00", 100 + i, 1'000'000 + i);
  n.xid("0000:18:00", 100, 1'000'100);  // its key was evicted: reported again
  n.flush();
  KmsgMonitor m(n.ctx, o);
  Collect out;
  m.poll(out);
  EXPECT_EQ(out.of(kKernelEventKind).size(), 11u);
}

TEST(KmsgMonitor, SuccessfulResetCancelsTheFaultButNotAFallenOffGpu) {
  Node n;
  n.xid("0000:18:00", 48, 1'000'000);
  n.recovery("0000:18:00", sim::RecoveryAction::None, sim::RecoveryAction::GpuReset, 1'000'001);
  n.log.append(sim::kKernErr, 2'000'000, "NVRM: GPU 0000:2a:00.0: GPU has fallen off the bus.");
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  auto h = out.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 3u);  // 48 Fatal, its recovery action (in the message), fell off
  EXPECT_EQ(h[1].get_string({"state"}), "Fatal");
  EXPECT_EQ(h[1].get_string({"reason"}), "Xid48");  // the fault is still the Xid 48
  EXPECT_NE(h[1].get_string({"message"}).find("; then RecoveryAction on GPU-aaaa"),
            std::string::npos)
      << h[1].get_string({"message"});
  EXPECT_EQ(h[2].get_string({"entity"}), "GPU-bbbb");
  EXPECT_EQ(h[2].get_string({"reason"}), "GpuFellOffBus");

  n.recovery("0000:18:00", sim::RecoveryAction::GpuReset, sim::RecoveryAction::None, 3'000'000);
  n.recovery("0000:2a:00", sim::RecoveryAction::NodeReboot, sim::RecoveryAction::None, 3'000'001);
  n.xid("0000:18:00", 48, 3'000'002);  // the same Xid right after the reset is a new fault
  n.flush();
  Collect after;
  m.poll(after);
  h = after.of(agent::kHealthKind);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].get_string({"entity"}), "GPU-aaaa");
  EXPECT_EQ(h[0].get_string({"state"}), "Healthy");
  EXPECT_EQ(h[1].get_string({"entity"}), "GPU-aaaa");
  EXPECT_EQ(h[1].get_string({"state"}), "Fatal");
}

// Folds what a monitor emitted into a NodeHealth status as the agent's sink does, and returns
// the history entries of one entity as "state reason".
std::vector<std::string> history_of(const Collect& out, std::string_view entity,
                                    core::Value& status, std::uint64_t& next_id) {
  std::vector<agent::Record> records;
  for (const auto& [kind, payload] : out.items)
    records.push_back({next_id++, kind, core::to_json(payload)});
  agent::fold_records(status, records);
  std::vector<std::string> entries;
  if (const core::Value* h = status.find("history"); h != nullptr && h->is_list())
    for (const auto& e : h->as_list())
      if (e.get_string({"entity"}) == entity)
        entries.push_back(std::string(e.get_string({"state"})) + " " +
                          std::string(e.get_string({"reason"})));
  return entries;
}

// Issue 29: one fault, one history entry. The kernel log as the driver prints it when a GPU
// falls off the bus (a burst of Xid 79 over more than the burst window, the recovery-action
// line, more Xid 79) and when a double-bit ECC error hits (Xid 48 burst, the row-remap event,
// the recovery action, the contained and uncontained memory errors that follow).
TEST(KmsgMonitor, BurstWithRecoveryActionIsOneFaultInTheHistory) {
  Node n;
  const char* off =
      "NVRM: Xid (PCI:0000:2a:00): 79, pid=1234, name=python3, GPU has fallen off the bus.";
  for (int i = 0; i < 5; ++i) n.log.append(sim::kKernWarning, 5'000'000 + i * 1000, off);
  n.log.append(sim::kKernWarning, 5'010'000,
               "NVRM: Xid (PCI:0000:2a:00): 154, GPU recovery action changed from 0x0 (None) to "
               "0x2 (Node Reboot Required)");
  n.log.append(sim::kKernWarning, 20'000'000, off);  // after the burst window: a new burst
  const char* dbe =
      "NVRM: Xid (PCI:0000:18:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double "
      "bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x3f2c0000.";
  for (int i = 0; i < 3; ++i) n.log.append(sim::kKernWarning, 6'000'000 + i, dbe);
  n.log.append(sim::kKernWarning, 6'000'010,
               "NVRM: Xid (PCI:0000:18:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: "
               "New row (0x0000000000001234) marked for remapping, reset gpu to activate.");
  n.log.append(sim::kKernWarning, 6'000'020,
               "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to "
               "0x1 (GPU Reset Required)");
  n.log.append(sim::kKernWarning, 6'000'030,
               "NVRM: Xid (PCI:0000:18:00): 94, pid=4242, name=python3, Contained: SM (0x1). RST: "
               "No, D-RST: No");
  n.log.append(sim::kKernWarning, 6'000'040,
               "NVRM: Xid (PCI:0000:18:00): 95, pid=4242, name=python3, Uncontained: FBHUB. RST: "
               "Yes, D-RST: No");
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  core::Value status;
  std::uint64_t id = 1;
  EXPECT_EQ(history_of(out, "GPU-bbbb", status, id), (std::vector<std::string>{"Fatal Xid79"}));
  EXPECT_EQ(history_of({}, "GPU-aaaa", status, id), (std::vector<std::string>{"Fatal Xid48"}));
  // What followed is kept in the entity's message: the driver wants a reboot, a reset.
  std::string msg;
  for (const auto& c : status.find("checks")->as_list())
    for (const auto& e : c.find("entities")->as_list())
      if (e.get_string({"id"}) == "GPU-bbbb") msg = e.get_string({"message"});
  EXPECT_NE(msg.find("Xid79 on GPU-bbbb"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(action Node Reboot Required)"), std::string::npos) << msg;

  // A restarted agent (state from the file) still knows the open faults: a later repeat and
  // the recovery line again add nothing.
  n.log.append(sim::kKernWarning, 40'000'000, off);
  n.log.append(sim::kKernWarning, 40'000'010,
               "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to "
               "0x1 (GPU Reset Required)");
  n.flush();
  Collect later;
  m.poll(later);  // also saves the state of the first poll
  EXPECT_EQ(later.of(agent::kHealthKind).size(), 0u);
  EXPECT_EQ(later.of(kKernelEventKind).size(), 2u);  // the kernel events are still told
  {
    KmsgMonitor restarted(n.ctx);
    Collect again;
    restarted.poll(again);
    EXPECT_EQ(again.of(agent::kHealthKind).size(), 0u);
  }

  // A successful reset of GPU 0 ends its fault; the next Xid 48 is a new fault. GPU 1 (off the
  // bus) stays faulty until a reboot.
  Node fresh;
  for (int i = 0; i < 3; ++i) fresh.log.append(sim::kKernWarning, 1'000'000 + i, dbe);
  fresh.log.append(sim::kKernWarning, 1'000'010,
                   "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) "
                   "to 0x1 (GPU Reset Required)");
  fresh.log.append(sim::kKernWarning, 2'000'000,
                   "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x1 (GPU "
                   "Reset Required) to 0x0 (None)");
  fresh.log.append(sim::kKernWarning, 3'000'000, dbe);
  fresh.log.append(sim::kKernWarning, 3'000'010,
                   "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) "
                   "to 0x1 (GPU Reset Required)");
  fresh.flush();
  KmsgMonitor m2(fresh.ctx);
  Collect out2;
  m2.poll(out2);
  core::Value st2;
  std::uint64_t id2 = 1;
  EXPECT_EQ(history_of(out2, "GPU-aaaa", st2, id2),
            (std::vector<std::string>{"Fatal Xid48", "Healthy GpuResetSucceeded", "Fatal Xid48"}));
}

TEST(KmsgMonitor, MalformedLinesAndGapsAreCounted) {
  Node n;
  n.xid("0000:18:00", 13, 1);
  std::string text = n.log.render();
  text += "garbage without format\n";
  text += std::string(20000, 'x') + "\n";
  text += "  SUBSYSTEM=pci\n";          // continuation line: not a record, not malformed
  text += "4,40,5,-;unrelated line\n";  // seq 2..39 overwritten before we read them
  write(n.ctx.host_root / "dev/kmsg", text);
  KmsgMonitor m(n.ctx);
  Collect out;
  m.poll(out);
  EXPECT_EQ(m.stats().malformed, 2u);
  EXPECT_EQ(m.stats().lost, 38u);
  EXPECT_EQ(m.stats().records, 3u);
  EXPECT_EQ(out.of(kKernelEventKind).size(), 1u);
}

TEST(KmsgMonitor, NoKernelLogIsQuiet) {
  TempDir d;
  agent::NodeContext ctx;
  ctx.host_root = d.path();
  ctx.state_dir = d.path() / "s";
  KmsgMonitor m(ctx);
  Collect out;
  m.poll(out);
  EXPECT_TRUE(out.items.empty());
}

TEST(GpuQueryCsv, MapsPciToIndexAndUuid) {
  auto m = parse_gpu_query_csv(
      "index, pci.bus_id, uuid, name\n0, 00000000:18:00.0, GPU-a, H100\n"
      "1, 00000000:2A:00.0, [Unknown Error], H100\nbroken\n");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["0000:18:00"].index, 0);
  EXPECT_EQ(m["0000:18:00"].uuid, "GPU-a");
  EXPECT_EQ(m["0000:2a:00"].uuid, "");
  EXPECT_TRUE(parse_gpu_query_csv("name, memory\nx, y\n").empty());
}

}  // namespace
}  // namespace gpufleet::sentinel

namespace gpufleet::sentinel {
namespace {

// Figure for docs/sentinel.md: one poll over a full simulated ring (4,096 records, 1 in 8 an
// Xid on a rotating GPU and code), then a poll over an unchanged ring.
TEST(KmsgMonitor, PollCostOfAFullRing) {
  Node n;
  n.log = sim::KmsgLog(4096);
  const char* pcis[] = {"0000:18:00", "0000:2a:00"};
  for (int i = 0; i < 4096; ++i) {
    if (i % 8 == 0) {
      n.xid(pcis[i % 16 == 0 ? 0 : 1], 13 + (i / 8) % 50, 1'000'000 + i);
    } else {
      n.log.append(sim::kKernInfo, 1'000'000 + i, "eth0: renamed from veth1234 link becomes ready");
    }
  }
  n.flush();
  KmsgMonitor m(n.ctx);
  Collect out;
  const auto t0 = std::chrono::steady_clock::now();
  m.poll(out);
  const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(m.stats().records, 4096u);
  EXPECT_EQ(m.stats().events, 512u);
  const auto t1 = std::chrono::steady_clock::now();
  Collect again;
  m.poll(again);
  const double idle = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_TRUE(again.items.empty());
  std::printf(
      "kmsg-xid: full ring of 4096 records in %.1f ms (%.0f records/s); unchanged ring "
      "%.3f ms\n",
      first * 1e3, 4096 / first, idle * 1e3);
}

}  // namespace
}  // namespace gpufleet::sentinel
