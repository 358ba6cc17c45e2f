// Helpers shared by the CEL unit tests.
#pragma once

#include <string>

#include "cel/cel.h"

namespace gpufleet::cel::testing {

// Compiles and evaluates `expr` with no variables (checks on).
inline Val eval(const std::string& expr) {
  static const Activation empty;
  return compile(expr, Env()).evaluate(empty);
}

// The error message of a compile failure, or "" when it compiles.
inline std::string compile_error(const std::string& expr, const Env& env = Env()) {
  try {
    (void)compile(expr, env);
  } catch (const CompileError& e) {
    return e.what();
  }
  return "";
}

}  // namespace gpufleet::cel::testing
