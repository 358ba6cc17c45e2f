// Timestamps and durations as CEL defines them: RFC 3339 text, Go-style duration text,
// calendar fields in UTC, a fixed offset ("+05:30") or an IANA zone ("Europe/Paris").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpufleet::cel {

// Valid timestamps: 0001-01-01T00:00:00Z through 9999-12-31T23:59:59.999999999Z.
inline constexpr std::int64_t kMinTimestampSeconds = -62135596800;
inline constexpr std::int64_t kMaxTimestampSeconds = 253402300799;
// Valid durations: what fits in int64 nanoseconds (about +-292 years), as cel-go's runtime
// represents them; the conformance suite expects timestamp differences beyond it to fail.
inline constexpr std::int64_t kMaxDurationSeconds = 9223372036;

struct Instant {
  std::int64_t seconds = 0;
  std::int32_t nanos = 0;  // 0..999999999 for timestamps; same sign as seconds for durations
};

bool timestamp_in_range(std::int64_t seconds) noexcept;
bool duration_in_range(std::int64_t seconds, std::int32_t nanos = 0) noexcept;

// "2009-02-13T23:31:30.123Z" or with a "+01:00" offset. nullopt when malformed.
std::optional<Instant> parse_timestamp(std::string_view text);
// RFC 3339 in UTC with the fraction trimmed ("2009-02-13T23:31:30Z").
std::string format_timestamp(std::int64_t seconds, std::int32_t nanos);
// Go duration syntax: "1h30m", "1.5s", "-20ms", "0". nullopt when malformed or too large.
std::optional<Instant> parse_duration(std::string_view text);
// Seconds with the fraction trimmed: "3600s", "1.5s".
std::string format_duration(std::int64_t seconds, std::int32_t nanos);

// Normalizes seconds+nanos so that nanos has the sign of the total (duration form).
Instant normalize_duration(std::int64_t seconds, std::int64_t nanos) noexcept;
// Normalizes so that 0 <= nanos < 1e9 (timestamp form).
Instant normalize_timestamp(std::int64_t seconds, std::int64_t nanos) noexcept;

struct CivilTime {
  std::int64_t year;
  int month;  // 1..12
  int day;    // 1..31
  int hour, minute, second;
  int day_of_week;  // 0 = Sunday
  int day_of_year;  // 0-based
};
CivilTime civil_from_seconds(std::int64_t seconds) noexcept;
// Days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept;

// UTC offset in seconds of zone `tz` at instant `seconds`: "UTC", "+11:00", "-02:30", or an
// IANA name read from the system tz database (/usr/share/zoneinfo). nullopt for an unknown
// zone.
std::optional<std::int64_t> zone_offset(std::string_view tz, std::int64_t seconds);

}  // namespace gpufleet::cel
