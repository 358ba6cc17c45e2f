// Where a field path ("spec.pools[0].gpu") stands in YAML or JSON text, so that an error
// found on the parsed core::Value can point at the line and column of the text. core::Value
// keeps no positions (it stays small for the hot paths); this second pass over the text runs
// only when an error message needs it.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/text_position.h"

namespace gpufleet::core {

// The position of the key named last in `path` (of the item, for a last "[i]") in document
// number `document` (0-based) of `text`. Path segments are map keys separated by '.' and
// list indexes in brackets; "" is the document itself. {0, 0} when the path is not there,
// the text does not parse, or a key itself contains '.' or '['.
TextPosition locate_field(std::string_view text, std::string_view path, std::size_t document = 0);

}  // namespace gpufleet::core
