// Tree-walking evaluation of a compiled (annotated) expression.
#pragma once

#include "cel/ast.h"
#include "cel/eval_context.h"

namespace gpufleet::cel {

Val evaluate_expr(const Expr& e, EvalContext& ctx);

// Builds a map from key/value pairs, rejecting invalid and repeated keys (error value).
Val make_map(std::vector<std::pair<Val, Val>> entries);

}  // namespace gpufleet::cel
