// Recursive-descent parser for the CEL grammar (cel-spec langdef.md), with macro expansion.
// Written by hand so that every error can name the spot and say what was expected.
#pragma once

#include <cstddef>
#include <string_view>

#include "cel/ast.h"

namespace gpufleet::cel {

struct ParseLimits {
  std::size_t max_source_bytes = 100 * 1024;
  std::size_t max_depth = 250;   // nesting of sub-expressions while parsing
  std::size_t max_height = 400;  // longest path in the tree (bounds evaluation recursion)
  std::size_t max_nodes = 50000;
};

// Throws SyntaxError (offset + message).
ExprPtr parse_expression(std::string_view source, const ParseLimits& limits = {},
                         bool enable_macros = true);

}  // namespace gpufleet::cel
