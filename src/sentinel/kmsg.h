// Kernel-log parsing for the health sentinel: /dev/kmsg records
// (`<prio>,<seq>,<usec>,<flags>[,...];<text>`) and the GPU signals in their text — Xid and
// SXid lines in every form of docs/../shared/reference/gpu-signals.md, "fallen off the bus"
// and the driver's recovery-action changes (Xid 154, whose change to None is the outcome of
// a successful GPU reset). Pure functions: no I/O, so the monitor and the tests share them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpufleet::sentinel {

// A record longer than this is malformed (the kernel's own limit is ~1 KiB of text; a line
// this long is not a kmsg record and must not make the reader allocate without bound).
inline constexpr std::size_t kMaxKmsgLine = 8192;

struct KmsgRecord {
  int prio = 0;  // syslog level, 0..7 (the facility is dropped)
  int facility = 0;
  std::uint64_t seq = 0;
  std::uint64_t usec = 0;  // since boot
  std::string text;        // \xNN escapes decoded
};

// One /dev/kmsg record; nullopt when `line` is not one (the caller counts it as malformed).
// Continuation lines (" KEY=value" dictionary lines) are not records: nullopt as well.
std::optional<KmsgRecord> parse_kmsg_record(std::string_view line);

enum class KernelEventKind : std::uint8_t {
  Xid,        // NVRM: Xid (PCI:...): <code>, ...
  SXid,       // nvidia-nvswitchN: SXid (PCI:...): <code>, ...
  FellOffBus  // NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.
};
std::string_view kind_name(KernelEventKind k) noexcept;

struct KernelEvent {
  KernelEventKind kind = KernelEventKind::Xid;
  std::string pci;  // normalised: "0000:b3:00" (4-hex domain, lower case, no function)
  int code = 0;     // Xid/SXid code; 79 for FellOffBus
  std::optional<int> pid;
  std::string process;  // "" when '<unknown>'
  std::string text;     // the rest of the line (the driver's message)
  int nvswitch = -1;    // SXid only
  bool sxid_fatal = false;
  // Xid 154: the recovery action named after "to", e.g. "None", "GPU Reset Required".
  std::string recovery_action;
};

// Classifies the text of a kernel record (an optional "[  123.456789] " prefix is skipped).
// nullopt for every line that is no GPU signal, and for a GPU line whose fields do not parse.
std::optional<KernelEvent> parse_kernel_event(std::string_view text);

// "00000000:B3:00.0", "0000:b3:00", "b3:00.0" -> "0000:b3:00"; "" when not a PCI address.
std::string normalise_pci(std::string_view address);

}  // namespace gpufleet::sentinel
