// Common Expression Language: compile an expression once against declared variables, then
// evaluate it any number of times, concurrently, over core::Value data bound by name.
//
//   cel::Env env;
//   env.variable("value", "int");
//   cel::Program p = cel::compile("value >= 300", env);
//   core::Value v = 512;
//   bool ok = p.evaluate_bool(cel::Activation().bind("value", v));
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cel/types.h"
#include "cel/value.h"
#include "core/errors.h"

namespace gpufleet::cel {

// An expression that does not parse or does not type-check. The message has the position
// (line:column), the reason and the source line with a caret under the spot.
class CompileError : public core::ParseError {
 public:
  using core::ParseError::ParseError;
};

// Evaluation failed (the expression produced an error value, or a non-bool where a bool
// was required). Only evaluate_bool() throws it; evaluate() returns errors as values.
class EvalError : public core::InvalidInput {
 public:
  using core::InvalidInput::InvalidInput;
};

// Declarations an expression is compiled against.
class Env {
 public:
  // Declares a variable; `type` as parse_type() reads it ("dyn" when the shape is free).
  Env& variable(std::string name, std::string_view type = "dyn");
  Env& variable(std::string name, Type type);
  // Namespace for identifier resolution: in container "a.b", `x` means a.b.x, a.x or x.
  Env& container(std::string name);
  // Skips type checking: unknown names and functions become evaluation errors.
  Env& disable_check(bool off = true);
  Env& disable_macros(bool off = true);
  // Upper bound on the cost units one evaluation may spend (see docs/cel.md).
  Env& cost_limit(std::uint64_t units);

  struct Variable {
    std::string name;
    Type type;
  };
  const std::vector<Variable>& variables() const noexcept { return vars_; }
  const std::string& container_name() const noexcept { return container_; }
  bool check_disabled() const noexcept { return disable_check_; }
  bool macros_disabled() const noexcept { return disable_macros_; }
  std::uint64_t cost_limit_units() const noexcept { return cost_limit_; }

 private:
  std::vector<Variable> vars_;
  std::string container_;
  bool disable_check_ = false;
  bool disable_macros_ = false;
  std::uint64_t cost_limit_ = 1000000;
};

// Values bound by name for one evaluation. bind() borrows: the core::Value must outlive
// every evaluation that uses this activation and every Val those evaluations return. An
// activation holds up to 8 bindings without allocating.
class Activation {
 public:
  Activation() = default;
  Activation& bind(std::string_view name, const core::Value& value);
  Activation& bind(std::string_view name, Val value);
  [[nodiscard]] const Val* find(std::string_view name) const noexcept;

 private:
  struct Binding {
    std::string name;
    Val value;
  };
  Binding* slot_for(std::string_view name);
  std::array<Binding, 8> inline_;
  std::size_t count_ = 0;
  std::vector<Binding> overflow_;
};

struct Expr;
struct CompiledExpr;
struct CostEstimate;
class Sizes;

// A compiled expression. Immutable: evaluate() may run from many threads at once.
class Program {
 public:
  // The result, or an error value (kind() == ValKind::Error) with the reason. A result may
  // borrow from the activation's values and from this Program; use to_value() to keep it.
  [[nodiscard]] Val evaluate(const Activation& activation) const;
  // The same, storing the cost units the evaluation spent (to compare with estimate_cost()).
  [[nodiscard]] Val evaluate(const Activation& activation, std::uint64_t* cost_spent) const;
  // For rules: true/false, or EvalError when the result is an error or not a bool.
  [[nodiscard]] bool evaluate_bool(const Activation& activation) const;
  // The checker's result type ("bool", "dyn", ...).
  [[nodiscard]] std::string result_type() const;
  [[nodiscard]] const std::string& source() const noexcept;

 private:
  friend Program compile(std::string_view source, const Env& env);
  friend CostEstimate estimate_cost(const Program& program, const Sizes& sizes);
  std::shared_ptr<const CompiledExpr> impl_;
};

// Parses and checks `source`. Throws CompileError.
Program compile(std::string_view source, const Env& env);

}  // namespace gpufleet::cel
