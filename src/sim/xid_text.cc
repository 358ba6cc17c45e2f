#include "sim/xid_text.h"

#include <cstdio>

#include "core/xid_catalog.h"

namespace gpufleet::sim {
namespace {

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

}  // namespace

std::string xid_message(int code, Rng& rng, int link) {
  const int l = link >= 0 ? link : static_cast<int>(rng.below(18));
  const core::XidInfo* x = core::XidCatalog::builtin().find(code);
  if (x == nullptr) return fmt("Xid %d reported", code);
  // Details the driver prints, drawn in the order they appear in the message.
  return core::fill_xid_message(x->message, [&](std::string_view name) -> std::string {
    if (name == "gpc") return std::to_string(rng.below(8));
    if (name == "tpc") return std::to_string(rng.below(9));
    if (name == "sm") return std::to_string(rng.below(2));
    if (name == "client") return std::to_string(rng.below(16));
    if (name == "link") return std::to_string(l);
    if (name == "channel") return fmt("%08x", static_cast<unsigned>(8 + rng.below(64)));
    if (name == "va") {
      const auto high = static_cast<unsigned>(rng.below(256));
      return fmt("0x7f%02x_%08x", high, static_cast<unsigned>(rng.next() & 0xfffff000u));
    }
    if (name == "physaddr") {
      return fmt("0x%llx", static_cast<unsigned long long>((rng.next() & 0xfffffff) << 12));
    }
    if (name == "ucode") return fmt("0x%02x", static_cast<unsigned>(rng.below(256)));
    if (name == "pc") return fmt("0x%08x", static_cast<unsigned>(rng.next() & 0xffff));
    if (name == "row") {
      return fmt("0x%016llx", static_cast<unsigned long long>(rng.next() & 0xffffffffff));
    }
    if (name == "info") return fmt("0x%x", static_cast<unsigned>(rng.below(0x40000)));
    if (name == "dram") return std::to_string(rng.below(2000000000));
    return "?";  // from/to belong to Xid 154 (xid154_message)
  });
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
  const core::XidInfo* x = core::XidCatalog::builtin().find(154);
  auto action = [](RecoveryAction a) {
    return fmt("0x%x (%s)", static_cast<int>(a), std::string(recovery_action_name(a)).c_str());
  };
  return core::fill_xid_message(
      x->message, [&](std::string_view name) { return action(name == "from" ? from : to); });
}

bool sxid_is_fatal(int code) noexcept {
  const core::SXidInfo* s = core::XidCatalog::builtin().find_sxid(code);
  return s != nullptr && s->fatal;
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
  const core::SXidInfo* s = core::XidCatalog::builtin().find_sxid(code);
  out.append(s != nullptr ? s->text : fatal ? "fatal error" : "non-fatal error");
  return out;
}

}  // namespace gpufleet::sim
