#include "recipe/pin.h"

#include <string>

#include "core/errors.h"

namespace gpufleet::recipe {

namespace {

// A numeric identifier: digits without a leading zero (semver 2.0 rule 2).
bool numeric_identifier(std::string_view s) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool identifier_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

// Dot-separated non-empty identifiers of [0-9A-Za-z-].
bool dotted_identifiers(std::string_view s) {
  if (s.empty()) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = s.find('.', start);
    std::string_view part = s.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (part.empty()) return false;
    for (char c : part) {
      if (!identifier_char(c)) return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

bool is_exact_pin(std::string_view v) noexcept {
  if (!v.empty() && v[0] == 'v') v.remove_prefix(1);
  std::size_t plus = v.find('+');
  if (plus != std::string_view::npos) {
    if (!dotted_identifiers(v.substr(plus + 1))) return false;
    v = v.substr(0, plus);
  }
  std::size_t dash = v.find('-');
  if (dash != std::string_view::npos) {
    if (!dotted_identifiers(v.substr(dash + 1))) return false;
    v = v.substr(0, dash);
  }
  std::size_t d1 = v.find('.');
  if (d1 == std::string_view::npos) return false;
  std::size_t d2 = v.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return false;
  return numeric_identifier(v.substr(0, d1)) && numeric_identifier(v.substr(d1 + 1, d2 - d1 - 1)) &&
         numeric_identifier(v.substr(d2 + 1));
}

void require_exact_pin(std::string_view version, std::string_view where) {
  if (is_exact_pin(version)) return;
  std::string why =
      version.empty() ? "is empty" : "'" + std::string(version) + "' is not an exact version";
  throw core::InvalidInput(std::string(where) + ": version " + why +
                           "; pin one release such as 1.2.3 or v1.2.3 (floating tags like "
                           "'latest', ranges like '^1.2' or '>=1.0' and partial versions like "
                           "'1.2' are not allowed)");
}

}  // namespace gpufleet::recipe
