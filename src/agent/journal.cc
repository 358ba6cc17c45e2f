#include "agent/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <system_error>

#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "core/value.h"

namespace gpufleet::agent {
namespace {

// On disk, little-endian: magic u32 | body length u32 | crc32c(body) u32 | body, where
// body = id u64 | kind length u8 | kind | payload. The magic lets a reader tell a record
// start from zero-filled space a file system may leave after a crash.
constexpr std::uint32_t kMagic = 0x314A4647;  // "GFJ1"
constexpr std::size_t kHeader = 12;
constexpr std::size_t kMaxBody = (1u << 20) + 512;
constexpr std::size_t kMaxKind = 255;

constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
    table[i] = c;
  }
  return table;
}
constexpr auto kCrcTable = make_crc_table();

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint64_t get_le(std::string_view s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path) {
  throw std::system_error(errno, std::generic_category(), what + " " + path.string());
}

void fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io("journal: cannot open directory", dir);
  // Makes a created, renamed or removed file name durable, not just its content.
  if (::fsync(fd) != 0) {
    ::close(fd);
    throw_io("journal: cannot fsync directory", dir);
  }
  ::close(fd);
}

std::string read_range(const std::filesystem::path& path, std::uint64_t offset,
                       std::uint64_t limit = UINT64_MAX) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io("journal: cannot open", path);
  std::string out;
  char buf[1 << 16];
  while (out.size() < limit) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, limit - out.size()));
    ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(offset + out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw_io("journal: cannot read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

void write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("journal: cannot write", path);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string segment_name(std::uint64_t first_id) {
  std::string digits = std::to_string(first_id);
  return "seg-" + std::string(20 - digits.size(), '0') + digits + ".log";
}

// First id from "seg-00000000000000000042.log"; 0 when the name is not a segment's.
std::uint64_t parse_segment_name(const std::string& name) {
  if (name.size() != 28 || name.rfind("seg-", 0) != 0 || name.substr(24) != ".log") return 0;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(name.data() + 4, name.data() + 24, v);
  return (ec == std::errc() && p == name.data() + 24) ? v : 0;
}

// Decodes one record at `at`; returns its encoded size, or 0 when it is incomplete/corrupt.
std::size_t decode_one(std::string_view bytes, std::size_t at, Record* out) {
  if (bytes.size() - at < kHeader) return 0;
  if (get_le(bytes, at, 4) != kMagic) return 0;
  std::size_t len = get_le(bytes, at + 4, 4);
  if (len < 9 || len > kMaxBody || bytes.size() - at - kHeader < len) return 0;
  std::string_view body = bytes.substr(at + kHeader, len);
  if (crc32c(body) != get_le(bytes, at + 8, 4)) return 0;
  std::size_t kind_len = static_cast<unsigned char>(body[8]);
  if (kind_len == 0 || 9 + kind_len > len) return 0;
  if (out != nullptr) {
    out->id = get_le(body, 0, 8);
    out->kind.assign(body.substr(9, kind_len));
    out->payload.assign(body.substr(9 + kind_len));
  }
  return kHeader + len;
}

// A JSON count: parse_json gives non-negative integers as Int or Uint.
std::uint64_t count_of(const core::Value& v) {
  if (const auto* i = v.if_int()) return *i < 0 ? 0 : static_cast<std::uint64_t>(*i);
  return v.is_uint() ? v.as_uint() : 0;
}

}  // namespace

std::uint32_t crc32c(std::string_view data, std::uint32_t crc) noexcept {
  crc = ~crc;
  for (unsigned char c : data) crc = kCrcTable[(crc ^ c) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string encode_record(std::uint64_t id, std::string_view kind, std::string_view payload) {
  if (kind.empty() || kind.size() > kMaxKind)
    throw core::InvalidInput("journal record kind '" + std::string(kind.substr(0, 64)) +
                             "' must be 1 to 255 bytes long");
  if (payload.size() > (1u << 20))
    throw core::InvalidInput("journal record of kind '" + std::string(kind) +
                             "' has a payload of " + std::to_string(payload.size()) +
                             " bytes; the limit is 1 MiB (summarise before recording)");
  std::string body;
  body.reserve(9 + kind.size() + payload.size());
  put_u64(body, id);
  body.push_back(static_cast<char>(kind.size()));
  body.append(kind);
  body.append(payload);
  std::string out;
  out.reserve(kHeader + body.size());
  put_u32(out, kMagic);
  put_u32(out, static_cast<std::uint32_t>(body.size()));
  put_u32(out, crc32c(body));
  out.append(body);
  return out;
}

std::vector<Record> decode_records(std::string_view bytes, std::size_t* valid_bytes) {
  std::vector<Record> out;
  std::size_t at = 0;
  for (;;) {
    Record r;
    std::size_t n = decode_one(bytes, at, &r);
    if (n == 0) break;
    out.push_back(std::move(r));
    at += n;
  }
  if (valid_bytes != nullptr) *valid_bytes = at;
  return out;
}

Journal::Journal(JournalOptions options) : options_(std::move(options)) {
  if (options_.dir.empty()) throw core::InvalidInput("journal: dir is empty; give a directory");
  if (options_.segment_bytes < 4096)
    throw core::InvalidInput("journal: segment_bytes " + std::to_string(options_.segment_bytes) +
                             " is below the minimum 4096");
  if (options_.max_bytes < 2 * options_.segment_bytes)
    throw core::InvalidInput("journal: max_bytes " + std::to_string(options_.max_bytes) +
                             " must be at least twice segment_bytes (" +
                             std::to_string(options_.segment_bytes) +
                             ") so compaction keeps a closed segment besides the active one");
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) throw std::system_error(ec, "journal: cannot create " + options_.dir.string());
  load();
  open_active();
}

Journal::~Journal() {
  if (active_fd_ >= 0) ::close(active_fd_);
}

void Journal::load() {
  // The cursor: how far delivery got. Missing or unreadable means 0: everything is
  // redelivered, which at-least-once allows and idempotent apply makes harmless.
  const auto cursor = options_.dir / "cursor";
  if (std::filesystem::exists(cursor)) {
    std::string text = read_range(cursor, 0);
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && p != text.data()) acked_id_ = v;
  }
  for (const auto& entry : std::filesystem::directory_iterator(options_.dir)) {
    std::uint64_t first = parse_segment_name(entry.path().filename().string());
    if (first == 0) continue;
    segments_.push_back(Segment{first, 0, 0, entry.path()});
  }
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.first_id < b.first_id; });
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    Segment& seg = segments_[i];
    std::string bytes = read_range(seg.path, 0);
    std::size_t valid = 0;
    auto records = decode_records(bytes, &valid);
    seg.bytes = valid;
    seg.last_id = records.empty() ? 0 : records.back().id;
    if (valid == bytes.size()) continue;
    if (i + 1 == segments_.size()) {
      // The tail of the active segment was being written when the process or the node
      // died: cut it so the next append starts on a record boundary.
      counters_.torn_bytes += bytes.size() - valid;
      if (::truncate(seg.path.c_str(), static_cast<off_t>(valid)) != 0)
        throw_io("journal: cannot truncate torn tail of", seg.path);
      core::log::warn("journal: cut a torn tail",
                      {{"segment", seg.path.string()}, {"bytes", bytes.size() - valid}});
    } else {
      // A closed segment was fsync'd whole; a bad record there is media corruption. Keep the
      // good prefix, say so, never guess past it.
      ++counters_.corrupt_segments;
      core::log::error(
          "journal: corrupt record in a closed segment; later records in it are skipped",
          {{"segment", seg.path.string()}, {"offset", valid}});
    }
  }
  next_id_ = acked_id_ + 1;
  for (const auto& seg : segments_) {
    next_id_ = std::max(next_id_, seg.first_id);
    if (seg.last_id != 0) next_id_ = std::max(next_id_, seg.last_id + 1);
  }
}

void Journal::open_active() {
  if (segments_.empty()) {
    segments_.push_back(Segment{next_id_, 0, 0, options_.dir / segment_name(next_id_)});
  }
  const auto& path = segments_.back().path;
  active_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (active_fd_ < 0) throw_io("journal: cannot open segment", path);
  if (options_.fsync) fsync_dir(options_.dir);
}

void Journal::roll_if_full() {
  if (segments_.back().bytes < options_.segment_bytes) return;
  if (options_.fsync && ::fsync(active_fd_) != 0)
    throw_io("journal: cannot fsync", segments_.back().path);
  ::close(active_fd_);
  active_fd_ = -1;
  segments_.push_back(Segment{next_id_, 0, 0, options_.dir / segment_name(next_id_)});
  open_active();
}

std::uint64_t Journal::write_encoded(const std::string& encoded, std::uint64_t last_id) {
  roll_if_full();
  Segment& seg = segments_.back();
  try {
    write_all(active_fd_, encoded, seg.path);
    // fdatasync: the data and the file size, which is all a reader needs.
    if (options_.fsync && ::fdatasync(active_fd_) != 0) throw_io("journal: cannot fsync", seg.path);
  } catch (...) {
    // A failed write may have left a partial record; cut it so the file stays well formed.
    if (::ftruncate(active_fd_, static_cast<off_t>(seg.bytes)) != 0) {
      core::log::error("journal: cannot cut a failed write", {{"segment", seg.path.string()}});
    }
    throw;
  }
  seg.bytes += encoded.size();
  seg.last_id = last_id;
  next_id_ = last_id + 1;
  compact();
  return last_id;
}

std::uint64_t Journal::append(std::string_view kind, std::string_view payload) {
  return write_encoded(encode_record(next_id_, kind, payload), next_id_);
}

std::uint64_t Journal::append_batch(std::span<const NewRecord> records) {
  if (records.empty()) return next_id_ - 1;
  std::string encoded;
  std::uint64_t id = next_id_;
  for (const auto& r : records) encoded += encode_record(id++, r.kind, r.payload);
  return write_encoded(encoded, id - 1);
}

void Journal::compact() {
  std::uint64_t total = 0;
  for (const auto& s : segments_) total += s.bytes;
  if (total <= options_.max_bytes) return;
  std::map<std::string, std::uint64_t, std::less<>> counts;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::uint64_t summarised = 0;
  // Oldest first, never the active segment.
  while (total > options_.max_bytes && segments_.size() > 1) {
    Segment seg = segments_.front();
    if (seg.last_id > acked_id_) {
      for (auto& r : decode_records(read_range(seg.path, 0), nullptr)) {
        if (r.id <= acked_id_) continue;
        if (first == 0) first = r.id;
        last = r.id;
        if (r.kind == kCompactedKind) {
          // A summary being compacted: fold its counts in, so nothing is counted twice or lost.
          try {
            auto v = core::parse_json(r.payload);
            if (const auto* c = v.find("counts"); c != nullptr && c->is_map()) {
              for (const auto& [k, n] : c->as_map()) counts[k] += count_of(n);
            }
            if (const auto* f = v.find("firstId"); f != nullptr && f->is_number())
              first = std::min(first, count_of(*f));
          } catch (const std::exception&) {
            counts[std::string(kCompactedKind)] += 1;
          }
        } else {
          counts[r.kind] += 1;
          ++summarised;
        }
      }
    }
    total -= seg.bytes;
    if (::unlink(seg.path.c_str()) != 0 && errno != ENOENT)
      throw_io("journal: cannot remove", seg.path);
    segments_.erase(segments_.begin());
  }
  if (segments_.front().first_id > read_first_) {
    read_first_ = segments_.front().first_id;
    read_off_ = 0;
  }
  if (options_.fsync) fsync_dir(options_.dir);
  if (counts.empty()) return;
  counters_.compacted += summarised;
  core::Value summary = core::Value::map();
  summary["firstId"] = first;
  summary["lastId"] = last;
  core::Value& c = summary["counts"];
  c = core::Value::map();
  for (const auto& [k, n] : counts) c[k] = n;
  core::log::warn("journal: over its byte bound; undelivered records summarised",
                  {{"dir", options_.dir.string()}, {"records", summarised}});
  // Appended, not inserted: ids stay monotonic, and the summary is delivered in order after
  // the records that survived.
  Segment& active = segments_.back();
  std::string encoded = encode_record(next_id_, kCompactedKind, core::to_json(summary));
  write_all(active_fd_, encoded, active.path);
  if (options_.fsync && ::fdatasync(active_fd_) != 0)
    throw_io("journal: cannot fsync", active.path);
  active.bytes += encoded.size();
  active.last_id = next_id_;
  ++next_id_;
}

std::vector<Record> Journal::pending(std::size_t max) const {
  // Reads from the remembered position (every record before it is acked) in bounded chunks,
  // so draining a backlog costs the bytes delivered, not the segment's size per batch.
  std::vector<Record> out;
  returned_.clear();
  for (const auto& seg : segments_) {
    if (out.size() >= max) break;
    if (seg.last_id <= acked_id_ || seg.first_id < read_first_) continue;
    std::uint64_t off = seg.first_id == read_first_ ? read_off_ : 0;
    std::uint64_t chunk = 256 << 10;
    while (off < seg.bytes && out.size() < max) {
      std::string bytes = read_range(seg.path, off, std::min(chunk, seg.bytes - off));
      std::size_t at = 0;
      for (;;) {
        Record r;
        std::size_t n = decode_one(bytes, at, &r);
        if (n == 0) break;
        at += n;
        if (r.id <= acked_id_) continue;
        returned_.push_back({r.id, seg.first_id, off + at});
        out.push_back(std::move(r));
        if (out.size() >= max) break;
      }
      if (at == 0) {
        // A record larger than the chunk: read more, up to the largest record there can be.
        if (chunk >= kHeader + kMaxBody)
          break;  // cannot happen below seg.bytes (validated at open)
        chunk = kHeader + kMaxBody;
        continue;
      }
      off += at;
    }
  }
  return out;
}

void Journal::ack(std::uint64_t id) {
  if (id <= acked_id_) return;
  acked_id_ = std::min(id, next_id_ - 1);
  for (const auto& p : returned_) {
    if (p.id == acked_id_) {
      read_first_ = p.segment;
      read_off_ = p.end;
    }
  }
  write_cursor();
}

void Journal::write_cursor() {
  // Written beside and renamed over: a crash leaves the old cursor or the new one, whole.
  const auto tmp = options_.dir / "cursor.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw_io("journal: cannot write", tmp);
  std::string text = std::to_string(acked_id_) + "\n";
  try {
    write_all(fd, text, tmp);
    if (options_.fsync && ::fsync(fd) != 0) throw_io("journal: cannot fsync", tmp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), (options_.dir / "cursor").c_str()) != 0)
    throw_io("journal: cannot rename cursor in", options_.dir);
  if (options_.fsync) fsync_dir(options_.dir);
}

JournalStats Journal::stats() const {
  JournalStats s = counters_;
  for (const auto& seg : segments_) s.bytes += seg.bytes;
  s.segments = segments_.size();
  s.last_id = next_id_ - 1;
  s.acked_id = acked_id_;
  return s;
}

}  // namespace gpufleet::agent
