#include "cel/tz_database.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpufleet::cel {
namespace {

constexpr const char* kZoneDir = "/usr/share/zoneinfo/";

struct Zone {
  std::vector<std::int64_t> transitions;  // ascending unix seconds
  std::vector<std::int32_t> offsets;      // offset in force from transitions[i]
  std::int32_t initial_offset = 0;        // before the first transition
};

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

const Zone* load_zone(std::string_view name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Zone>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Zone> zone;
  if (safe_zone_name(name)) {
    std::ifstream in(std::string(kZoneDir) + std::string(name), std::ios::binary);
    if (in) {
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      zone = parse_tzif(data);
    }
  }
  const Zone* result = zone.get();
  cache.emplace(std::string(name), std::move(zone));
  return result;
}

}  // namespace

std::optional<std::int64_t> iana_zone_offset(std::string_view name, std::int64_t unix_seconds) {
  const Zone* zone = load_zone(name);
  if (zone == nullptr) return std::nullopt;
  auto it = std::upper_bound(zone->transitions.begin(), zone->transitions.end(), unix_seconds);
  if (it == zone->transitions.begin()) return zone->initial_offset;
  return zone->offsets[static_cast<std::size_t>(it - zone->transitions.begin()) - 1];
}

}  // namespace gpufleet::cel
