// IANA time zones read from the system tz database (TZif files under /usr/share/zoneinfo).
// libstdc++ 12 has no std::chrono::locate_zone, so the files are read directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpufleet::cel {

// UTC offset (seconds) in force in zone `name` at `unix_seconds`; nullopt when the zone is
// unknown or its file is unreadable. Zones are loaded once and cached (thread-safe).
std::optional<std::int64_t> iana_zone_offset(std::string_view name, std::int64_t unix_seconds);

}  // namespace gpufleet::cel
