// `gpufleet recipe query --selector PATH`: one value of a recipe, for scripts that need a
// version or a setting without parsing YAML ("components.gpu-operator.chart.version").
#pragma once

#include <string>
#include <string_view>

#include "core/value.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

// The value at `selector` in the Recipe document. Segments are separated by '.'; a key that
// contains dots (a label such as nvidia.com/gpu.present) is matched whole. The spec's fields
// may be named without "spec." (components.X is spec.components.X); components, nodePools,
// overlays and constraints are addressed by name, other lists by index. Throws
// core::InvalidInput naming the selector, the segment not found and the keys there.
core::Value query_recipe(const Recipe& r, std::string_view selector);

// A scalar as plain text (a string without quotes), anything else as YAML.
std::string query_result_text(const core::Value& v);

}  // namespace gpufleet::recipe
