#include "sentinel/kmsg.h"

#include <gtest/gtest.h>

#include <chrono>

#include "core/xid_catalog.h"
#include "sim/fault.h"
#include "sim/kmsg_log.h"
#include "sim/rng.h"
#include "sim/xid_text.h"

namespace gpufleet::sentinel {
namespace {

TEST(KmsgRecord, ParsesTheDeviceFormat) {
  auto r = parse_kmsg_record("4,1523,98123456,-;NVRM: Xid (PCI:0000:b3:00): 79, pid=1, name=x, y");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->prio, 4);
  EXPECT_EQ(r->facility, 0);
  EXPECT_EQ(r->seq, 1523u);
  EXPECT_EQ(r->usec, 98123456u);
  EXPECT_EQ(r->text, "NVRM: Xid (PCI:0000:b3:00): 79, pid=1, name=x, y");
  // Facility in the high bits, extra fields after flags, escaped bytes.
  r = parse_kmsg_record("30,7,1,c,caller=T1;a\\x0ab");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->prio, 6);
  EXPECT_EQ(r->facility, 3);
  EXPECT_EQ(r->text, "a\nb");
}

TEST(KmsgRecord, MalformedLinesAreRejectedNotFatal) {
  for (std::string_view bad : {"", "hello", "4,1,2;x", "x,1,2,-;t", "4,-1,2,-;t", "4,1,2,;t",
                               "4,99999999999999999999,1,-;t", "4,1,2,-", "2000,1,1,-;t"}) {
    EXPECT_FALSE(parse_kmsg_record(bad)) << bad;
  }
  std::string huge = "4,1,1,-;" + std::string(kMaxKmsgLine, 'a');
  EXPECT_FALSE(parse_kmsg_record(huge));
}

TEST(KernelEvent, EveryXidFormOfTheReference) {
  auto e = parse_kernel_event(
      "NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, name=python3, GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, KernelEventKind::Xid);
  EXPECT_EQ(e->pci, "0000:b3:00");
  EXPECT_EQ(e->code, 79);
  EXPECT_EQ(e->pid, 1234);
  EXPECT_EQ(e->process, "python3");
  EXPECT_EQ(e->text, "GPU has fallen off the bus.");

  e = parse_kernel_event(
      "NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
      "detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, 74);
  EXPECT_EQ(e->pci, "0003:00:00");
  EXPECT_FALSE(e->pid);
  EXPECT_EQ(e->process, "");
  EXPECT_EQ(e->text,
            "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)");

  e = parse_kernel_event(
      "[  123.456789] NVRM: Xid (PCI:0000:b5:00): 13, pid='<unknown>', name=<unknown>, Graphics "
      "SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, 13);
  EXPECT_EQ(e->text, "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address");

  e = parse_kernel_event(
      "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU "
      "Reset Required)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, 154);
  EXPECT_EQ(e->recovery_action, "GPU Reset Required");
  EXPECT_FALSE(e->pid);

  // Old drivers: no "PCI:" and no pid/name at all.
  e = parse_kernel_event("NVRM: Xid (0000:3b:00): 48, An uncorrectable double bit error");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci, "0000:3b:00");
  EXPECT_EQ(e->code, 48);
  e = parse_kernel_event("NVRM: Xid (PCI:0000:3b:00): 43");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, 43);
  EXPECT_EQ(e->text, "");
}

TEST(KernelEvent, SXidAndFallenOffBus) {
  auto e = parse_kernel_event(
      "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, KernelEventKind::SXid);
  EXPECT_EQ(e->nvswitch, 0);
  EXPECT_EQ(e->pci, "0000:06:00");
  EXPECT_EQ(e->code, 20009);
  EXPECT_FALSE(e->sxid_fatal);
  EXPECT_EQ(e->text, "Non-fatal, Link 04 RX Short Error Rate");

  e = parse_kernel_event("NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, KernelEventKind::FellOffBus);
  EXPECT_EQ(e->pci, "0000:b3:00");
  EXPECT_EQ(e->code, 79);
  e = parse_kernel_event("NVRM: GPU at PCI:0000:B3:00: GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->pci, "0000:b3:00");
}

TEST(KernelEvent, OtherAndBrokenLinesAreNoEvent) {
  for (std::string_view s :
       {"Linux version 6.8.0", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module",
        "pcieport 0000:b0:00.0: pciehp: Slot(1): Link Down", "NVRM: Xid (PCI:zz:1:2): 79, x",
        "NVRM: Xid (PCI:0000:b3:00): , x", "NVRM: Xid (PCI:0000:b3:00) 79", "NVRM: Xid (",
        "nvidia-nvswitchX: SXid (PCI:0000:06:00.0): 1, a",
        "NVRM: GPU nowhere: fallen off the bus"}) {
    EXPECT_FALSE(parse_kernel_event(s)) << s;
  }
}

TEST(Pci, Normalises) {
  EXPECT_EQ(normalise_pci("00000000:B3:00.0"), "0000:b3:00");
  EXPECT_EQ(normalise_pci("0000:b3:00"), "0000:b3:00");
  EXPECT_EQ(normalise_pci("b3:00.0"), "0000:b3:00");
  EXPECT_EQ(normalise_pci("0008:1:0"), "0008:01:00");
  EXPECT_EQ(normalise_pci("nonsense"), "");
  EXPECT_EQ(normalise_pci("1:2:3:4"), "");
  EXPECT_EQ(normalise_pci("0000:b3:000"), "");
}

// The simulator's own writer (the code that renders dev/kmsg for simulated nodes): every
// catalog Xid with its generated message, the 154 recovery lines and SXids parse back.
TEST(KernelEvent, ParsesWhatTheSimulatorWrites) {
  sim::KmsgLog log;
  sim::Rng rng(42);
  int expected = 0;
  for (const auto& x : core::XidCatalog::builtin().xids()) {
    const std::string msg = x.code == 154 ? sim::xid154_message(sim::RecoveryAction::None,
                                                                sim::RecoveryAction::GpuReset)
                                          : sim::xid_message(x.code, rng, 3);
    log.append(sim::kKernWarning, 1000, sim::xid_line("0000:18:00", x.code, 77, "train", msg));
    log.append(sim::kKernWarning, 1001, sim::xid_line("0000:18:00", x.code, std::nullopt, "", msg));
    expected += 2;
  }
  for (const auto& s : core::XidCatalog::builtin().sxids()) {
    log.append(sim::kKernWarning, 1002, sim::sxid_line(2, "0000:06:00.0", s.code, 4, ""));
    ++expected;
  }
  int parsed = 0;
  const std::string text = log.render();
  std::string_view rest = text;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    auto rec = parse_kmsg_record(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    ASSERT_TRUE(rec);
    auto ev = parse_kernel_event(rec->text);
    ASSERT_TRUE(ev) << rec->text;
    if (ev->kind == KernelEventKind::SXid) {
      EXPECT_EQ(ev->nvswitch, 2);
      EXPECT_EQ(ev->sxid_fatal, sim::sxid_is_fatal(ev->code)) << rec->text;
    } else {
      EXPECT_EQ(ev->pci, "0000:18:00");
      ASSERT_NE(core::XidCatalog::builtin().find(ev->code), nullptr);
      if (ev->code == 154) {
        EXPECT_EQ(ev->recovery_action, "GPU Reset Required");
      }
    }
    ++parsed;
  }
  EXPECT_EQ(parsed, expected);
  EXPECT_GT(expected, 20);
}

// Throughput figure for docs/sentinel.md (printed, with a floor that a broken parser misses).
TEST(KmsgRecord, Throughput) {
  std::vector<std::string> lines;
  for (int i = 0; i < 1000; ++i) {
    lines.push_back("4," + std::to_string(i) + ",123456,-;" +
                    (i % 10 == 0 ? "NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, name=python3, GPU "
                                   "has fallen off the bus."
                                 : "eth0: link is up at 100 Gbps, full duplex"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t events = 0;
  const int rounds = 200;
  for (int r = 0; r < rounds; ++r) {
    for (const auto& l : lines) {
      auto rec = parse_kmsg_record(l);
      if (rec && parse_kernel_event(rec->text)) ++events;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(events, 100u * rounds);
  std::printf("kmsg: %.0f lines/s parsed and classified (10%% Xid lines)\n",
              static_cast<double>(lines.size()) * rounds / s);
}

}  // namespace
}  // namespace gpufleet::sentinel
