#include "cel/cost.h"

#include <algorithm>
#include <limits>
#include <set>

#include "cel/ast.h"
#include "cel/cel.h"
#include "cel/compiled.h"
#include "core/text_position.h"
#include "core/value.h"

namespace gpufleet::cel {

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::uint64_t add(std::uint64_t a, std::uint64_t b) { return a > kMax - b ? kMax : a + b; }
std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kMax : r;
}

ShapePtr make(Shape s) { return std::make_shared<const Shape>(std::move(s)); }

// The shape that covers both (the larger bound of each part).
ShapePtr merge(const ShapePtr& a, const ShapePtr& b) {
  if (!a || !b) return nullptr;  // undeclared wins
  if (a == b) return a;
  Shape s;
  s.max_size = std::max(a->max_size, b->max_size);
  s.is_list = a->is_list && b->is_list;
  s.elem = merge(a->elem, b->elem);
  s.key = merge(a->key, b->key);
  s.rest_declared = a->rest_declared && b->rest_declared;
  // A field only one side names takes the other side's undeclared-field shape.
  std::set<std::string> names;
  for (const auto& [n, _] : a->fields) names.insert(n);
  for (const auto& [n, _] : b->fields) names.insert(n);
  for (const auto& n : names) {
    auto fa = a->fields.find(n), fb = b->fields.find(n);
    const bool closed_a = a->rest_declared && !a->elem, closed_b = b->rest_declared && !b->elem;
    if (fa == a->fields.end() && closed_a) {
      s.fields[n] = fb->second;  // a has no such field
    } else if (fb == b->fields.end() && closed_b) {
      s.fields[n] = fa->second;
    } else {
      ShapePtr x = fa != a->fields.end() ? fa->second : a->rest_declared ? a->elem : nullptr;
      ShapePtr y = fb != b->fields.end() ? fb->second : b->rest_declared ? b->elem : nullptr;
      s.fields[n] = merge(x, y);
    }
  }
  return make(std::move(s));
}

ShapePtr or_unbounded(const ShapePtr& s) { return s ? s : Shape::unbounded(); }

// The shape of a named field (or a constant map key) of a value of shape `s`.
ShapePtr field_of(const ShapePtr& s, std::string_view name) {
  if (!s) return Shape::unbounded();
  auto it = s->fields.find(name);
  if (it != s->fields.end()) return or_unbounded(it->second);
  // A closed object has no such field: selecting it is an error value, which costs nothing.
  if (!s->fields.empty() && s->rest_declared && !s->elem) return Shape::scalar();
  return or_unbounded(s->elem);
}

// The shape of any element (list) or value (map) of `s`.
ShapePtr any_value(const ShapePtr& s) {
  if (!s) return Shape::unbounded();
  if (s->fields.empty()) return or_unbounded(s->elem);
  if (!s->rest_declared) return Shape::unbounded();  // other fields are undeclared
  ShapePtr out = s->elem;
  bool have = out != nullptr;
  for (const auto& [_, f] : s->fields) {
    out = have ? merge(out, f) : f;
    have = true;
  }
  return or_unbounded(out);
}

// What a comprehension variable ranges over: list elements, or map keys.
ShapePtr iteration_var(const ShapePtr& s) {
  if (!s) return Shape::unbounded();
  if (s->is_list) return or_unbounded(s->elem);
  if (s->key) return s->key;
  if (!s->fields.empty() && s->rest_declared && !s->elem) {
    std::uint64_t longest = 0;
    for (const auto& [n, _] : s->fields) longest = std::max<std::uint64_t>(longest, n.size());
    return Shape::string(longest);
  }
  return Shape::unbounded();
}

ShapePtr shape_of_value(const Val& v) {
  switch (v.kind()) {
    case ValKind::String:
    case ValKind::Bytes: return Shape::string(v.size());
    case ValKind::List: {
      ShapePtr elem;
      for (std::size_t i = 0; i < v.size(); ++i) {
        ShapePtr e = shape_of_value(v.list_at(i));
        elem = i == 0 ? e : merge(elem, e);
      }
      return Shape::list(v.size(), elem ? elem : Shape::scalar());
    }
    case ValKind::Map: {
      ShapePtr key, value;
      for (std::size_t i = 0; i < v.size(); ++i) {
        ShapePtr k = shape_of_value(v.map_key_at(i));
        Val val;
        (void)v.map_find(v.map_key_at(i), &val);
        ShapePtr x = shape_of_value(val);
        key = i == 0 ? k : merge(key, k);
        value = i == 0 ? x : merge(value, x);
      }
      return Shape::map(v.size(), key ? key : Shape::scalar(), value ? value : Shape::scalar());
    }
    default: return Shape::scalar();
  }
}

std::uint64_t size_of(const ShapePtr& s) { return s ? s->max_size : Shape::kUnbounded; }

struct Info {
  std::uint64_t min = 1, max = 1;
  ShapePtr shape = Shape::scalar();
};

class Estimator {
 public:
  Estimator(const CompiledExpr& c, const Sizes& sizes) : c_(c), sizes_(sizes) {
    slots_.resize(static_cast<std::size_t>(std::max(c.slot_count, 0)) + 1);
  }

  CostEstimate run() {
    Info i = visit(*c_.root);
    CostEstimate out;
    out.min = i.min;
    out.max = i.max;
    out.costliest = hot_;
    return out;
  }

 private:
  static std::size_t leftmost(const Expr& e) {
    std::size_t at = e.offset;
    if (e.target) at = std::min(at, leftmost(*e.target));
    for (const auto& a : e.args) at = std::min(at, leftmost(*a));
    return at;
  }

  // The source of a call or macro `recv.name(...)`: from its leftmost operand through the
  // closing parenthesis.
  std::string text_of(const Expr& e) const {
    const std::string& src = c_.source;
    std::size_t from = leftmost(e), i = e.offset;
    while (i < src.size() && src[i] != '(') ++i;
    int depth = 0;
    char quote = 0;
    for (; i < src.size(); ++i) {
      char ch = src[i];
      if (quote != 0) {
        if (ch == '\\')
          ++i;
        else if (ch == quote)
          quote = 0;
      } else if (ch == '\'' || ch == '"') {
        quote = ch;
      } else if (ch == '(') {
        ++depth;
      } else if (ch == ')' && --depth == 0) {
        ++i;
        break;
      }
    }
    std::string t = src.substr(from, std::min(i, src.size()) - from);
    for (char& ch : t)
      if (ch == '\n' || ch == '\t') ch = ' ';
    if (t.size() > 80) t = t.substr(0, 77) + "...";
    return t;
  }

  void hotspot(const Expr& e, std::uint64_t cost, std::uint64_t range, const char* unit) {
    if (cost <= hot_.cost) return;
    core::TextPosition p = core::position_of(c_.source, leftmost(e));
    hot_.text = text_of(e);
    hot_.line = p.line;
    hot_.column = p.column;
    hot_.cost = cost;
    hot_.range = range;
    hot_.undeclared = range >= Shape::kUnbounded;
    hot_.unit = unit;
  }

  ShapePtr var_shape(const Expr& e) const {
    ShapePtr out;
    bool found = false;
    for (const VarCandidate& c : e.candidates) {
      ShapePtr s = sizes_.find(c.name);
      if (!s) continue;
      for (const auto& f : c.fields) s = field_of(s, f);
      out = found ? merge(out, s) : s;
      found = true;
    }
    return found ? or_unbounded(out) : Shape::unbounded();
  }

  Info visit(const Expr& e) {
    Info r;
    switch (e.op) {
      case Op::Const: r.shape = shape_of_value(e.value); return r;
      case Op::Var: r.shape = var_shape(e); return r;
      case Op::Slot: r.shape = or_unbounded(slots_[static_cast<std::size_t>(e.slot)]); return r;
      case Op::Select: {
        Info t = visit(*e.target);
        return {add(1, t.min), add(1, t.max), field_of(t.shape, e.name)};
      }
      case Op::Has: {
        Info t = visit(*e.target);
        return {add(1, t.min), add(1, t.max), Shape::scalar()};
      }
      case Op::Index: {
        Info t = visit(*e.args[0]), k = visit(*e.args[1]);
        const Expr& key = *e.args[1];
        ShapePtr s = key.op == Op::Const && key.value.kind() == ValKind::String
                         ? field_of(t.shape, key.value.text())
                         : any_value(t.shape);
        return {add(1, add(t.min, k.min)), add(1, add(t.max, k.max)), s};
      }
      case Op::And:
      case Op::Or: {
        Info l = visit(*e.args[0]), rr = visit(*e.args[1]);
        return {add(1, l.min), add(1, add(l.max, rr.max)), Shape::scalar()};
      }
      case Op::Not: {
        Info a = visit(*e.args[0]);
        return {add(1, a.min), add(1, a.max), Shape::scalar()};
      }
      case Op::Cond: {
        Info c = visit(*e.args[0]), a = visit(*e.args[1]), b = visit(*e.args[2]);
        return {add(1, add(c.min, std::min(a.min, b.min))),
                add(1, add(c.max, std::max(a.max, b.max))), merge(a.shape, b.shape)};
      }
      case Op::Eq:
      case Op::Ne:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge: {
        Info l = visit(*e.args[0]), rr = visit(*e.args[1]);
        return {add(1, add(l.min, rr.min)), add(1, add(l.max, rr.max)), Shape::scalar()};
      }
      case Op::In: {
        // A list membership test compares with each element (eval.cc charges the list size).
        Info l = visit(*e.args[0]), rr = visit(*e.args[1]);
        const std::uint64_t scan = size_of(rr.shape);
        if (scan > 64) hotspot(e, scan, scan, "list elements");
        return {add(1, add(l.min, rr.min)), add(1, add(add(l.max, rr.max), scan)), Shape::scalar()};
      }
      case Op::Call: return visit_call(e);
      case Op::List: {
        ShapePtr elem;
        for (std::size_t i = 0; i < e.args.size(); ++i) {
          Info a = visit(*e.args[i]);
          r.min = add(r.min, a.min);
          r.max = add(r.max, a.max);
          elem = i == 0 ? a.shape : merge(elem, a.shape);
        }
        r.shape = Shape::list(e.args.size(), e.args.empty() ? Shape::scalar() : or_unbounded(elem));
        return r;
      }
      case Op::Map: {
        Shape s;
        s.max_size = e.args.size() / 2;
        ShapePtr key, value;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Info k = visit(*e.args[i]), v = visit(*e.args[i + 1]);
          r.min = add(r.min, add(k.min, v.min));
          r.max = add(r.max, add(k.max, v.max));
          key = i == 0 ? k.shape : merge(key, k.shape);
          value = i == 0 ? v.shape : merge(value, v.shape);
        }
        const std::uint64_t n = e.args.size() / 2;
        r.min = add(r.min, n * n / 16);
        r.max = add(r.max, n * n / 16);
        s.key = n == 0 ? Shape::scalar() : or_unbounded(key);
        s.elem = n == 0 ? Shape::scalar() : or_unbounded(value);
        s.rest_declared = true;
        r.shape = make(std::move(s));
        return r;
      }
      case Op::Comprehension: return visit_comprehension(e);
      case Op::Fail:
      case Op::Unresolved: return r;
    }
    return r;
  }

  Info visit_comprehension(const Expr& e) {
    Info range = visit(*e.args[0]);
    const std::uint64_t n = size_of(range.shape);
    const ShapePtr iter = iteration_var(range.shape);
    const auto slot = static_cast<std::size_t>(e.slot);
    ShapePtr saved = slots_[slot];
    slots_[slot] = iter;
    Info step = visit(*e.args[1]);
    Info transform;
    transform.max = 0;
    if (e.args.size() > 2) transform = visit(*e.args[2]);
    slots_[slot] = saved;
    // Each iteration: eval.cc's charge(1), the step and (map with a filter) the transform.
    const std::uint64_t per = add(1, add(step.max, transform.max));
    const std::uint64_t loop = mul(n, per);
    hotspot(e, loop, n, "iterations");
    Info r{add(1, range.min), add(1, add(range.max, loop)), Shape::scalar()};
    switch (e.macro) {
      case MacroKind::All:
      case MacroKind::Exists:
      case MacroKind::ExistsOne: break;
      case MacroKind::Map: r.shape = Shape::list(n, step.shape); break;
      case MacroKind::MapFilter: r.shape = Shape::list(n, transform.shape); break;
      case MacroKind::Filter: r.shape = Shape::list(n, iter); break;
    }
    return r;
  }

  // Mirrors the charges the standard library makes (src/cel/stdlib/*.cc) with the operands'
  // largest sizes; results get the largest shape they can have.
  Info visit_call(const Expr& e) {
    std::vector<Info> a;
    a.reserve(e.args.size());
    Info r;
    for (const auto& arg : e.args) {
      a.push_back(visit(*arg));
      r.min = add(r.min, a.back().min);
      r.max = add(r.max, a.back().max);
    }
    auto sz = [&](std::size_t i) { return i < a.size() ? size_of(a[i].shape) : 0; };
    auto shape = [&](std::size_t i) { return i < a.size() ? a[i].shape : Shape::unbounded(); };
    std::uint64_t extra = 0;  // the function's own charge
    std::uint64_t proportional_to = 0;
    const std::string& f = e.name;
    ShapePtr out = Shape::scalar();
    if (f == "_+_") {
      const std::uint64_t n = add(sz(0), sz(1));
      extra = n / 8;  // list +: size/8; string +: length/16
      Shape s;
      s.max_size = n;
      s.is_list = shape(0)->is_list && shape(1)->is_list;
      s.elem = merge(shape(0)->elem, shape(1)->elem);
      out = make(std::move(s));
      proportional_to = n;
    } else if (f == "matches" || f == "find" || f == "contains") {
      extra = sz(0) / 8;
      proportional_to = sz(0);
      if (f == "find") out = Shape::string(sz(0));
    } else if (f == "findAll") {
      extra = add(sz(0) / 8, add(sz(0), 1));  // and 1 per match: at most one per byte, plus one
      proportional_to = sz(0);
      out = Shape::list(add(sz(0), 1), Shape::string(sz(0)));
    } else if (f == "startsWith" || f == "endsWith") {
      extra = sz(1) / 8;
    } else if (f == "indexOf" || f == "lastIndexOf") {
      extra = sz(0);  // a list: its size (text: /8; a shape may be either)
      proportional_to = sz(0);
    } else if (f == "replace") {
      // s/8, then 1 per replacement: at most one per byte plus one (an empty pattern).
      extra = add(sz(0) / 8, add(sz(0), 1));
      proportional_to = sz(0);
      out = Shape::string(add(sz(0), mul(add(sz(0), 1), sz(2))));
    } else if (f == "split") {
      extra = sz(0) / 8;
      proportional_to = sz(0);
      out = Shape::list(add(sz(0), 1), Shape::string(sz(0)));
    } else if (f == "join") {
      const std::uint64_t n = sz(0);
      const std::uint64_t len = add(mul(n, size_of(any_value(shape(0)))), mul(n, sz(1)));
      extra = len / 8;
      proportional_to = len;
      out = Shape::string(len);
    } else if (f == "format") {
      extra = sz(0);  // 1 per clause: fewer clauses than bytes of the format
      out = Shape::unbounded();
    } else if (f == "isSorted" || f == "sum" || f == "min" || f == "max") {
      extra = sz(0);
      proportional_to = sz(0);
      if (f == "min" || f == "max") out = any_value(shape(0));
    } else if (f == "slice") {
      extra = sz(0);
      proportional_to = sz(0);
      out = Shape::list(sz(0), any_value(shape(0)));
    } else if (f == "flatten") {
      const ShapePtr inner = any_value(shape(0));
      const std::uint64_t n = e.args.size() == 1
                                  ? mul(sz(0), std::max<std::uint64_t>(1, size_of(inner)))
                                  : Shape::kUnbounded;
      extra = n;
      proportional_to = n;
      out = Shape::list(n, e.args.size() == 1 ? any_value(inner) : nullptr);
    } else if (f == "distinct") {
      extra = mul(sz(0), sz(0)) / 16;
      proportional_to = sz(0);
      out = shape(0);
    } else if (f == "sort") {
      extra = mul(sz(0), 4);
      proportional_to = sz(0);
      out = shape(0);
    } else if (f == "reverse" || f == "lowerAscii" || f == "upperAscii" || f == "trim" ||
               f == "substring" || f == "dyn" || f == "bytes") {
      out = shape(0);
    } else if (f == "string") {
      out = Shape::string(std::max<std::uint64_t>(sz(0), 64));  // numbers, times: short
    } else if (f == "strings.quote") {
      out = Shape::string(add(mul(sz(0), 6), 2));  // \uXXXX per byte at worst, and quotes
    } else if (f == "charAt") {
      out = Shape::string(4);
    } else if (f == "_-_" || f == "_*_" || f == "_/_" || f == "_%_" || f == "-_" || f == "size" ||
               f == "int" || f == "uint" || f == "double" || f == "bool" || f == "type" ||
               f == "timestamp" || f == "duration" || f.starts_with("get") || f.starts_with("is") ||
               f.starts_with("as") || f == "compareTo" || f == "sign" || f == "major" ||
               f == "minor" || f == "patch" || f == "add" || f == "sub" || f == "quantity" ||
               f == "semver") {
      out = Shape::scalar();
    } else {
      out = Shape::unbounded();  // a function this estimator does not know: no bound
    }
    r.max = add(r.max, extra);
    r.shape = out;
    if (proportional_to > 64) hotspot(e, extra, proportional_to, "bytes or elements");
    return r;
  }

  const CompiledExpr& c_;
  const Sizes& sizes_;
  std::vector<ShapePtr> slots_;
  CostEstimate::Hotspot hot_;
};

std::string with_commas(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

}  // namespace

ShapePtr Shape::unbounded() {
  static const ShapePtr s = make(Shape{});
  return s;
}
ShapePtr Shape::scalar() {
  static const ShapePtr s = [] {
    Shape x;
    x.max_size = 0;
    return make(std::move(x));
  }();
  return s;
}
ShapePtr Shape::string(std::uint64_t max_bytes) {
  Shape s;
  s.max_size = max_bytes;
  return make(std::move(s));
}
ShapePtr Shape::list(std::uint64_t max_items, ShapePtr elem) {
  Shape s;
  s.max_size = max_items;
  s.is_list = true;
  s.elem = std::move(elem);
  return make(std::move(s));
}
ShapePtr Shape::map(std::uint64_t max_entries, ShapePtr key, ShapePtr value) {
  Shape s;
  s.max_size = max_entries;
  s.key = std::move(key);
  s.elem = std::move(value);
  s.rest_declared = true;
  return make(std::move(s));
}
ShapePtr Shape::object(std::vector<std::pair<std::string, ShapePtr>> fields) {
  Shape s;
  s.max_size = fields.size();
  for (auto& [n, f] : fields) s.fields[n] = std::move(f);
  s.rest_declared = true;
  return make(std::move(s));
}
ShapePtr Shape::object(std::vector<std::pair<std::string, ShapePtr>> fields, ShapePtr rest,
                       std::uint64_t max_entries) {
  Shape s;
  s.max_size = max_entries;
  for (auto& [n, f] : fields) s.fields[n] = std::move(f);
  s.rest_declared = rest != nullptr;
  s.elem = std::move(rest);
  return make(std::move(s));
}

ShapePtr Shape::of(const core::Value& v) {
  if (v.is_string()) return Shape::string(v.as_string().size());
  if (v.is_list()) {
    ShapePtr elem;
    for (const auto& e : v.as_list()) elem = elem ? merge(elem, Shape::of(e)) : Shape::of(e);
    return Shape::list(v.as_list().size(), elem ? elem : Shape::scalar());
  }
  if (v.is_map()) {
    std::vector<std::pair<std::string, ShapePtr>> fields;
    for (const auto& [k, x] : v.as_map()) fields.emplace_back(k, Shape::of(x));
    return Shape::object(std::move(fields));
  }
  return Shape::scalar();
}

Sizes& Sizes::variable(std::string name, ShapePtr shape) {
  vars_[std::move(name)] = std::move(shape);
  return *this;
}

ShapePtr Sizes::find(std::string_view name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second;
}

std::string CostEstimate::describe_costliest() const {
  if (costliest.text.empty()) return "";
  return "the costliest part is `" + costliest.text + "` at " + std::to_string(costliest.line) +
         ":" + std::to_string(costliest.column) + ": up to " + with_commas(costliest.range) + " " +
         costliest.unit + (costliest.undeclared ? " (no declared bound)" : "") + ", " +
         with_commas(costliest.cost) + " units";
}

CostEstimate estimate_cost(const Program& program, const Sizes& sizes) {
  if (!program.impl_) return {};
  return Estimator(*program.impl_, sizes).run();
}

}  // namespace gpufleet::cel
