#include "cel/time_util.h"

#include <cstdint>
#include <cstdlib>

#include "cel/tz_database.h"

namespace gpufleet::cel {

bool timestamp_in_range(std::int64_t s) noexcept {
  return s >= kMinTimestampSeconds && s <= kMaxTimestampSeconds;
}

bool duration_in_range(std::int64_t s, std::int32_t nanos) noexcept {
  if (s < -kMaxDurationSeconds - 1 || s > kMaxDurationSeconds) return false;
  __int128 total = static_cast<__int128>(s) * 1000000000 + nanos;
  return total >= INT64_MIN && total <= INT64_MAX;
}

Instant normalize_duration(std::int64_t seconds, std::int64_t nanos) noexcept {
  seconds += nanos / 1000000000;
  nanos %= 1000000000;
  if (seconds > 0 && nanos < 0) {
    seconds -= 1;
    nanos += 1000000000;
  } else if (seconds < 0 && nanos > 0) {
    seconds += 1;
    nanos -= 1000000000;
  }
  return {seconds, static_cast<std::int32_t>(nanos)};
}

Instant normalize_timestamp(std::int64_t seconds, std::int64_t nanos) noexcept {
  seconds += nanos / 1000000000;
  nanos %= 1000000000;
  if (nanos < 0) {
    seconds -= 1;
    nanos += 1000000000;
  }
  return {seconds, static_cast<std::int32_t>(nanos)};
}

// Proleptic Gregorian calendar arithmetic on 400-year eras.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

CivilTime civil_from_seconds(std::int64_t seconds) noexcept {
  std::int64_t days = seconds / 86400;
  std::int64_t rem = seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    days -= 1;
  }
  CivilTime c{};
  c.hour = static_cast<int>(rem / 3600);
  c.minute = static_cast<int>(rem / 60 % 60);
  c.second = static_cast<int>(rem % 60);
  c.day_of_week = static_cast<int>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = static_cast<std::int64_t>(yoe) + era * 400 + (c.month <= 2);
  c.day_of_year = static_cast<int>(days - days_from_civil(c.year, 1, 1));
  return c;
}

namespace {

bool digits(std::string_view s, std::size_t at, std::size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

std::string two(int v) {
  std::string out(2, '0');
  out[0] = static_cast<char>('0' + v / 10);
  out[1] = static_cast<char>('0' + v % 10);
  return out;
}

// The fraction of a second without trailing zeros, "" when zero.
std::string fraction(std::int32_t nanos) {
  if (nanos == 0) return "";
  std::string f = std::to_string(nanos);
  f.insert(0, 9 - f.size(), '0');
  while (!f.empty() && f.back() == '0') f.pop_back();
  return "." + f;
}

}  // namespace

std::optional<Instant> parse_timestamp(std::string_view s) {
  int y, mo, d, h, mi, sec;
  if (!digits(s, 0, 4, &y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, &mo) ||
      s[7] != '-' || !digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
      !digits(s, 11, 2, &h) || s[13] != ':' || !digits(s, 14, 2, &mi) || s[16] != ':' ||
      !digits(s, 17, 2, &sec)) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap)) return std::nullopt;
  std::size_t at = 19;
  std::int64_t nanos = 0;
  if (at < s.size() && s[at] == '.') {
    ++at;
    int n = 0;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') {
      if (n < 9) nanos = nanos * 10 + (s[at] - '0');
      ++n;
      ++at;
    }
    if (n == 0) return std::nullopt;
    for (; n < 9; ++n) nanos *= 10;
  }
  std::int64_t offset = 0;
  if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    int oh, om;
    if (!digits(s, at + 1, 2, &oh) || at + 3 >= s.size() || s[at + 3] != ':' ||
        !digits(s, at + 4, 2, &om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset = (oh * 3600 + om * 60) * (s[at] == '-' ? -1 : 1);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != s.size()) return std::nullopt;
  std::int64_t secs =
      days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
      mi * 60 + sec - offset;
  if (!timestamp_in_range(secs)) return std::nullopt;
  return Instant{secs, static_cast<std::int32_t>(nanos)};
}

std::string format_timestamp(std::int64_t seconds, std::int32_t nanos) {
  CivilTime c = civil_from_seconds(seconds);
  std::string year = std::to_string(c.year);
  if (year.size() < 4) year.insert(0, 4 - year.size(), '0');
  return year + "-" + two(c.month) + "-" + two(c.day) + "T" + two(c.hour) + ":" + two(c.minute) +
         ":" + two(c.second) + fraction(nanos) + "Z";
}

std::optional<Instant> parse_duration(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Instant{};
  if (s.empty()) return std::nullopt;
  // Accumulate in nanoseconds as a 128-bit value so that overflow is detected exactly.
  __int128 total = 0;
  const __int128 limit = static_cast<__int128>(kMaxDurationSeconds + 1) * 1000000000;
  while (!s.empty()) {
    __int128 whole = 0;
    std::size_t i = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      whole = whole * 10 + (s[i] - '0');
      if (whole > limit) return std::nullopt;
      ++i;
    }
    std::int64_t frac = 0, frac_scale = 1;
    bool has_frac = false;
    std::size_t frac_digits = 0;
    if (i < s.size() && s[i] == '.') {
      has_frac = true;
      ++i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (frac_digits < 18) {
          frac = frac * 10 + (s[i] - '0');
          frac_scale *= 10;
        }
        ++frac_digits;
        ++i;
      }
    }
    if (i == 0 || (i == 1 && has_frac)) return std::nullopt;
    s.remove_prefix(i);
    std::int64_t unit = 0;
    static constexpr std::pair<std::string_view, std::int64_t> kUnits[] = {
        {"ns", 1},         {"us", 1000},       {"\xC2\xB5s", 1000}, {"ms", 1000000},
        {"s", 1000000000}, {"m", 60000000000}, {"h", 3600000000000}};
    for (const auto& [name, ns] : kUnits) {
      if (s.substr(0, name.size()) == name) {
        // "m" must not swallow the "m" of "ms".
        if (name == "m" && s.size() > 1 && s[1] == 's') continue;
        unit = ns;
        s.remove_prefix(name.size());
        break;
      }
    }
    if (unit == 0) return std::nullopt;
    total += whole * unit;
    if (has_frac) total += static_cast<__int128>(frac) * unit / frac_scale;
    if (total > limit) return std::nullopt;
  }
  if (neg) total = -total;
  auto secs = static_cast<std::int64_t>(total / 1000000000);
  auto nanos = static_cast<std::int32_t>(total % 1000000000);
  if (!duration_in_range(secs, nanos)) return std::nullopt;
  return Instant{secs, nanos};
}

std::string format_duration(std::int64_t seconds, std::int32_t nanos) {
  bool neg = seconds < 0 || nanos < 0;
  std::string out = neg ? "-" : "";
  out += std::to_string(std::llabs(seconds));
  out += fraction(std::abs(nanos));
  return out + "s";
}

std::optional<std::int64_t> zone_offset(std::string_view tz, std::int64_t seconds) {
  if (tz.empty()) return std::nullopt;
  if (tz == "UTC" || tz == "Z") return 0;
  if (tz[0] == '+' || tz[0] == '-') {
    int h, m;
    if (tz.size() != 6 || !digits(tz, 1, 2, &h) || tz[3] != ':' || !digits(tz, 4, 2, &m) ||
        h > 23 || m > 59) {
      return std::nullopt;
    }
    return (h * 3600 + m * 60) * (tz[0] == '-' ? -1 : 1);
  }
  return iana_zone_offset(tz, seconds);
}

}  // namespace gpufleet::cel
