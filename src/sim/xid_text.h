// Kernel log lines as the NVIDIA driver prints them, with the texts of the Xid catalog
// (data/xid/catalog.yaml, core/xid_catalog.h); formats in ../shared/reference/gpu-signals.md:
//   NVRM: Xid (PCI:0000:b3:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
//   NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (...)
//   nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX Short Error Rate
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sim/fault.h"
#include "sim/rng.h"

namespace gpufleet::sim {

// The driver's message for an Xid code, with details (GPC/TPC, addresses, link numbers)
// drawn from `rng`; `link` >= 0 fixes the NVLink number of Xid 74 and 144-150.
std::string xid_message(int code, Rng& rng, int link = -1);

// A full NVRM Xid line. `pci` is "0000:b3:00"; no pid gives pid='<unknown>', name=<unknown>.
// Xid 154 takes neither pid nor name (as the driver prints it).
std::string xid_line(std::string_view pci, int code, std::optional<int> pid,
                     std::string_view process, std::string_view message);

std::string xid154_message(RecoveryAction from, RecoveryAction to);

// Whether an SXid code is fatal (takes the switch's links out until a reset); from the catalog.
bool sxid_is_fatal(int code) noexcept;
std::string sxid_line(int nvswitch, std::string_view pci, int code, int link,
                      std::string_view text);

}  // namespace gpufleet::sim
