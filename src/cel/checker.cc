#include "cel/checker.h"

#include <map>
#include <optional>

#include "cel/cel.h"
#include "cel/eval.h"
#include "cel/functions.h"
#include "cel/lexer.h"

namespace gpufleet::cel {

// Implemented in stdlib/regex.cc: compiles a constant pattern once, at compile time.
std::shared_ptr<const void> precompile_regex(std::string_view pattern, std::string* error);

namespace {

using TK = CelType::K;

Type type_of_value(const Val& v) {
  switch (v.kind()) {
    case ValKind::Null: return types::null_type();
    case ValKind::Bool: return types::boolean();
    case ValKind::Int: return types::integer();
    case ValKind::Uint: return types::uinteger();
    case ValKind::Double: return types::dbl();
    case ValKind::String: return types::string();
    case ValKind::Bytes: return types::bytes();
    case ValKind::Timestamp: return types::timestamp();
    case ValKind::Duration: return types::duration();
    case ValKind::Type: return types::type();
    default: return types::dyn();
  }
}

using Bindings = std::map<std::string, Type>;

bool unify(const Type& param, const Type& arg, Bindings& b) {
  if (param->kind == TK::Dyn || arg->kind == TK::Dyn) return true;
  if (param->kind == TK::Param) {
    auto it = b.find(param->name);
    if (it == b.end()) {
      b.emplace(param->name, arg);
      return true;
    }
    if (it->second->kind == TK::Dyn) {
      it->second = arg;
      return true;
    }
    Bindings inner;
    return unify(it->second, arg, inner);
  }
  if (arg->kind == TK::Param) return true;
  if (param->kind != arg->kind || param->name != arg->name) return false;
  for (std::size_t i = 0; i < param->params.size() && i < arg->params.size(); ++i) {
    if (!unify(param->params[i], arg->params[i], b)) return false;
  }
  return true;
}

Type substitute(const Type& t, const Bindings& b) {
  if (t->kind == TK::Param) {
    auto it = b.find(t->name);
    return it == b.end() ? types::dyn() : it->second;
  }
  if (t->kind == TK::List) return types::list(substitute(t->params[0], b));
  if (t->kind == TK::Map)
    return types::map(substitute(t->params[0], b), substitute(t->params[1], b));
  return t;
}

// The type that covers both: equal types stay, anything else becomes dyn.
Type join(const Type& a, const Type& b) {
  if (!a) return b;
  if (type_equal(a, b)) return a;
  return types::dyn();
}

bool is_numeric(const Type& t) {
  return t->kind == TK::Int || t->kind == TK::Uint || t->kind == TK::Double;
}

bool orderable(const Type& t) {
  switch (t->kind) {
    case TK::Int:
    case TK::Uint:
    case TK::Double:
    case TK::Bool:
    case TK::String:
    case TK::Bytes:
    case TK::Timestamp:
    case TK::Duration:
    case TK::Opaque: return true;
    default: return false;
  }
}

const std::map<std::string_view, std::string_view>& type_identifiers() {
  static const std::map<std::string_view, std::string_view> m = {
      {"int", "int"},
      {"uint", "uint"},
      {"double", "double"},
      {"bool", "bool"},
      {"string", "string"},
      {"bytes", "bytes"},
      {"list", "list"},
      {"map", "map"},
      {"null_type", "null_type"},
      {"type", "type"},
      {"google.protobuf.Timestamp", "google.protobuf.Timestamp"},
      {"google.protobuf.Duration", "google.protobuf.Duration"},
  };
  return m;
}

class Compiler {
 public:
  struct Scope {
    std::string name;
    int slot;
    Type type;
  };

  explicit Compiler(const Env& env) : env_(env), check_(!env.check_disabled()) {
    for (const auto& v : env.variables()) vars_[v.name] = v.type;
    // Container prefixes, longest first: "a.b." then "a." then "".
    std::string c = env.container_name();
    while (!c.empty()) {
      prefixes_.push_back(c + ".");
      std::size_t dot = c.rfind('.');
      c = dot == std::string::npos ? "" : c.substr(0, dot);
    }
    prefixes_.push_back("");
  }

  CheckResult run(Expr& root) {
    Type t = visit(root);
    return {t, max_slots_};
  }

 private:
  [[noreturn]] void fail(const Expr& e, std::string msg) {
    throw SyntaxError{e.offset, std::move(msg)};
  }

  Type visit(Expr& e) {
    switch (e.kind) {
      case ExprKind::Const: e.op = Op::Const; return type_of_value(e.value);
      case ExprKind::Ident: return visit_ident(e);
      case ExprKind::Select: return visit_select(e);
      case ExprKind::Call: return visit_call(e);
      case ExprKind::List: return visit_list(e);
      case ExprKind::Map: return visit_map(e);
      case ExprKind::Comprehension: return visit_comprehension(e);
      case ExprKind::Struct:
        if (check_)
          fail(e, "unknown message type '" + e.name + "' (message literals are not supported)");
        for (auto& a : e.args) visit(*a);
        e.op = Op::Fail;
        e.value = Val::error("message literals are not supported: " + e.name);
        return types::dyn();
    }
    return types::dyn();
  }

  const Scope* find_scope(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (it->name == name) return &*it;
    }
    return nullptr;
  }

  Type visit_ident(Expr& e) {
    if (!e.leading_dot) {
      if (const Scope* s = find_scope(e.name)) {
        e.op = Op::Slot;
        e.slot = s->slot;
        return s->type;
      }
    }
    return resolve_qualified(e, {e.name}, e.leading_dot);
  }

  // Collects `a.b.c` as {"a", "b", "c"} when the select chain is rooted at a plain
  // identifier that is not a comprehension variable.
  bool qualified_parts(const Expr& e, std::vector<std::string>* parts, bool* leading_dot) const {
    if (e.kind == ExprKind::Ident) {
      if (!e.leading_dot && find_scope(e.name) != nullptr) return false;
      parts->push_back(e.name);
      *leading_dot = e.leading_dot;
      return true;
    }
    if (e.kind == ExprKind::Select && !e.test_only && e.target) {
      if (!qualified_parts(*e.target, parts, leading_dot)) return false;
      parts->push_back(e.name);
      return true;
    }
    return false;
  }

  static std::string join_parts(const std::vector<std::string>& parts, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0) out += '.';
      out += parts[i];
    }
    return out;
  }

  // Resolves the longest declared prefix of `parts` (within the container); the rest become
  // field selections. With checks off, every possibility is kept for run time.
  Type resolve_qualified(Expr& e, const std::vector<std::string>& parts, bool leading_dot) {
    std::vector<VarCandidate> candidates;
    for (std::size_t k = parts.size(); k >= 1; --k) {
      std::string prefix = join_parts(parts, k);
      std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(k), parts.end());
      for (const std::string& p : prefixes_) {
        if (leading_dot && !p.empty()) continue;
        std::string name = p + prefix;
        auto it = vars_.find(name);
        if (it != vars_.end()) {
          become_var(e, {VarCandidate{name, rest}}, join_parts(parts, parts.size()));
          Type t = it->second;
          for (const auto& f : rest) t = select_type(e, t, f);
          return t;
        }
        if (k == parts.size() && rest.empty()) {
          auto ti = type_identifiers().find(name);
          if (ti != type_identifiers().end()) {
            become_const(e, Val::type(ti->second));
            return types::type();
          }
        }
        candidates.push_back(VarCandidate{name, rest});
      }
    }
    std::string full = join_parts(parts, parts.size());
    if (check_) {
      std::string msg = "undeclared reference to '" + full + "'";
      if (!env_.container_name().empty()) msg += " (in container '" + env_.container_name() + "')";
      if (vars_.empty()) {
        msg += "; no variables are declared";
      } else {
        msg += "; declared variables:";
        for (const auto& [name, t] : vars_) msg += " " + name;
      }
      fail(e, msg);
    }
    become_var(e, std::move(candidates), full);
    return types::dyn();
  }

  static void become_var(Expr& e, std::vector<VarCandidate> candidates, std::string name) {
    e.op = Op::Var;
    e.candidates = std::move(candidates);
    e.name = std::move(name);
    e.target.reset();
  }
  static void become_const(Expr& e, Val v) {
    e.op = Op::Const;
    e.value = std::move(v);
  }

  Type select_type(const Expr& e, const Type& t, const std::string& field) {
    switch (t->kind) {
      case TK::Map: return t->params[1];
      case TK::Dyn: return types::dyn();
      default:
        if (check_)
          fail(e, "type '" + type_to_string(t) + "' has no field '" + field +
                      "' (field selection needs a map)");
        return types::dyn();
    }
  }

  Type visit_select(Expr& e) {
    if (!e.test_only) {
      std::vector<std::string> parts;
      bool leading_dot = false;
      if (qualified_parts(e, &parts, &leading_dot)) {
        // Errors about a qualified name point at its first character.
        const Expr* root = &e;
        while (root->target) root = root->target.get();
        e.offset = root->offset;
        return resolve_qualified(e, parts, leading_dot);
      }
    }
    Type t = visit(*e.target);
    if (e.test_only) {
      e.op = Op::Has;
      if (check_ && t->kind != TK::Map && t->kind != TK::Dyn) {
        fail(e, "has() needs a map but '" + e.name + "' is selected from " + type_to_string(t));
      }
      return types::boolean();
    }
    e.op = Op::Select;
    Type r = select_type(e, t, e.name);
    fold(e);
    return r;
  }

  Type visit_list(Expr& e) {
    Type elem;
    for (auto& a : e.args) elem = join(elem, visit(*a));
    e.op = Op::List;
    fold(e);
    return types::list(elem ? elem : types::dyn());
  }

  Type visit_map(Expr& e) {
    Type key, value;
    for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
      Type kt = visit(*e.args[i]);
      if (check_ && kt->kind != TK::Dyn && kt->kind != TK::Int && kt->kind != TK::Uint &&
          kt->kind != TK::Bool && kt->kind != TK::String) {
        fail(*e.args[i], "map keys must be int, uint, bool or string, not " + type_to_string(kt));
      }
      key = join(key, kt);
      value = join(value, visit(*e.args[i + 1]));
    }
    e.op = Op::Map;
    fold(e);
    return types::map(key ? key : types::dyn(), value ? value : types::dyn());
  }

  Type visit_comprehension(Expr& e) {
    Type range = visit(*e.args[0]);
    Type elem;
    switch (range->kind) {
      case TK::List: elem = range->params[0]; break;
      case TK::Map: elem = range->params[0]; break;
      case TK::Dyn: elem = types::dyn(); break;
      default:
        if (check_)
          fail(*e.args[0], e.name + "() needs a list or map, not " + type_to_string(range));
        elem = types::dyn();
    }
    int slot = next_slot_++;
    max_slots_ = std::max(max_slots_, next_slot_);
    scopes_.push_back({e.iter_var, slot, elem});
    Type step = visit(*e.args[1]);
    Type transform = e.args.size() > 2 ? visit(*e.args[2]) : nullptr;
    scopes_.pop_back();
    --next_slot_;
    e.op = Op::Comprehension;
    e.slot = slot;
    bool predicate = e.macro != MacroKind::Map;
    if (check_ && predicate && step->kind != TK::Bool && step->kind != TK::Dyn) {
      fail(*e.args[1], e.name + "() needs a bool condition, not " + type_to_string(step));
    }
    switch (e.macro) {
      case MacroKind::All:
      case MacroKind::Exists:
      case MacroKind::ExistsOne: return types::boolean();
      case MacroKind::Map: return types::list(step);
      case MacroKind::MapFilter: return types::list(transform);
      case MacroKind::Filter: return types::list(elem);
    }
    return types::dyn();
  }

  static std::string arg_types(const std::vector<Type>& ts) {
    std::string s = "(";
    for (std::size_t i = 0; i < ts.size(); ++i) {
      if (i > 0) s += ", ";
      s += type_to_string(ts[i]);
    }
    return s + ")";
  }

  Type visit_call(Expr& e) {
    static const std::map<std::string_view, Op> kOps = {
        {"_&&_", Op::And}, {"_||_", Op::Or}, {"!_", Op::Not}, {"_?_:_", Op::Cond},
        {"_==_", Op::Eq},  {"_!=_", Op::Ne}, {"_<_", Op::Lt}, {"_<=_", Op::Le},
        {"_>_", Op::Gt},   {"_>=_", Op::Ge}, {"@in", Op::In}, {"_[_]", Op::Index}};
    if (!e.target) {
      auto op = kOps.find(e.name);
      if (op != kOps.end()) return visit_operator(e, op->second);
    }
    // `strings.quote(x)`: a namespaced global function, not a call on a variable.
    if (e.target) {
      std::vector<std::string> parts;
      bool leading_dot = false;
      if (qualified_parts(*e.target, &parts, &leading_dot)) {
        std::string qualified = join_parts(parts, parts.size()) + "." + e.name;
        bool is_var = false;
        for (std::size_t k = parts.size(); k >= 1 && !is_var; --k) {
          for (const auto& p : prefixes_)
            is_var = is_var || vars_.count(p + join_parts(parts, k)) > 0;
        }
        if (!is_var && find_function(qualified) != nullptr) {
          e.target.reset();
          e.name = qualified;
        }
      }
    }
    const bool receiver = e.target != nullptr;
    if (receiver) e.args.insert(e.args.begin(), std::move(e.target));
    std::vector<Type> ts;
    for (auto& a : e.args) ts.push_back(visit(*a));
    const FunctionDecl* fn = find_function(e.name);
    if (fn == nullptr) {
      if (check_) fail(e, "undeclared reference to function '" + e.name + "'");
      e.op = Op::Fail;
      e.value = Val::error("no such function '" + e.name + "'");
      return types::dyn();
    }
    e.op = Op::Call;
    e.fn = fn->impl;
    Type result;
    bool matched = false;
    for (const Overload& o : fn->overloads) {
      if (o.receiver != receiver || o.params.size() != ts.size()) continue;
      Bindings b;
      bool ok = true;
      for (std::size_t i = 0; i < ts.size() && ok; ++i) ok = unify(o.params[i], ts[i], b);
      if (!ok) continue;
      result = matched ? join(result, substitute(o.result, b)) : substitute(o.result, b);
      matched = true;
    }
    if (!matched) {
      if (check_) {
        fail(e, "found no matching overload for '" + e.name + "' applied to " +
                    (receiver ? type_to_string(ts[0]) + "." : std::string()) +
                    arg_types(receiver ? std::vector<Type>(ts.begin() + 1, ts.end()) : ts));
      }
      result = types::dyn();
    }
    const bool regex_call = e.name == "matches" || e.name == "find" || e.name == "findAll";
    if (regex_call && e.args.size() >= 2 && e.args[1]->op == Op::Const &&
        e.args[1]->value.kind() == ValKind::String) {
      std::string error;
      e.aux = precompile_regex(e.args[1]->value.text(), &error);
      if (!e.aux) {
        if (check_) fail(*e.args[1], "invalid regular expression: " + error);
        e.op = Op::Fail;
        e.value = Val::error("invalid regular expression: " + error);
        return types::boolean();
      }
    }
    fold(e);
    return result;
  }

  Type visit_operator(Expr& e, Op op) {
    std::vector<Type> ts;
    for (auto& a : e.args) ts.push_back(visit(*a));
    e.op = op;
    auto bad = [&]() {
      if (check_)
        fail(e, "found no matching overload for '" + e.name + "' applied to " + arg_types(ts));
    };
    auto boolish = [](const Type& t) { return t->kind == TK::Bool || t->kind == TK::Dyn; };
    Type result = types::boolean();
    switch (op) {
      case Op::And:
      case Op::Or:
        if (!boolish(ts[0]) || !boolish(ts[1])) bad();
        break;
      case Op::Not:
        if (!boolish(ts[0])) bad();
        break;
      case Op::Cond:
        if (!boolish(ts[0])) bad();
        result = join(ts[1], ts[2]);
        break;
      case Op::Eq:
      case Op::Ne: break;
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge: {
        const Type &a = ts[0], &b = ts[1];
        bool ok = is_dyn(a) || is_dyn(b) || (is_numeric(a) && is_numeric(b)) ||
                  (orderable(a) && type_equal(a, b));
        if (!ok) bad();
        break;
      }
      case Op::In: {
        const Type& c = ts[1];
        if (c->kind != TK::List && c->kind != TK::Map && c->kind != TK::Dyn) bad();
        break;
      }
      case Op::Index: {
        const Type& c = ts[0];
        const Type& k = ts[1];
        if (c->kind == TK::List) {
          if (k->kind != TK::Int && k->kind != TK::Uint && k->kind != TK::Dyn) bad();
          result = c->params[0];
        } else if (c->kind == TK::Map) {
          result = c->params[1];
        } else {
          if (c->kind != TK::Dyn) bad();
          result = types::dyn();
        }
        break;
      }
      default: break;
    }
    fold(e);
    return result;
  }

  // Evaluates a node whose operands are all constants, keeping the operands alive (the
  // folded value may borrow from them). Errors are left for evaluation time.
  void fold(Expr& e) {
    if (e.op == Op::Fail || e.op == Op::Const) return;
    if (e.target && e.target->op != Op::Const) return;
    for (const auto& a : e.args) {
      if (a->op != Op::Const) return;
    }
    EvalContext ctx;
    ctx.cost_limit = 1000000;
    Val v;
    try {
      v = evaluate_expr(e, ctx);
    } catch (const CostLimitExceeded&) {
      return;
    } catch (const core::InvalidInput&) {
      return;  // left for evaluation, which reports it as an error value
    }
    if (v.is_error()) return;
    e.value = std::move(v);
    e.op = Op::Const;
  }

  const Env& env_;
  bool check_;
  std::map<std::string, Type> vars_;
  std::vector<std::string> prefixes_;
  std::vector<Scope> scopes_;
  int next_slot_ = 0;
  int max_slots_ = 0;
};

}  // namespace

CheckResult check_expression(Expr& root, const Env& env) {
  Compiler c(env);
  return c.run(root);
}

}  // namespace gpufleet::cel
