#include "recipe/pin.h"

#include <string>

#include "core/errors.h"
#include "core/semver.h"

namespace gpufleet::recipe {

bool is_exact_pin(std::string_view version) noexcept { return core::is_exact_pin(version); }

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
