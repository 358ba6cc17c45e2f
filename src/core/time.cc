#include "core/time.h"

#include <absl/time/time.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>

#include "core/errors.h"
#include "core/text.h"

namespace gpufleet::core {
namespace {

constexpr std::string_view kDurationForms =
    "expected a Go duration such as 300ms, 1.5s, 1h30m or -2m (units ns, us, µs, ms, s, m, h)";
constexpr std::string_view kTimestampForms =
    "expected RFC 3339 such as 2024-05-01T12:00:00Z or 2024-05-01T12:00:00.5+02:00";

constexpr std::int64_t kNanosPerSecond = 1'000'000'000;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

struct Unit {
  std::string_view name;
  std::uint64_t nanos;
};
constexpr Unit kUnits[] = {
    {"ns", 1},
    {"us", 1'000},
    {"\xC2\xB5s", 1'000},  // U+00B5 micro sign
    {"\xCE\xBCs", 1'000},  // U+03BC Greek small letter mu
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
    {"h", 3'600'000'000'000},
};

// Returns "" and sets `out`, or the reason the text is not a duration.
std::string parse_duration_impl(std::string_view text, std::int64_t& out) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") {
    out = 0;
    return "";
  }
  if (s.empty()) return "it is empty";
  // Magnitudes up to 2^63 are representable (2^63 only when negative).
  constexpr std::uint64_t kLimit = std::uint64_t{1} << 63;
  unsigned __int128 total = 0;
  while (!s.empty()) {
    if (!is_digit(s[0]) && s[0] != '.') {
      return "expected a number at '" + std::string(s) + "'";
    }
    std::uint64_t whole = 0;
    bool whole_overflow = false;
    std::size_t i = 0;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      const auto digit = static_cast<std::uint64_t>(s[i] - '0');
      if (whole > kLimit / 10 || whole * 10 + digit > kLimit) whole_overflow = true;
      if (!whole_overflow) whole = whole * 10 + digit;
    }
    const bool has_whole = i > 0;
    // Up to 18 fraction digits count; later ones are below a nanosecond for every unit.
    std::uint64_t fraction = 0;
    std::uint64_t scale = 1;
    bool has_fraction = false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      for (; i < s.size() && is_digit(s[i]); ++i) {
        has_fraction = true;
        if (scale < 1'000'000'000'000'000'000ULL) {
          fraction = fraction * 10 + static_cast<std::uint64_t>(s[i] - '0');
          scale *= 10;
        }
      }
    }
    if (!has_whole && !has_fraction) return "a number has no digits";
    std::size_t unit_end = i;
    while (unit_end < s.size() && !is_digit(s[unit_end]) && s[unit_end] != '.') ++unit_end;
    const std::string_view unit_text = s.substr(i, unit_end - i);
    if (unit_text.empty()) {
      return "missing unit after '" + std::string(s.substr(0, i)) + "'";
    }
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_text) unit = &u;
    }
    if (unit == nullptr) return "unknown unit '" + std::string(unit_text) + "'";
    if (whole_overflow) return "it is out of range (at most about 2562047h)";
    total += static_cast<unsigned __int128>(whole) * unit->nanos;
    total += static_cast<unsigned __int128>(fraction) * unit->nanos / scale;
    if (total > kLimit) return "it is out of range (at most about 2562047h)";
    s.remove_prefix(unit_end);
  }
  if (!negative && total == kLimit) return "it is out of range (at most about 2562047h)";
  out = negative ? static_cast<std::int64_t>(-static_cast<__int128>(total))
                 : static_cast<std::int64_t>(total);
  return "";
}

// Appends v / 10^digits with the fraction's trailing zeros removed: (1500, 3) -> "1.5".
void append_fixed(std::string& out, std::uint64_t v, int digits) {
  std::uint64_t div = 1;
  for (int i = 0; i < digits; ++i) div *= 10;
  out += std::to_string(v / div);
  std::uint64_t frac = v % div;
  if (frac == 0) return;
  std::string f(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i) {
    f[static_cast<std::size_t>(i)] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  f.erase(f.find_last_not_of('0') + 1);
  out += '.';
  out += f;
}

std::uint64_t magnitude(std::chrono::nanoseconds d) {
  const std::int64_t n = d.count();
  return n < 0 ? static_cast<std::uint64_t>(-(n + 1)) + 1 : static_cast<std::uint64_t>(n);
}

// Reads exactly `n` digits at `pos`.
bool read_digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_digit(s[pos + i])) return false;
    v = v * 10 + (s[pos + i] - '0');
  }
  out = v;
  return true;
}

std::string parse_timestamp_impl(std::string_view s, Timestamp& out) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!read_digits(s, 0, 4, year) || s.size() < 5 || s[4] != '-' || !read_digits(s, 5, 2, month) ||
      s.size() < 8 || s[7] != '-' || !read_digits(s, 8, 2, day)) {
    return "the date is not YYYY-MM-DD";
  }
  if (s.size() < 11 || (s[10] != 'T' && s[10] != 't')) {
    return "the date must be followed by 'T' and a time";
  }
  if (!read_digits(s, 11, 2, hour) || s.size() < 14 || s[13] != ':' ||
      !read_digits(s, 14, 2, minute) || s.size() < 17 || s[16] != ':' ||
      !read_digits(s, 17, 2, second)) {
    return "the time is not HH:MM:SS";
  }
  std::size_t pos = 19;
  std::int32_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    while (pos < s.size() && is_digit(s[pos])) {
      if (++digits > 9) return "the fraction of a second has more than 9 digits";
      nanos = nanos * 10 + (s[pos] - '0');
      ++pos;
    }
    if (digits == 0) return "the fraction of a second after '.' has no digits";
    for (std::size_t i = digits; i < 9; ++i) nanos *= 10;
  }
  int offset_seconds = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0;
    if (!read_digits(s, pos + 1, 2, oh) || s.size() < pos + 4 || s[pos + 3] != ':' ||
        !read_digits(s, pos + 4, 2, om)) {
      return "the UTC offset is not +HH:MM or -HH:MM";
    }
    if (oh > 23 || om > 59) return "the UTC offset is out of range";
    offset_seconds = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return "the time zone is missing: end with 'Z' or an offset such as +02:00";
  }
  if (pos != s.size()) return "unexpected text '" + std::string(s.substr(pos)) + "' at the end";

  if (year < 1) return "year 0000 is before 0001-01-01";
  if (month < 1 || month > 12) return "month " + std::to_string(month) + " is not 01..12";
  const std::chrono::year_month_day ymd{std::chrono::year{year},
                                        std::chrono::month{static_cast<unsigned>(month)},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) {
    return "day " + std::to_string(day) + " does not exist in " + std::to_string(year) + "-" +
           (month < 10 ? "0" : "") + std::to_string(month);
  }
  if (hour > 23) return "hour " + std::to_string(hour) + " is not 00..23";
  if (minute > 59) return "minute " + std::to_string(minute) + " is not 00..59";
  if (second == 60) return "leap seconds (:60) are not supported";
  if (second > 59) return "second " + std::to_string(second) + " is not 00..59";

  const std::int64_t days = std::chrono::sys_days{ymd}.time_since_epoch().count();
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_seconds;
  if (seconds < Timestamp::kMinSeconds || seconds > Timestamp::kMaxSeconds) {
    return "it is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999999Z";
  }
  out = Timestamp{seconds, nanos};
  return "";
}

std::optional<Timestamp> timestamp_from_total(__int128 total_nanos) noexcept {
  __int128 seconds = total_nanos / kNanosPerSecond;
  __int128 nanos = total_nanos % kNanosPerSecond;
  if (nanos < 0) {
    nanos += kNanosPerSecond;
    --seconds;
  }
  if (seconds < Timestamp::kMinSeconds || seconds > Timestamp::kMaxSeconds) return std::nullopt;
  return Timestamp{static_cast<std::int64_t>(seconds), static_cast<std::int32_t>(nanos)};
}

Timestamp checked_timestamp(__int128 total_nanos) {
  if (auto t = timestamp_from_total(total_nanos)) return *t;
  throw InvalidInput(
      "timestamp out of range: it must lie within "
      "0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999999Z");
}

__int128 total_nanos(const Timestamp& t) {
  return static_cast<__int128>(t.seconds) * kNanosPerSecond + t.nanos;
}

}  // namespace

std::chrono::nanoseconds parse_duration(std::string_view text) {
  std::int64_t n = 0;
  if (std::string err = parse_duration_impl(text, n); !err.empty()) {
    throw InvalidInput("invalid duration " + quoted(text) + ": " + err + "; " +
                       std::string(kDurationForms));
  }
  return std::chrono::nanoseconds(n);
}

std::optional<std::chrono::nanoseconds> try_parse_duration(std::string_view text) noexcept {
  try {
    std::int64_t n = 0;
    if (!parse_duration_impl(text, n).empty()) return std::nullopt;
    return std::chrono::nanoseconds(n);
  } catch (...) {  // allocation failure only
    return std::nullopt;
  }
}

std::string format_duration(std::chrono::nanoseconds d) {
  if (d.count() == 0) return "0s";
  std::string out = d.count() < 0 ? "-" : "";
  const std::uint64_t u = magnitude(d);
  if (u < 1'000) {
    out += std::to_string(u) + "ns";
  } else if (u < 1'000'000) {
    append_fixed(out, u, 3);
    out += "\xC2\xB5s";
  } else if (u < 1'000'000'000) {
    append_fixed(out, u, 6);
    out += "ms";
  } else {
    const std::uint64_t secs = u / 1'000'000'000;
    const std::uint64_t hours = secs / 3600;
    const std::uint64_t minutes = secs / 60 % 60;
    if (hours > 0) out += std::to_string(hours) + "h";
    if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
    append_fixed(out, secs % 60 * 1'000'000'000 + u % 1'000'000'000, 9);
    out += "s";
  }
  return out;
}

std::string format_duration_seconds(std::chrono::nanoseconds d) {
  std::string out = d.count() < 0 ? "-" : "";
  append_fixed(out, magnitude(d), 9);
  return out + "s";
}

Timestamp Timestamp::parse_rfc3339(std::string_view text) {
  Timestamp t;
  if (std::string err = parse_timestamp_impl(text, t); !err.empty()) {
    throw InvalidInput("invalid timestamp " + quoted(text) + ": " + err + "; " +
                       std::string(kTimestampForms));
  }
  return t;
}

std::optional<Timestamp> Timestamp::try_parse_rfc3339(std::string_view text) noexcept {
  try {
    Timestamp t;
    if (!parse_timestamp_impl(text, t).empty()) return std::nullopt;
    return t;
  } catch (...) {  // allocation failure only
    return std::nullopt;
  }
}

Timestamp Timestamp::from_unix_nanos(std::int64_t nanos_since_epoch) {
  return checked_timestamp(nanos_since_epoch);
}

Timestamp Timestamp::from_time_point(std::chrono::system_clock::time_point t) {
  return checked_timestamp(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

std::optional<Timestamp> Timestamp::try_parse_http_date(std::string_view text) noexcept {
  if (text.size() > 64) return std::nullopt;
  const std::string t(text);
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%d %b %Y %H:%M:%S GMT"}) {
    absl::Time parsed;
    std::string err;
    if (absl::ParseTime(format, t, absl::UTCTimeZone(), &parsed, &err)) {
      const std::int64_t s = absl::ToUnixSeconds(parsed);
      if (!in_range(s)) return std::nullopt;
      return Timestamp{s, 0};
    }
  }
  return std::nullopt;
}

std::string Timestamp::to_http_date() const {
  return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::FromUnixSeconds(seconds),
                          absl::UTCTimeZone());
}

Timestamp Timestamp::now() { return from_time_point(std::chrono::system_clock::now()); }

std::string Timestamp::to_rfc3339(TimestampPrecision p) const {
  // Floor division keeps times before 1970 on the right day.
  std::int64_t days = seconds / 86400;
  std::int64_t rem = seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  const std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{days}}};
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d",
                        static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                        static_cast<unsigned>(ymd.day()), static_cast<int>(rem / 3600),
                        static_cast<int>(rem / 60 % 60), static_cast<int>(rem % 60));
  std::string out(buf, static_cast<std::size_t>(n));
  if (p == TimestampPrecision::Micros) {
    n = std::snprintf(buf, sizeof buf, ".%06d", nanos / 1000);
    out.append(buf, static_cast<std::size_t>(n));
  } else if (p == TimestampPrecision::Nanos && nanos != 0) {
    n = std::snprintf(buf, sizeof buf, ".%09d", nanos);
    std::string frac(buf, static_cast<std::size_t>(n));
    frac.erase(frac.find_last_not_of('0') + 1);
    out += frac;
  }
  return out + "Z";
}

std::chrono::system_clock::time_point Timestamp::to_time_point() const {
  using Rep = std::chrono::system_clock::duration;
  const __int128 total = total_nanos(*this);
  const __int128 ticks = total * Rep::period::den / (Rep::period::num * kNanosPerSecond);
  if (ticks > std::numeric_limits<Rep::rep>::max() ||
      ticks < std::numeric_limits<Rep::rep>::min()) {
    throw InvalidInput("timestamp " + to_rfc3339() + " is outside what the system clock holds");
  }
  return std::chrono::system_clock::time_point(Rep(static_cast<Rep::rep>(ticks)));
}

Timestamp Timestamp::operator+(std::chrono::nanoseconds d) const {
  return checked_timestamp(total_nanos(*this) + d.count());
}

Timestamp Timestamp::operator-(std::chrono::nanoseconds d) const {
  return checked_timestamp(total_nanos(*this) - d.count());
}

std::optional<Timestamp> Timestamp::try_add(std::chrono::nanoseconds d) const noexcept {
  return timestamp_from_total(total_nanos(*this) + d.count());
}

std::optional<std::chrono::nanoseconds> Timestamp::try_since(
    const Timestamp& earlier) const noexcept {
  const __int128 diff = total_nanos(*this) - total_nanos(earlier);
  if (diff > std::numeric_limits<std::int64_t>::max() ||
      diff < std::numeric_limits<std::int64_t>::min()) {
    return std::nullopt;
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(diff));
}

std::chrono::nanoseconds Timestamp::operator-(const Timestamp& o) const {
  if (auto d = try_since(o)) return *d;
  throw InvalidInput("the time between " + o.to_rfc3339() + " and " + to_rfc3339() +
                     " exceeds the duration range (about 292 years)");
}

CivilTime civil_time(const Timestamp& t, std::int32_t utc_offset_seconds) noexcept {
  // Floor division keeps times before 1970 on the right day.
  const std::int64_t local = t.seconds + utc_offset_seconds;
  std::int64_t days = local / 86400;
  std::int64_t rem = local % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  const std::chrono::sys_days day{std::chrono::days{days}};
  const std::chrono::year_month_day ymd{day};
  const std::chrono::sys_days jan1{ymd.year() / std::chrono::January / 1};
  CivilTime c;
  c.year = static_cast<int>(ymd.year());
  c.month = static_cast<int>(static_cast<unsigned>(ymd.month()));
  c.day = static_cast<int>(static_cast<unsigned>(ymd.day()));
  c.hour = static_cast<int>(rem / 3600);
  c.minute = static_cast<int>(rem / 60 % 60);
  c.second = static_cast<int>(rem % 60);
  c.day_of_week = static_cast<int>(std::chrono::weekday{day}.c_encoding());
  c.day_of_year = static_cast<int>((day - jan1).count());
  return c;
}

namespace {

// "+05:30", "-02:30", or unsigned "02:00" (east), as CEL's timezone argument allows.
std::optional<std::int32_t> fixed_offset(std::string_view zone) {
  int sign = 1;
  if (!zone.empty() && (zone[0] == '+' || zone[0] == '-')) {
    sign = zone[0] == '-' ? -1 : 1;
    zone.remove_prefix(1);
  }
  int h = 0, m = 0;
  if (zone.size() != 5 || !read_digits(zone, 0, 2, h) || zone[2] != ':' ||
      !read_digits(zone, 3, 2, m) || h > 23 || m > 59) {
    return std::nullopt;
  }
  return sign * (h * 3600 + m * 60);
}

// An IANA name as the tz database spells them: "Europe/Paris", "America/Argentina/Salta",
// "Etc/GMT+5". Rejects what could leave the database directory ("..", a leading '/') and
// Abseil's "file:" test hook, before the name reaches the loader.
bool plausible_zone_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '/' || name.back() == '/') return false;
  char prev = '/';
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '+' || c == '/' || c == '.';
    if (!ok || (c == '.' && prev == '/') || (c == '/' && prev == '/')) return false;
    prev = c;
  }
  return true;
}

std::filesystem::path zoneinfo_dir() {
  // Abseil looks in $TZDIR first, then the system database; so does this check.
  const char* dir = std::getenv("TZDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo";
}

// Loaded zones by name. Only names that are files of the tz database get here (Abseil's own
// cache also keeps names that failed to load), so both stay bounded by the database size.
std::optional<absl::TimeZone> load_zone(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, absl::TimeZone, std::less<>> zones;
  {
    std::lock_guard lock(mu);
    if (auto it = zones.find(name); it != zones.end()) return it->second;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(zoneinfo_dir() / std::string(name), ec))
    return std::nullopt;
  // Load under our lock too: Abseil guards its own cache with a mutex it allocates lazily in
  // a library ThreadSanitizer cannot see into, so concurrent first loads read as a race there.
  // One lock around every load makes the order plain to it; loads are rare (once per zone).
  std::lock_guard lock(mu);
  if (auto it = zones.find(name); it != zones.end()) return it->second;
  absl::TimeZone tz;
  if (!absl::LoadTimeZone(std::string(name), &tz)) return std::nullopt;
  zones.emplace(std::string(name), tz);
  return tz;
}

}  // namespace

std::optional<std::int32_t> zone_offset(std::string_view zone, const Timestamp& at) {
  if (zone == "UTC" || zone == "Z") return 0;
  if (zone.find(':') != std::string_view::npos) return fixed_offset(zone);
  if (!plausible_zone_name(zone)) return std::nullopt;
  auto tz = load_zone(zone);
  if (!tz) return std::nullopt;
  return tz->At(absl::FromUnixSeconds(at.seconds)).offset;
}

}  // namespace gpufleet::core
