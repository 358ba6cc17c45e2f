#include "cel/eval.h"

#include <cmath>

#include "cel/cel.h"

namespace gpufleet::cel {
namespace {

using K = ValKind;

// Small argument buffer: calls with up to 4 arguments evaluate without allocating.
class Args {
 public:
  explicit Args(std::size_t n) : n_(n) {
    if (n > kInline) heap_.resize(n);
  }
  Val* data() { return n_ > kInline ? heap_.data() : inline_; }
  std::size_t size() const { return n_; }

 private:
  static constexpr std::size_t kInline = 4;
  std::size_t n_;
  Val inline_[kInline];
  std::vector<Val> heap_;
};

Val select_field(const Val& target, std::string_view field) {
  if (target.kind() == K::Map) {
    Val out;
    if (target.map_find_string(field, &out)) return out;
    return no_such_field(field);
  }
  if (target.is_error()) return target;
  return Val::error("type '" + std::string(target.type_name()) + "' has no field '" +
                    std::string(field) + "' (field selection needs a map)");
}

Val eval_var(const Expr& e, EvalContext& ctx) {
  for (const VarCandidate& c : e.candidates) {
    const Val* bound = ctx.activation != nullptr ? ctx.activation->find(c.name) : nullptr;
    if (bound == nullptr) continue;
    if (c.fields.empty()) return *bound;
    Val cur = select_field(*bound, c.fields[0]);
    for (std::size_t i = 1; i < c.fields.size() && !cur.is_error(); ++i) {
      cur = select_field(cur, c.fields[i]);
    }
    return cur;
  }
  return Val::error("undeclared reference to '" + e.name + "'");
}

Val index_value(const Val& t, const Val& key) {
  if (t.kind() == K::List) {
    std::int64_t i;
    switch (key.kind()) {
      case K::Int: i = key.as_int(); break;
      case K::Uint:
        i = key.as_uint() > static_cast<std::uint64_t>(INT64_MAX)
                ? -1
                : static_cast<std::int64_t>(key.as_uint());
        break;
      case K::Double: {
        double d = key.as_double();
        if (!(d >= -1e18 && d <= 1e18) || std::trunc(d) != d) {
          return Val::error("invalid list index " + key.debug_string() +
                            " (must be a whole number)");
        }
        i = static_cast<std::int64_t>(d);
        break;
      }
      default: {
        Val args[2] = {t, key};
        return no_such_overload("_[_]", args, 2);
      }
    }
    if (i < 0 || static_cast<std::uint64_t>(i) >= t.size()) {
      return Val::error("index out of range: " + std::to_string(i) + " (list size " +
                        std::to_string(t.size()) + ")");
    }
    return t.list_at(static_cast<std::size_t>(i));
  }
  if (t.kind() == K::Map) {
    Val out;
    if (t.map_find(key, &out)) return out;
    return no_such_key(key);
  }
  Val args[2] = {t, key};
  return no_such_overload("_[_]", args, 2);
}

Val eval_in(const Val& x, const Val& coll, EvalContext& ctx) {
  if (coll.kind() == K::List) {
    ctx.charge(coll.size());  // a linear scan
    for (std::size_t i = 0, n = coll.size(); i < n; ++i) {
      if (equals(x, coll.list_at(i))) return Val::boolean(true);
    }
    return Val::boolean(false);
  }
  if (coll.kind() == K::Map) {
    Val out;
    return Val::boolean(coll.map_find(x, &out));
  }
  Val args[2] = {x, coll};
  return no_such_overload("@in", args, 2);
}

Val eval_logic(const Expr& e, EvalContext& ctx, bool is_and) {
  // Commutative absorption: `false && error` is false, `true || error` is true.
  Val l = evaluate_expr(*e.args[0], ctx);
  if (l.is_bool() && l.as_bool() != is_and) return l;
  Val r = evaluate_expr(*e.args[1], ctx);
  if (r.is_bool() && r.as_bool() != is_and) return r;
  if (l.is_bool() && r.is_bool()) return l;
  if (l.is_error()) return l;
  if (r.is_error()) return r;
  Val args[2] = {l, r};
  return no_such_overload(is_and ? "_&&_" : "_||_", args, 2);
}

Val eval_compare(const Expr& e, EvalContext& ctx) {
  Val l = evaluate_expr(*e.args[0], ctx);
  if (l.is_error()) return l;
  Val r = evaluate_expr(*e.args[1], ctx);
  if (r.is_error()) return r;
  switch (e.op) {
    case Op::Eq: return Val::boolean(equals(l, r));
    case Op::Ne: return Val::boolean(!equals(l, r));
    case Op::In: return eval_in(l, r, ctx);
    default: break;
  }
  int c = compare(l, r);
  if (c == 3) {
    Val args[2] = {l, r};
    return no_such_overload(e.name, args, 2);
  }
  if (c == 2) return Val::boolean(false);
  switch (e.op) {
    case Op::Lt: return Val::boolean(c < 0);
    case Op::Le: return Val::boolean(c <= 0);
    case Op::Gt: return Val::boolean(c > 0);
    default: return Val::boolean(c >= 0);
  }
}

Val eval_call(const Expr& e, EvalContext& ctx) {
  Args args(e.args.size());
  Val* a = args.data();
  for (std::size_t i = 0; i < e.args.size(); ++i) {
    a[i] = evaluate_expr(*e.args[i], ctx);
    if (a[i].is_error()) return a[i];
  }
  ctx.aux = e.aux.get();
  return e.fn(ctx, a, e.args.size());
}

Val eval_comprehension(const Expr& e, EvalContext& ctx) {
  Val range = evaluate_expr(*e.args[0], ctx);
  if (range.is_error()) return range;
  const bool is_map = range.kind() == K::Map;
  if (!is_map && range.kind() != K::List) {
    return Val::error(e.name + "() needs a list or map but was given " +
                      std::string(range.type_name()));
  }
  const std::size_t n = range.size();
  Val& slot = ctx.slots[e.slot];
  Val first_error;
  bool have_error = false;
  std::int64_t count = 0;
  std::vector<Val> out;
  const Expr& step = *e.args[1];
  for (std::size_t i = 0; i < n; ++i) {
    ctx.charge(1);
    slot = is_map ? range.map_key_at(i) : range.list_at(i);
    Val r = evaluate_expr(step, ctx);
    switch (e.macro) {
      case MacroKind::All:
      case MacroKind::Exists: {
        const bool stop_on = e.macro == MacroKind::Exists;
        if (r.is_bool()) {
          if (r.as_bool() == stop_on) return r;
        } else if (!have_error) {
          first_error = r.is_error() ? r
                                     : Val::error(e.name + "() predicate must be a bool, got " +
                                                  std::string(r.type_name()));
          have_error = true;
        }
        break;
      }
      case MacroKind::ExistsOne:
        if (r.is_error()) return r;
        if (!r.is_bool()) return Val::error("exists_one() predicate must be a bool");
        if (r.as_bool()) ++count;
        break;
      case MacroKind::Map:
        if (r.is_error()) return r;
        out.push_back(std::move(r));
        break;
      case MacroKind::MapFilter:
      case MacroKind::Filter:
        if (r.is_error()) return r;
        if (!r.is_bool())
          return Val::error(e.name + "() predicate must be a bool, got " +
                            std::string(r.type_name()));
        if (r.as_bool()) {
          if (e.macro == MacroKind::Filter) {
            out.push_back(slot);
          } else {
            Val t = evaluate_expr(*e.args[2], ctx);
            if (t.is_error()) return t;
            out.push_back(std::move(t));
          }
        }
        break;
    }
  }
  switch (e.macro) {
    case MacroKind::All: return have_error ? first_error : Val::boolean(true);
    case MacroKind::Exists: return have_error ? first_error : Val::boolean(false);
    case MacroKind::ExistsOne: return Val::boolean(count == 1);
    default: return Val::list(std::move(out));
  }
}

}  // namespace

Val make_map(std::vector<std::pair<Val, Val>> entries) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Val& k = entries[i].first;
    if (!is_valid_map_key(k)) {
      return Val::error("unsupported map key type " + std::string(k.type_name()) +
                        " (keys must be int, uint, bool or string)");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (equals(entries[j].first, k)) return Val::error("repeated map key: " + k.debug_string());
    }
  }
  return Val::map(std::move(entries));
}

Val evaluate_expr(const Expr& e, EvalContext& ctx) {
  ctx.charge(1);
  switch (e.op) {
    case Op::Const: return e.value.program_view();
    case Op::Var: return eval_var(e, ctx);
    case Op::Slot: return ctx.slots[e.slot];
    case Op::Select: return select_field(evaluate_expr(*e.target, ctx), e.name);
    case Op::Has: {
      Val t = evaluate_expr(*e.target, ctx);
      if (t.kind() == K::Map) {
        Val out;
        return Val::boolean(t.map_find_string(e.name, &out));
      }
      if (t.is_error()) return t;
      return Val::error("has() needs a map but was given " + std::string(t.type_name()));
    }
    case Op::Index: {
      Val t = evaluate_expr(*e.args[0], ctx);
      if (t.is_error()) return t;
      Val k = evaluate_expr(*e.args[1], ctx);
      if (k.is_error()) return k;
      return index_value(t, k);
    }
    case Op::And: return eval_logic(e, ctx, true);
    case Op::Or: return eval_logic(e, ctx, false);
    case Op::Not: {
      Val v = evaluate_expr(*e.args[0], ctx);
      if (v.is_bool()) return Val::boolean(!v.as_bool());
      if (v.is_error()) return v;
      return no_such_overload("!_", &v, 1);
    }
    case Op::Cond: {
      Val c = evaluate_expr(*e.args[0], ctx);
      if (c.is_bool()) return evaluate_expr(*e.args[c.as_bool() ? 1 : 2], ctx);
      if (c.is_error()) return c;
      return no_such_overload("_?_:_", &c, 1);
    }
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::In: return eval_compare(e, ctx);
    case Op::Call: return eval_call(e, ctx);
    case Op::List: {
      std::vector<Val> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) {
        items.push_back(evaluate_expr(*a, ctx));
        if (items.back().is_error()) return items.back();
      }
      return Val::list(std::move(items));
    }
    case Op::Map: {
      std::vector<std::pair<Val, Val>> entries;
      entries.reserve(e.args.size() / 2);
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Val k = evaluate_expr(*e.args[i], ctx);
        if (k.is_error()) return k;
        Val v = evaluate_expr(*e.args[i + 1], ctx);
        if (v.is_error()) return v;
        entries.emplace_back(std::move(k), std::move(v));
      }
      ctx.charge(entries.size() * entries.size() / 16);
      return make_map(std::move(entries));
    }
    case Op::Comprehension: return eval_comprehension(e, ctx);
    case Op::Fail: return e.value;
    case Op::Unresolved: break;
  }
  return Val::error("internal error: expression node was not compiled");
}

}  // namespace gpufleet::cel
