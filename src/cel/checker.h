// Resolves names and functions, type-checks, and folds constants: turns a parsed tree into
// one the evaluator can run. Unknown variables, functions and statically impossible
// overloads are compile errors unless checking is disabled.
#pragma once

#include <string>

#include "cel/ast.h"
#include "cel/types.h"

namespace gpufleet::cel {

class Env;

struct CheckResult {
  Type type;
  int slot_count = 0;
};

// Throws SyntaxError (offset + message) for a check failure.
CheckResult check_expression(Expr& root, const Env& env);

}  // namespace gpufleet::cel
