// The one home of time in gpufleet: Go-style durations ("1h30m", "300ms", "-2m"), RFC 3339
// timestamps with nanoseconds, calendar fields and time zones, as used in CEL, Kubernetes
// objects and configuration files. Time zones come from Abseil (the system tz database).
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpufleet::core {

// Parses a Go duration: an optional sign, then one or more decimal numbers each followed by a
// unit: ns, us (also µs, μs), ms, s, m, h. "1h30m", "300ms", "1.5s", ".5s", "-2m", "1h-"
// is invalid; "0" alone needs no unit. Fractions are exact to the nanosecond (truncated
// below it). Throws InvalidInput naming the text and the valid forms, also when the value
// exceeds the int64 nanosecond range (about 292 years).
std::chrono::nanoseconds parse_duration(std::string_view text);
std::optional<std::chrono::nanoseconds> try_parse_duration(std::string_view text) noexcept;

// Go's Duration.String(): "1h30m0s", "1.5s", "300ms", "1.5µs", "10ns", "-2m0s", "0s".
// parse_duration reads it back exactly.
std::string format_duration(std::chrono::nanoseconds d);
// Seconds with a fraction, as CEL's string(duration) and protobuf JSON write them:
// "5400s", "1.5s", "-0.000000001s", "0s".
std::string format_duration_seconds(std::chrono::nanoseconds d);

enum class TimestampPrecision : std::uint8_t {
  Seconds,  // "2024-05-01T12:00:00Z" (metav1.Time); any fraction is truncated
  Micros,   // "2024-05-01T12:00:00.000000Z" (metav1.MicroTime: always six digits)
  Nanos,    // "2024-05-01T12:00:00.5Z": fraction without trailing zeros, none when zero
};

// A point in time: seconds and nanoseconds since 1970-01-01T00:00:00Z, UTC, within
// 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z (the range of RFC 3339 and CEL).
struct Timestamp {
  std::int64_t seconds = 0;
  std::int32_t nanos = 0;  // always in [0, 999999999], also for times before 1970

  static constexpr std::int64_t kMinSeconds = -62135596800;  // 0001-01-01T00:00:00Z
  static constexpr std::int64_t kMaxSeconds = 253402300799;  // 9999-12-31T23:59:59Z

  // "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)"; 't' and 'z' may be lower case; the
  // fraction has 1 to 9 digits. Throws InvalidInput naming the text, the bad part and the
  // expected form, for impossible dates (2023-02-29), leap seconds and out-of-range times.
  static Timestamp parse_rfc3339(std::string_view text);
  static std::optional<Timestamp> try_parse_rfc3339(std::string_view text) noexcept;
  // HTTP dates as cloud metadata services write them: "Mon, 19 Sep 2016 18:29:47 GMT"
  // (RFC 9110 IMF-fixdate) or the same without the weekday ("21 Jan 2019 09:00:43 GMT").
  // nullopt for anything else.
  static std::optional<Timestamp> try_parse_http_date(std::string_view text) noexcept;

  // Throws InvalidInput when the result leaves the range above.
  static Timestamp from_unix_nanos(std::int64_t nanos_since_epoch);
  static Timestamp from_time_point(std::chrono::system_clock::time_point t);
  static Timestamp now();

  // Always UTC with 'Z'.
  [[nodiscard]] std::string to_rfc3339(TimestampPrecision p = TimestampPrecision::Nanos) const;
  // "Mon, 19 Sep 2016 18:29:47 GMT" (whole seconds).
  [[nodiscard]] std::string to_http_date() const;
  // Throws InvalidInput outside what system_clock holds (years 1678..2261 with libstdc++).
  [[nodiscard]] std::chrono::system_clock::time_point to_time_point() const;

  // Whether whole seconds since the epoch lie within the range above.
  static constexpr bool in_range(std::int64_t s) noexcept {
    return s >= kMinSeconds && s <= kMaxSeconds;
  }

  // Arithmetic that reports leaving the range as nullopt, for evaluators that turn errors
  // into values (CEL) rather than exceptions.
  [[nodiscard]] std::optional<Timestamp> try_add(std::chrono::nanoseconds d) const noexcept;
  // *this - earlier; nullopt when it exceeds the int64 nanosecond range.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> try_since(
      const Timestamp& earlier) const noexcept;

  // Checked arithmetic: throws InvalidInput when the result leaves the range.
  [[nodiscard]] Timestamp operator+(std::chrono::nanoseconds d) const;
  [[nodiscard]] Timestamp operator-(std::chrono::nanoseconds d) const;
  // Throws InvalidInput when the difference exceeds the int64 nanosecond range.
  [[nodiscard]] std::chrono::nanoseconds operator-(const Timestamp& o) const;

  friend auto operator<=>(const Timestamp&, const Timestamp&) = default;
  friend bool operator==(const Timestamp&, const Timestamp&) = default;
};

// Calendar fields of a moment as a wall clock shows them at some UTC offset.
struct CivilTime {
  int year = 1970;
  int month = 1;        // 1..12
  int day = 1;          // 1..31
  int hour = 0;         // 0..23
  int minute = 0;       // 0..59
  int second = 0;       // 0..59
  int day_of_week = 4;  // 0 = Sunday
  int day_of_year = 0;  // 0-based
};
// `t` shifted by `utc_offset_seconds` (east positive) and split into calendar fields of the
// proleptic Gregorian calendar.
CivilTime civil_time(const Timestamp& t, std::int32_t utc_offset_seconds = 0) noexcept;

// The UTC offset in seconds (east positive) that zone `zone` has at moment `at`. Accepted:
// "UTC" and "Z"; a fixed offset "+05:30", "-02:30" or, as the CEL specification allows,
// unsigned "02:00" (east); an IANA name ("Europe/Paris") from the system tz database through
// Abseil. nullopt for anything else, including names that are not files of the database
// (so that untrusted text never reaches the loader's cache or the file system outside it).
std::optional<std::int32_t> zone_offset(std::string_view zone, const Timestamp& at);

}  // namespace gpufleet::core
