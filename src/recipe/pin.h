// Exact version pins for charts: the library and user input may only name one release.
#pragma once

#include <string_view>

namespace gpufleet::recipe {

// core::is_exact_pin: a complete version with an optional leading 'v', prerelease and build
// ("0.18.3", "v26.3.2", "v0.1.0-alpha.8"). False for floating tags ("latest", "stable"),
// ranges ("^1.2", "~1.2.0", ">=1", "1.x", "1.2.*", "1.2 - 1.4") and partial versions ("1.2").
bool is_exact_pin(std::string_view version) noexcept;

// Throws core::InvalidInput naming `where` (file and field) when `version` is not an exact pin.
void require_exact_pin(std::string_view version, std::string_view where);

}  // namespace gpufleet::recipe
