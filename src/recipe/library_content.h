// Normalizing overlay, mixin and registry content into the one shape the per-field merge
// works on (see library.h). Internal to the recipe module.
#pragma once

#include <string_view>

#include "core/value.h"

namespace gpufleet::recipe::detail {

// A registry component (`registry` = true: chart and namespace required, enabled false) or an
// overlay's component patch. Throws core::InvalidInput naming `where` and the field.
core::Value normalize_component(const core::Value& v, std::string_view where, bool registry);
// components / constraints / nodePool of an overlay or a mixin.
core::Value normalize_content(const core::Map& m, std::string_view where);

}  // namespace gpufleet::recipe::detail
