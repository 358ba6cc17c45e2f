// A compiled expression's parts, shared by the front door (cel.cc) and the cost estimator.
#pragma once

#include <cstdint>
#include <string>

#include "cel/ast.h"
#include "cel/types.h"

namespace gpufleet::cel {

struct CompiledExpr {
  std::string source;
  ExprPtr root;
  Type type;
  int slot_count = 0;
  std::uint64_t cost_limit = 0;
};

}  // namespace gpufleet::cel
