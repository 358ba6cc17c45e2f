#include "cel/cel.h"

#include "cel/checker.h"
#include "cel/compiled.h"
#include "cel/eval.h"
#include "cel/lexer.h"
#include "cel/parser.h"
#include "core/text_position.h"

namespace gpufleet::cel {

Env& Env::variable(std::string name, std::string_view type) {
  return variable(std::move(name), parse_type(type));
}

Env& Env::variable(std::string name, Type type) {
  for (auto& v : vars_) {
    if (v.name == name) {
      v.type = std::move(type);
      return *this;
    }
  }
  vars_.push_back({std::move(name), std::move(type)});
  return *this;
}

Env& Env::container(std::string name) {
  container_ = std::move(name);
  return *this;
}
Env& Env::disable_check(bool off) {
  disable_check_ = off;
  return *this;
}
Env& Env::disable_macros(bool off) {
  disable_macros_ = off;
  return *this;
}
Env& Env::cost_limit(std::uint64_t units) {
  cost_limit_ = units;
  return *this;
}

Activation::Binding* Activation::slot_for(std::string_view name) {
  for (std::size_t i = 0; i < count_; ++i) {
    if (inline_[i].name == name) return &inline_[i];
  }
  for (auto& b : overflow_) {
    if (b.name == name) return &b;
  }
  if (count_ < inline_.size()) {
    Binding* b = &inline_[count_++];
    b->name.assign(name.data(), name.size());
    return b;
  }
  overflow_.push_back({std::string(name), Val()});
  return &overflow_.back();
}

Activation& Activation::bind(std::string_view name, const core::Value& value) {
  slot_for(name)->value = Val::from_core(value);
  return *this;
}

Activation& Activation::bind(std::string_view name, Val value) {
  slot_for(name)->value = std::move(value);
  return *this;
}

const Val* Activation::find(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    if (inline_[i].name == name) return &inline_[i].value;
  }
  for (const auto& b : overflow_) {
    if (b.name == name) return &b.value;
  }
  return nullptr;
}

namespace {

[[noreturn]] void throw_compile_error(std::string_view source, const SyntaxError& e) {
  core::TextPosition pos = core::position_of(source, e.offset);
  throw CompileError("<cel>", pos.line, pos.column,
                     e.message + "\n" + core::caret_excerpt(source, pos));
}

constexpr std::size_t kInlineSlots = 8;

}  // namespace

Program compile(std::string_view source, const Env& env) {
  auto impl = std::make_shared<CompiledExpr>();
  impl->source = std::string(source);
  impl->cost_limit = env.cost_limit_units();
  try {
    impl->root = parse_expression(impl->source, ParseLimits{}, !env.macros_disabled());
    CheckResult r = check_expression(*impl->root, env);
    impl->type = r.type;
    impl->slot_count = r.slot_count;
  } catch (const SyntaxError& e) {
    throw_compile_error(impl->source, e);
  }
  Program p;
  p.impl_ = std::move(impl);
  return p;
}

Val Program::evaluate(const Activation& activation) const { return evaluate(activation, nullptr); }

Val Program::evaluate(const Activation& activation, std::uint64_t* cost_spent) const {
  if (!impl_) return Val::error("evaluate() called on a Program that was not compiled");
  EvalContext ctx;
  ctx.activation = &activation;
  ctx.cost_limit = impl_->cost_limit;
  Val inline_slots[kInlineSlots];
  std::vector<Val> heap_slots;
  if (static_cast<std::size_t>(impl_->slot_count) > kInlineSlots) {
    heap_slots.resize(static_cast<std::size_t>(impl_->slot_count));
    ctx.slots = heap_slots.data();
  } else {
    ctx.slots = inline_slots;
  }
  struct Report {
    const EvalContext& ctx;
    std::uint64_t* out;
    ~Report() {
      if (out != nullptr) *out = ctx.cost;
    }
  } report{ctx, cost_spent};
  try {
    return evaluate_expr(*impl_->root, ctx).detach();
  } catch (const core::InvalidInput& e) {
    // A library routine rejected its input: report it as the evaluation's error value.
    return Val::error(e.what());
  } catch (const CostLimitExceeded&) {
    return Val::error("evaluation cost limit of " + std::to_string(impl_->cost_limit) +
                      " units exceeded (the expression does too much work; simplify it or raise "
                      "the limit)");
  }
}

bool Program::evaluate_bool(const Activation& activation) const {
  Val v = evaluate(activation);
  if (v.is_bool()) return v.as_bool();
  if (v.is_error())
    throw EvalError("CEL expression '" + source() + "' failed: " + v.error_message());
  throw EvalError("CEL expression '" + source() + "' must produce a bool but produced " +
                  std::string(v.type_name()));
}

std::string Program::result_type() const { return impl_ ? type_to_string(impl_->type) : "dyn"; }

const std::string& Program::source() const noexcept {
  static const std::string empty;
  return impl_ ? impl_->source : empty;
}

}  // namespace gpufleet::cel
