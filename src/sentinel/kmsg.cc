#include "sentinel/kmsg.h"
#include "core/text.h"

#include <cctype>
#include <charconv>

namespace gpufleet::sentinel {
namespace {

bool parse_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool all_hex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (hex_digit(c) < 0) return false;
  }
  return true;
}

using core::trim;

// The kernel escapes non-printable bytes (and the newline) as \xNN.
std::string unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x' && hex_digit(s[i + 2]) >= 0 &&
        hex_digit(s[i + 3]) >= 0) {
      out.push_back(static_cast<char>(hex_digit(s[i + 2]) * 16 + hex_digit(s[i + 3])));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Skips a "[  123.456789] " timestamp prefix (journal/dmesg renderings carry one).
std::string_view skip_timestamp(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close != std::string_view::npos && close < 24) s = trim(s.substr(close + 1));
  }
  return s;
}

// Parses "<code>[, pid=<pid>][, name=<proc>][, <text>]" after the "): ".
bool parse_code_fields(std::string_view rest, KernelEvent& ev) {
  std::size_t i = 0;
  while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
  if (i == 0 || i > 6) return false;
  std::uint64_t code = 0;
  if (!parse_u64(rest.substr(0, i), code)) return false;
  ev.code = static_cast<int>(code);
  rest.remove_prefix(i);
  rest = trim(rest);
  if (rest.empty()) return true;
  if (rest.front() != ',') return false;
  rest = trim(rest.substr(1));
  if (rest.starts_with("pid=")) {
    auto comma = rest.find(',');
    std::string_view pid = rest.substr(4, comma == std::string_view::npos ? rest.npos : comma - 4);
    pid = trim(pid);
    std::uint64_t p = 0;
    if (parse_u64(pid, p) && p < (1u << 31)) ev.pid = static_cast<int>(p);
    rest = comma == std::string_view::npos ? std::string_view{} : trim(rest.substr(comma + 1));
  }
  if (rest.starts_with("name=")) {
    auto comma = rest.find(", ");
    std::string_view name = rest.substr(5, comma == std::string_view::npos ? rest.npos : comma - 5);
    name = trim(name);
    if (name != "<unknown>") ev.process = std::string(name);
    rest = comma == std::string_view::npos ? std::string_view{} : trim(rest.substr(comma + 1));
  }
  ev.text = std::string(rest);
  return true;
}

// "(PCI:0000:b3:00): " or "(0000:b3:00): " -> the address; advances `s` past "): ".
bool take_paren_address(std::string_view& s, std::string& pci) {
  s = trim(s);
  if (s.empty() || s.front() != '(') return false;
  auto close = s.find(')');
  if (close == std::string_view::npos) return false;
  std::string_view addr = s.substr(1, close - 1);
  if (addr.starts_with("PCI:")) addr.remove_prefix(4);
  pci = normalise_pci(addr);
  if (pci.empty()) return false;
  s.remove_prefix(close + 1);
  s = trim(s);
  if (s.empty() || s.front() != ':') return false;
  s = trim(s.substr(1));
  return true;
}

}  // namespace

std::string_view kind_name(KernelEventKind k) noexcept {
  switch (k) {
    case KernelEventKind::Xid: return "Xid";
    case KernelEventKind::SXid: return "SXid";
    case KernelEventKind::FellOffBus: return "FellOffBus";
  }
  return "?";
}

std::string normalise_pci(std::string_view a) {
  a = trim(a);
  // Drop the function (".0").
  if (auto dot = a.rfind('.'); dot != std::string_view::npos) {
    if (!all_hex(a.substr(dot + 1))) return "";
    a = a.substr(0, dot);
  }
  std::string_view parts[3];
  int n = 0;
  while (n < 3) {
    auto colon = a.find(':');
    parts[n++] = a.substr(0, colon);
    if (colon == std::string_view::npos) break;
    a.remove_prefix(colon + 1);
    if (n == 3) return "";  // more than three fields
  }
  std::string_view domain = "0000";
  std::string_view bus;
  std::string_view dev;
  if (n == 3) {
    domain = parts[0];
    bus = parts[1];
    dev = parts[2];
  } else if (n == 2) {
    bus = parts[0];
    dev = parts[1];
  } else {
    return "";
  }
  if (!all_hex(domain) || domain.size() > 8 || !all_hex(bus) || bus.size() > 2 || !all_hex(dev) ||
      dev.size() > 2) {
    return "";
  }
  // nvidia-smi prints an 8-digit domain; the kernel 4. The upper digits are zero in practice.
  if (domain.size() > 4) domain = domain.substr(domain.size() - 4);
  std::string out;
  out.append(4 - domain.size(), '0').append(domain).push_back(':');
  out.append(2 - bus.size(), '0').append(bus).push_back(':');
  out.append(2 - dev.size(), '0').append(dev);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<KmsgRecord> parse_kmsg_record(std::string_view line) {
  if (line.size() > kMaxKmsgLine) return std::nullopt;
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  auto semi = line.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  std::string_view head = line.substr(0, semi);
  std::string_view fields[4];
  int n = 0;
  while (n < 4) {
    auto comma = head.find(',');
    fields[n++] = head.substr(0, comma);
    if (comma == std::string_view::npos) break;
    head.remove_prefix(comma + 1);
  }
  // Newer kernels may append fields after flags (e.g. caller id): ignored.
  if (n < 4) return std::nullopt;
  std::uint64_t pri = 0;
  KmsgRecord r;
  if (!parse_u64(fields[0], pri) || pri > 1023 || !parse_u64(fields[1], r.seq) ||
      !parse_u64(fields[2], r.usec) || fields[3].empty()) {
    return std::nullopt;
  }
  r.prio = static_cast<int>(pri & 7);
  r.facility = static_cast<int>(pri >> 3);
  r.text = unescape(line.substr(semi + 1));
  return r;
}

std::optional<KernelEvent> parse_kernel_event(std::string_view text) {
  std::string_view s = skip_timestamp(text);
  KernelEvent ev;
  if (auto at = s.find("NVRM: Xid "); at != std::string_view::npos) {
    std::string_view rest = s.substr(at + 10);
    if (!take_paren_address(rest, ev.pci) || !parse_code_fields(rest, ev)) return std::nullopt;
    ev.kind = KernelEventKind::Xid;
    if (ev.code == 154) {
      // "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
      std::string_view t = ev.text;
      auto to = t.rfind(" to ");
      if (to != std::string_view::npos) {
        std::string_view a = t.substr(to + 4);
        auto open = a.find('(');
        auto close = a.rfind(')');
        if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
          ev.recovery_action = std::string(trim(a.substr(open + 1, close - open - 1)));
        }
      }
    }
    return ev;
  }
  if (s.starts_with("nvidia-nvswitch")) {
    auto at = s.find(": SXid ");
    if (at == std::string_view::npos) return std::nullopt;
    std::uint64_t sw = 0;
    if (!parse_u64(s.substr(15, at - 15), sw) || sw > 1024) return std::nullopt;
    std::string_view rest = s.substr(at + 7);
    if (!take_paren_address(rest, ev.pci) || !parse_code_fields(rest, ev)) return std::nullopt;
    ev.kind = KernelEventKind::SXid;
    ev.nvswitch = static_cast<int>(sw);
    ev.sxid_fatal = ev.text.starts_with("Fatal");
    return ev;
  }
  if (s.find("fallen off the bus") != std::string_view::npos && s.find("NVRM") == 0) {
    // "NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus." or "NVRM: GPU at PCI:0000:b3:00: ..."
    auto gpu = s.find("GPU ");
    if (gpu == std::string_view::npos) return std::nullopt;
    std::string_view a = s.substr(gpu + 4);
    if (a.starts_with("at ")) a.remove_prefix(3);
    if (a.starts_with("PCI:")) a.remove_prefix(4);
    auto end = a.find(": ");
    if (end == std::string_view::npos) return std::nullopt;
    ev.pci = normalise_pci(a.substr(0, end));
    if (ev.pci.empty()) return std::nullopt;
    ev.kind = KernelEventKind::FellOffBus;
    ev.code = 79;
    ev.text = std::string(trim(a.substr(end + 2)));
    return ev;
  }
  return std::nullopt;
}

}  // namespace gpufleet::sentinel
