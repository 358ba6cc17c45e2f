#include "sim/xid_text.h"

#include <cstdio>

namespace gpufleet::sim {
namespace {

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

}  // namespace

std::string xid_message(int code, Rng& rng, int link) {
  int l = link >= 0 ? link : static_cast<int>(rng.below(18));
  switch (code) {
    case 13:
      return fmt("Graphics SM Warp Exception on (GPC %d, TPC %d, SM %d): Out Of Range Address",
                 static_cast<int>(rng.below(8)), static_cast<int>(rng.below(9)),
                 static_cast<int>(rng.below(2)));
    case 31:
      return fmt(
          "Ch %08x, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_%d faulted @ "
          "0x7f%02x_%08x. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
          static_cast<unsigned>(8 + rng.below(64)), static_cast<int>(rng.below(16)),
          static_cast<unsigned>(rng.below(256)), static_cast<unsigned>(rng.next() & 0xfffff000u));
    case 43: return fmt("Ch %08x", static_cast<unsigned>(8 + rng.below(64)));
    case 45: return fmt("Ch %08x", static_cast<unsigned>(8 + rng.below(64)));
    case 48:
      return fmt(
          "An uncorrectable double bit error (DBE) has been detected on GPU in the "
          "framebuffer at physAddr 0x%llx.",
          static_cast<unsigned long long>((rng.next() & 0xfffffff) << 12));
    case 62:
      return fmt("Internal micro-controller halt (ucode 0x%02x, PC 0x%08x)",
                 static_cast<unsigned>(rng.below(256)), static_cast<unsigned>(rng.next() & 0xffff));
    case 63:
      return fmt(
          "Row Remapper: New row (0x%016llx) was marked for remapping, reset gpu to "
          "activate.",
          static_cast<unsigned long long>(rng.next() & 0xffffffffff));
    case 64:
      return fmt("Row Remapper: Failed to mark row (0x%016llx) for remapping.",
                 static_cast<unsigned long long>(rng.next() & 0xffffffffff));
    case 74:
      return fmt("NVLink: fatal error detected on link %d(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
                 l);
    case 79: return "GPU has fallen off the bus.";
    case 92: return "High single-bit ECC error rate";
    case 94: return "Contained: SM (0x1). RST: No, D-RST: No";
    case 95: return "Uncontained: FBHUB. RST: Yes, D-RST: No";
    case 109:
      return fmt("Ch %08x, errorString CTX SWITCH TIMEOUT, Info 0x%x",
                 static_cast<unsigned>(8 + rng.below(64)),
                 static_cast<unsigned>(rng.below(0x40000)));
    case 119:
      return "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
             "(GSP_RM_CONTROL) (0x20801348 0x4).";
    case 120: return "GSP task exception: task 1 raised error code 0x5 for reason 0x0";
    case 140:
      return fmt(
          "An uncorrectable ECC error detected (possible firmware handling failure) "
          "DRAM:-%u, LTC:0, MMU:0, PCIE:0",
          static_cast<unsigned>(rng.below(2000000000)));
    case 143: return "GPU Initialization Failure";
    case 144: return fmt("NVLink: SAW MVB error on link %d", l);
    case 145: return fmt("NVLink: RLW error on link %d", l);
    case 146: return fmt("NVLink: TLW error on link %d", l);
    case 147: return fmt("NVLink: TREX error on link %d", l);
    case 148: return fmt("NVLink: NVLPW_CTRL error on link %d", l);
    case 149: return fmt("NVLink: NETIR error on link %d", l);
    case 150: return fmt("NVLink: MSE error on link %d", l);
    default: return fmt("Xid %d reported", code);
  }
}

std::string xid_line(std::string_view pci, int code, std::optional<int> pid,
                     std::string_view process, std::string_view message) {
  std::string out = "NVRM: Xid (PCI:";
  out.append(pci).append("): ").append(std::to_string(code));
  if (code != 154) {
    if (pid) {
      out.append(", pid=").append(std::to_string(*pid)).append(", name=").append(process);
    } else {
      out.append(", pid='<unknown>', name=<unknown>");
    }
  }
  out.append(", ").append(message);
  return out;
}

std::string xid154_message(RecoveryAction from, RecoveryAction to) {
  return fmt("GPU recovery action changed from 0x%x (%s) to 0x%x (%s)", static_cast<int>(from),
             std::string(recovery_action_name(from)).c_str(), static_cast<int>(to),
             std::string(recovery_action_name(to)).c_str());
}

bool sxid_is_fatal(int code) noexcept {
  // NVSwitch SXids in the 1xxxx/2xxxx ranges are mostly non-fatal link errors; the
  // ones below are documented as fatal (data path or ingress/egress ECC).
  switch (code) {
    case 11004:
    case 11012:
    case 11021:
    case 12028:
    case 14017:
    case 15008:
    case 19084:
    case 20034:
    case 22013:
    case 24007:
    case 24008: return true;
    default: return false;
  }
}

std::string sxid_line(int nvswitch, std::string_view pci, int code, int link,
                      std::string_view text) {
  std::string out = "nvidia-nvswitch" + std::to_string(nvswitch) + ": SXid (PCI:";
  out.append(pci).append("): ").append(std::to_string(code)).append(", ");
  if (!text.empty()) return out.append(text);
  bool fatal = sxid_is_fatal(code);
  out.append(fatal ? "Fatal, " : "Non-fatal, ");
  char buf[64];
  std::snprintf(buf, sizeof buf, "Link %02d ", link);
  out.append(buf);
  switch (code) {
    case 20009: out.append("RX Short Error Rate"); break;
    case 12028: out.append("egress non-posted PRIV error"); break;
    case 24007: out.append("sourcetrack timeout error"); break;
    case 11004: out.append("ingress invalid ACL"); break;
    case 19084: out.append("LTSSM Fault Up"); break;
    default: out.append(fatal ? "fatal error" : "non-fatal error"); break;
  }
  return out;
}

}  // namespace gpufleet::sim
