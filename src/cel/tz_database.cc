#include "cel/tz_database.h"

#include "cel/time_util.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gpufleet::cel {
namespace {

constexpr const char* kZoneDir = "/usr/share/zoneinfo/";

// A POSIX TZ rule ("EST5EDT,M3.2.0,M11.1.0"), from the footer of version 2+ TZif files:
// it gives the offsets after the last listed transition (all of them in "slim" files).
struct PosixRule {
  struct Date {
    char kind = 'M';  // 'M' month.week.day, 'J' Julian day 1..365 (no Feb 29), 'N' day 0..365
    int month = 0, week = 0, day = 0;
  };
  std::int32_t std_offset = 0;  // seconds east of UTC
  bool has_dst = false;
  std::int32_t dst_offset = 0;
  Date start, end;
  std::int32_t start_time = 7200, end_time = 7200;  // local time of day, may exceed 24h
};

struct Zone {
  std::vector<std::int64_t> transitions;  // ascending unix seconds
  std::vector<std::int32_t> offsets;      // offset in force from transitions[i]
  std::int32_t initial_offset = 0;        // before the first transition
  std::optional<PosixRule> rule;          // after the last transition
};

class PosixParser {
 public:
  explicit PosixParser(std::string_view s) : s_(s) {}

  std::optional<PosixRule> parse() {
    PosixRule r;
    if (!name()) return std::nullopt;
    auto off = offset();
    if (!off) return std::nullopt;
    r.std_offset = -*off;  // POSIX offsets count west of UTC
    if (at_end()) return r;
    if (!name()) return std::nullopt;
    r.has_dst = true;
    r.dst_offset = r.std_offset + 3600;
    if (!at_end() && peek() != ',') {
      auto d = offset();
      if (!d) return std::nullopt;
      r.dst_offset = -*d;
    }
    if (at_end()) return std::nullopt;  // DST without a rule: not supported
    if (!eat(',') || !date(&r.start)) return std::nullopt;
    if (eat('/')) {
      auto t = offset();
      if (!t) return std::nullopt;
      r.start_time = *t;
    }
    if (!eat(',') || !date(&r.end)) return std::nullopt;
    if (eat('/')) {
      auto t = offset();
      if (!t) return std::nullopt;
      r.end_time = *t;
    }
    if (!at_end()) return std::nullopt;
    return r;
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }
  bool eat(char c) {
    if (!at_end() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool name() {
    if (eat('<')) {
      std::size_t close = s_.find('>', i_);
      if (close == std::string_view::npos) return false;
      i_ = close + 1;
      return true;
    }
    std::size_t start = i_;
    while (!at_end() && std::isalpha(static_cast<unsigned char>(peek()))) ++i_;
    return i_ - start >= 3;
  }
  std::optional<int> number() {
    std::size_t start = i_;
    int v = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek())) && i_ - start < 6) {
      v = v * 10 + (peek() - '0');
      ++i_;
    }
    if (i_ == start) return std::nullopt;
    return v;
  }
  // [+-]hh[:mm[:ss]] in seconds.
  std::optional<std::int32_t> offset() {
    int sign = 1;
    if (eat('-'))
      sign = -1;
    else
      eat('+');
    auto h = number();
    if (!h || *h > 167) return std::nullopt;
    int total = *h * 3600;
    if (eat(':')) {
      auto m = number();
      if (!m || *m > 59) return std::nullopt;
      total += *m * 60;
      if (eat(':')) {
        auto sec = number();
        if (!sec || *sec > 59) return std::nullopt;
        total += *sec;
      }
    }
    return sign * total;
  }
  bool date(PosixRule::Date* d) {
    if (eat('M')) {
      auto m = number();
      if (!m || !eat('.')) return false;
      auto w = number();
      if (!w || !eat('.')) return false;
      auto day = number();
      if (!day || *m < 1 || *m > 12 || *w < 1 || *w > 5 || *day > 6) return false;
      *d = {'M', *m, *w, *day};
      return true;
    }
    char kind = eat('J') ? 'J' : 'N';
    auto n = number();
    if (!n || *n > 365) return false;
    *d = {kind, 0, 0, *n};
    return true;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

bool is_leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Unix day number of a rule date in `year`.
std::int64_t rule_day(const PosixRule::Date& d, std::int64_t year) {
  std::int64_t jan1 = days_from_civil(year, 1, 1);
  if (d.kind == 'J') {
    std::int64_t n = d.day - 1;  // 0-based, February 29 never counted
    if (is_leap(year) && d.day >= 60) ++n;
    return jan1 + n;
  }
  if (d.kind == 'N') return jan1 + d.day;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int month_days = kDays[d.month - 1] + (d.month == 2 && is_leap(year) ? 1 : 0);
  std::int64_t first = days_from_civil(year, static_cast<unsigned>(d.month), 1);
  int first_wday = static_cast<int>(((first % 7) + 11) % 7);  // 0 = Sunday
  int day = 1 + (d.day - first_wday + 7) % 7 + 7 * (d.week - 1);
  while (day > month_days) day -= 7;
  return first + day - 1;
}

std::int32_t rule_offset(const PosixRule& r, std::int64_t t) {
  if (!r.has_dst) return r.std_offset;
  std::int64_t year = civil_from_seconds(t + r.std_offset).year;
  std::int64_t start = rule_day(r.start, year) * 86400 + r.start_time - r.std_offset;
  std::int64_t end = rule_day(r.end, year) * 86400 + r.end_time - r.dst_offset;
  bool dst = start < end ? (t >= start && t < end) : !(t >= end && t < start);
  return dst ? r.dst_offset : r.std_offset;
}

std::uint64_t read_be(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// Parses a TZif file (RFC 8536), preferring the 64-bit (version 2+) data block. Times after
// the last transition keep the last offset; the fat files Debian ships list transitions
// through 2037.
std::unique_ptr<Zone> parse_tzif(const std::string& data) {
  auto bytes = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t size = data.size();
  auto header = [&](std::size_t at, std::uint32_t counts[6]) {
    if (at + 44 > size || data.compare(at, 4, "TZif") != 0) return false;
    for (int i = 0; i < 6; ++i) {
      counts[i] = static_cast<std::uint32_t>(read_be(bytes + at + 20 + 4 * i, 4));
    }
    return true;
  };
  std::uint32_t c[6];  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  if (!header(0, c)) return nullptr;
  int time_size = 4;
  std::size_t at = 44;
  if (data[4] >= '2') {
    std::size_t v1 =
        std::size_t{c[3]} * 5 + std::size_t{c[4]} * 6 + c[5] + std::size_t{c[2]} * 8 + c[1] + c[0];
    at = 44 + v1;
    if (!header(at, c)) return nullptr;
    at += 44;
    time_size = 8;
  }
  std::uint32_t timecnt = c[3], typecnt = c[4];
  std::size_t need = std::size_t{timecnt} * (time_size + 1) + std::size_t{typecnt} * 6;
  if (typecnt == 0 || at + need > size) return nullptr;
  const unsigned char* times = bytes + at;
  const unsigned char* idx = times + std::size_t{timecnt} * time_size;
  const unsigned char* types = idx + timecnt;
  auto type_offset = [&](std::size_t t) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(read_be(types + 6 * t, 4)));
  };
  auto zone = std::make_unique<Zone>();
  // Before the first transition: the first non-DST type (RFC 8536 section 3.2), else type 0.
  zone->initial_offset = type_offset(0);
  for (std::uint32_t t = 0; t < typecnt; ++t) {
    if (types[6 * t + 4] == 0) {
      zone->initial_offset = type_offset(t);
      break;
    }
  }
  for (std::uint32_t i = 0; i < timecnt; ++i) {
    std::uint64_t raw = read_be(times + std::size_t{i} * time_size, time_size);
    std::int64_t when = time_size == 8 ? static_cast<std::int64_t>(raw)
                                       : static_cast<std::int32_t>(static_cast<std::uint32_t>(raw));
    std::size_t type = idx[i];
    if (type >= typecnt) return nullptr;
    zone->transitions.push_back(when);
    zone->offsets.push_back(type_offset(type));
  }
  if (time_size == 8 && size > 0 && data.back() == '\n') {
    std::size_t open = data.rfind('\n', size - 2);
    if (open != std::string::npos && open + 1 < size - 1) {
      zone->rule = PosixParser(std::string_view(data).substr(open + 1, size - open - 2)).parse();
    }
  }
  return zone;
}

bool safe_zone_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '/') return false;
  if (name.find("..") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '/' || ch == '_' || ch == '-' ||
           ch == '+';
  });
}

// Reads a regular file of plausible TZif size; false for directories ("Asia"), missing
// files and read errors (which must not escape as exceptions).
bool read_zone_file(const std::string& path, std::string* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0 || size > (1u << 20)) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->resize(static_cast<std::size_t>(size));
  in.read(out->data(), static_cast<std::streamsize>(size));
  return in.gcount() == static_cast<std::streamsize>(size);
}

// Zones are cached for the life of the process. Names come from expressions and data, so
// misses are cached only up to a bound: a stream of distinct bad names cannot grow memory.
const Zone* load_zone(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Zone>, std::less<>> cache;
  static std::size_t misses = 0;
  constexpr std::size_t kMaxCachedMisses = 256;
  if (!safe_zone_name(name)) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Zone> zone;
  std::string data;
  if (read_zone_file(std::string(kZoneDir) + std::string(name), &data)) zone = parse_tzif(data);
  const Zone* result = zone.get();
  if (result == nullptr && ++misses > kMaxCachedMisses) return nullptr;
  cache.emplace(std::string(name), std::move(zone));
  return result;
}

}  // namespace

std::optional<std::int64_t> iana_zone_offset(std::string_view name, std::int64_t unix_seconds) {
  const Zone* zone = load_zone(name);
  if (zone == nullptr) return std::nullopt;
  auto it = std::upper_bound(zone->transitions.begin(), zone->transitions.end(), unix_seconds);
  if (it == zone->transitions.begin()) return zone->initial_offset;
  if (it == zone->transitions.end() && zone->rule) return rule_offset(*zone->rule, unix_seconds);
  return zone->offsets[static_cast<std::size_t>(it - zone->transitions.begin()) - 1];
}

}  // namespace gpufleet::cel
