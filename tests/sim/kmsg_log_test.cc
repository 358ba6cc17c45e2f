#include "sim/kmsg_log.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/xid_text.h"

namespace gpufleet::sim {
namespace {

TEST(KmsgLog, RendersDevKmsgRecordsWithIncreasingSeq) {
  KmsgLog log(3);
  log.append(kKernWarning, 100, "first");
  log.append(kKernInfo, 200, "two\nlines");
  std::string text = log.render();
  EXPECT_EQ(text, "4,0,100,-;first\n6,1,200,-;two\\x0alines\n");
  log.append(kKernInfo, 300, "c");
  log.append(kKernInfo, 400, "d");  // ring of 3: "first" drops out, seq keeps counting
  ASSERT_EQ(log.records().size(), 3u);
  EXPECT_EQ(log.records().front().seq, 1u);
  EXPECT_EQ(log.next_seq(), 4u);
  KmsgRecord r;
  std::istringstream in(log.render());
  std::string line;
  std::uint64_t last = 0;
  bool first = true;
  while (std::getline(in, line)) {
    ASSERT_TRUE(parse_kmsg_line(line, r)) << line;
    if (!first) {
      EXPECT_EQ(r.seq, last + 1);
    }
    last = r.seq;
    first = false;
  }
  log.reset();
  log.append(kKernInfo, 1, "boot");
  EXPECT_EQ(log.records().front().seq, 0u);
  EXPECT_FALSE(parse_kmsg_line("no header", r));
  EXPECT_FALSE(parse_kmsg_line("a,b,c,-;x", r));
}

TEST(XidText, LinesMatchTheDriverFormats) {
  EXPECT_EQ(xid_line("0000:b3:00", 79, 1234, "python3", "GPU has fallen off the bus."),
            "NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, name=python3, GPU has fallen off the bus.");
  Rng rng(1);
  EXPECT_EQ(xid_line("0003:00:00", 74, std::nullopt, "", xid_message(74, rng, 14)),
            "NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal "
            "error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)");
  EXPECT_EQ(xid_line("0008:01:00", 154, std::nullopt, "",
                     xid154_message(RecoveryAction::None, RecoveryAction::GpuReset)),
            "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to "
            "0x1 (GPU Reset Required)");
  EXPECT_EQ(xid154_message(RecoveryAction::GpuReset, RecoveryAction::NodeReboot),
            "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot "
            "Required)");
  EXPECT_EQ(sxid_line(0, "0000:06:00.0", 20009, 4, ""),
            "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short "
            "Error Rate");
  EXPECT_TRUE(sxid_is_fatal(24007));
  EXPECT_FALSE(sxid_is_fatal(20009));
  Rng a(5), b(5);
  EXPECT_EQ(xid_message(13, a), xid_message(13, b));  // deterministic details
}

}  // namespace
}  // namespace gpufleet::sim
