#include "core/input_limits.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string_view>

namespace gpufleet::core {

namespace {

// "1048576", "512Mi", "2Gi" -> bytes; 0 when malformed.
std::size_t parse_byte_count(std::string_view s) {
  std::size_t shift = 0;
  if (s.ends_with("Ki")) shift = 10;
  if (s.ends_with("Mi")) shift = 20;
  if (s.ends_with("Gi")) shift = 30;
  if (shift != 0) s.remove_suffix(2);
  if (s.empty() || s.size() > 15) return 0;
  std::size_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return n << shift;
}

InputLimits from_environment() {
  InputLimits l;
  if (const char* env = std::getenv("GPUFLEET_MAX_INPUT_BYTES"); env != nullptr && *env != '\0') {
    std::size_t n = parse_byte_count(env);
    if (n == 0) {
      std::cerr << "warning: GPUFLEET_MAX_INPUT_BYTES='" << env
                << "' is not a byte count (e.g. 268435456 or 256Mi); using the default of "
                << describe_bytes(l.max_bytes) << "\n";
    } else {
      l.max_bytes = n;
      l.max_inflated_bytes = n;
    }
  }
  return l;
}

}  // namespace

const InputLimits& input_limits() {
  static const InputLimits limits = from_environment();
  return limits;
}

std::string describe_bytes(std::size_t n) {
  std::string s = std::to_string(n) + " bytes";
  if (n >= (1u << 20) && n % (1u << 20) == 0) {
    s += " (" + std::to_string(n >> 20) + " MiB)";
  } else if (n >= 1024 && n % 1024 == 0) {
    s += " (" + std::to_string(n >> 10) + " KiB)";
  }
  return s;
}

}  // namespace gpufleet::core
