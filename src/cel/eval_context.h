// Per-evaluation state shared by the evaluator and the builtin functions.
#pragma once

#include <cstdint>
#include <string>

#include "cel/value.h"

namespace gpufleet::cel {

class Activation;

// Thrown when an evaluation spends more than its cost budget; never absorbed by || or &&.
struct CostLimitExceeded {};

struct EvalContext {
  const Activation* activation = nullptr;
  Val* slots = nullptr;  // comprehension variables
  std::uint64_t cost = 0;
  std::uint64_t cost_limit = UINT64_MAX;
  const void* aux = nullptr;  // precomputed data of the call being made (Expr::aux)

  void charge(std::uint64_t units) {
    cost += units;
    if (cost > cost_limit) throw CostLimitExceeded{};
  }
};

// Common error values, worded as the CEL specification names them.
Val no_such_overload(std::string_view function, const Val* args, std::size_t n);
Val no_such_key(const Val& key);
Val no_such_field(std::string_view field);

}  // namespace gpufleet::cel
