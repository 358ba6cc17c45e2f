// A node's kernel ring buffer, rendered in the /dev/kmsg record format:
//   <prio>,<seq>,<usec>,<flags>;<text>
// seq increases by one per record and restarts at 0 on each boot (as on Linux); usec is
// microseconds since boot. The ring keeps the newest `capacity` records, so a reader that
// resumes by seq sees a gap when it fell behind, like EPIPE on the real device.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace gpufleet::sim {

// syslog levels the kernel uses (facility 0 = kern).
inline constexpr int kKernErr = 3;
inline constexpr int kKernWarning = 4;
inline constexpr int kKernNotice = 5;
inline constexpr int kKernInfo = 6;

struct KmsgRecord {
  int prio = kKernInfo;
  std::uint64_t seq = 0;
  std::uint64_t usec = 0;
  std::string text;
};

class KmsgLog {
 public:
  explicit KmsgLog(std::size_t capacity = 4096) : capacity_(capacity) {}

  // One record; a newline in `text` is stored escaped (\x0a), as the kernel does.
  void append(int prio, std::uint64_t usec, std::string_view text);
  // A new boot: empties the ring, seq restarts at 0.
  void reset();

  [[nodiscard]] std::uint64_t next_seq() const noexcept { return next_seq_; }
  [[nodiscard]] const std::deque<KmsgRecord>& records() const noexcept { return records_; }
  // The whole ring in /dev/kmsg format, one record per line.
  [[nodiscard]] std::string render() const;

 private:
  std::size_t capacity_;
  std::uint64_t next_seq_ = 0;
  std::deque<KmsgRecord> records_;
};

// Parses one /dev/kmsg line; false when it is not in that format.
bool parse_kmsg_line(std::string_view line, KmsgRecord& out);

}  // namespace gpufleet::sim
