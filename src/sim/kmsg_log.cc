#include "sim/kmsg_log.h"

#include <charconv>
#include <cstdio>

namespace gpufleet::sim {

void KmsgLog::append(int prio, std::uint64_t usec, std::string_view text) {
  KmsgRecord r;
  r.prio = prio;
  r.seq = next_seq_++;
  r.usec = usec;
  r.text.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      r.text += esc;
    } else {
      r.text.push_back(c);
    }
  }
  records_.push_back(std::move(r));
  while (records_.size() > capacity_) records_.pop_front();
}

void KmsgLog::reset() {
  records_.clear();
  next_seq_ = 0;
}

std::string KmsgLog::render() const {
  std::string out;
  out.reserve(records_.size() * 96);
  for (const auto& r : records_) {
    out += std::to_string(r.prio);
    out.push_back(',');
    out += std::to_string(r.seq);
    out.push_back(',');
    out += std::to_string(r.usec);
    out += ",-;";
    out += r.text;
    out.push_back('\n');
  }
  return out;
}

bool parse_kmsg_line(std::string_view line, KmsgRecord& out) {
  auto semi = line.find(';');
  if (semi == std::string_view::npos) return false;
  std::string_view head = line.substr(0, semi);
  std::uint64_t fields[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    auto comma = head.find(',');
    if (comma == std::string_view::npos) return false;
    std::string_view f = head.substr(0, comma);
    auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), fields[i]);
    if (ec != std::errc() || p != f.data() + f.size() || f.empty()) return false;
    head.remove_prefix(comma + 1);
  }
  // `head` now holds the flags and optional further fields.
  out.prio = static_cast<int>(fields[0]);
  out.seq = fields[1];
  out.usec = fields[2];
  std::string_view text = line.substr(semi + 1);
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  out.text = std::string(text);
  return true;
}

}  // namespace gpufleet::sim
