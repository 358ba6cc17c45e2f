// Arithmetic, size, string predicates, conversions and type(): the CEL standard library.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cel/eval_context.h"
#include "cel/functions.h"
#include "core/utf8.h"

namespace gpufleet::cel {

Val no_such_overload(std::string_view function, const Val* args, std::size_t n) {
  std::string msg = "no matching overload for '" + std::string(function) + "' applied to (";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) msg += ", ";
    msg += args[i].type_name();
  }
  return Val::error(msg + ")");
}

Val no_such_key(const Val& key) {
  std::string k =
      key.kind() == ValKind::String ? "'" + std::string(key.text()) + "'" : key.debug_string();
  return Val::error("no such key: " + k);
}

Val no_such_field(std::string_view field) {
  return Val::error("no such key: '" + std::string(field) + "'");
}

namespace {

using K = ValKind;

Val overflow(std::string_view op) { return Val::error("integer overflow in " + std::string(op)); }

Val add_timestamp(const Val& t, std::chrono::nanoseconds d) {
  auto r = t.as_timestamp().try_add(d);
  if (!r) return Val::error("timestamp out of range");
  return Val::timestamp(*r);
}

Val add_durations(std::chrono::nanoseconds x, std::chrono::nanoseconds y) {
  std::int64_t r;
  if (__builtin_add_overflow(x.count(), y.count(), &r)) return Val::error("duration out of range");
  return Val::duration(std::chrono::nanoseconds(r));
}

Val fn_add(EvalContext& ctx, const Val* a, std::size_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind() == y.kind()) {
    switch (x.kind()) {
      case K::Int: {
        std::int64_t r;
        if (__builtin_add_overflow(x.as_int(), y.as_int(), &r)) return overflow("addition");
        return Val::integer(r);
      }
      case K::Uint: {
        std::uint64_t r;
        if (__builtin_add_overflow(x.as_uint(), y.as_uint(), &r)) return overflow("addition");
        return Val::uinteger(r);
      }
      case K::Double: return Val::dbl(x.as_double() + y.as_double());
      case K::String:
      case K::Bytes: {
        ctx.charge((x.size() + y.size()) / 16);
        std::string s;
        s.reserve(x.size() + y.size());
        s.append(x.text());
        s.append(y.text());
        return x.kind() == K::String ? Val::string(std::move(s)) : Val::bytes(std::move(s));
      }
      case K::List: {
        ctx.charge((x.size() + y.size()) / 8);
        std::vector<Val> items;
        items.reserve(x.size() + y.size());
        for (std::size_t i = 0; i < x.size(); ++i) items.push_back(x.list_at(i));
        for (std::size_t i = 0; i < y.size(); ++i) items.push_back(y.list_at(i));
        return Val::list(std::move(items));
      }
      case K::Duration: return add_durations(x.as_duration(), y.as_duration());
      default: break;
    }
  }
  if (x.kind() == K::Timestamp && y.kind() == K::Duration) return add_timestamp(x, y.as_duration());
  if (x.kind() == K::Duration && y.kind() == K::Timestamp) return add_timestamp(y, x.as_duration());
  return no_such_overload("_+_", a, n);
}

Val fn_sub(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind() == y.kind()) {
    switch (x.kind()) {
      case K::Int: {
        std::int64_t r;
        if (__builtin_sub_overflow(x.as_int(), y.as_int(), &r)) return overflow("subtraction");
        return Val::integer(r);
      }
      case K::Uint: {
        std::uint64_t r;
        if (__builtin_sub_overflow(x.as_uint(), y.as_uint(), &r)) return overflow("subtraction");
        return Val::uinteger(r);
      }
      case K::Double: return Val::dbl(x.as_double() - y.as_double());
      case K::Duration: {
        std::int64_t r;
        if (__builtin_sub_overflow(x.as_duration().count(), y.as_duration().count(), &r))
          return Val::error("duration out of range");
        return Val::duration(std::chrono::nanoseconds(r));
      }
      case K::Timestamp: {
        auto r = x.as_timestamp().try_since(y.as_timestamp());
        if (!r) return Val::error("duration out of range");
        return Val::duration(*r);
      }
      default: break;
    }
  }
  if (x.kind() == K::Timestamp && y.kind() == K::Duration) {
    // -INT64_MIN overflows; that duration subtracted from any timestamp leaves the range.
    if (y.as_duration() == std::chrono::nanoseconds::min())
      return Val::error("timestamp out of range");
    return add_timestamp(x, -y.as_duration());
  }
  return no_such_overload("_-_", a, n);
}

Val fn_mul(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind() == y.kind()) {
    switch (x.kind()) {
      case K::Int: {
        std::int64_t r;
        if (__builtin_mul_overflow(x.as_int(), y.as_int(), &r)) return overflow("multiplication");
        return Val::integer(r);
      }
      case K::Uint: {
        std::uint64_t r;
        if (__builtin_mul_overflow(x.as_uint(), y.as_uint(), &r)) return overflow("multiplication");
        return Val::uinteger(r);
      }
      case K::Double: return Val::dbl(x.as_double() * y.as_double());
      default: break;
    }
  }
  return no_such_overload("_*_", a, n);
}

Val fn_div(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind() == y.kind()) {
    switch (x.kind()) {
      case K::Int:
        if (y.as_int() == 0) return Val::error("division by zero");
        if (x.as_int() == std::numeric_limits<std::int64_t>::min() && y.as_int() == -1)
          return overflow("division");
        return Val::integer(x.as_int() / y.as_int());
      case K::Uint:
        if (y.as_uint() == 0) return Val::error("division by zero");
        return Val::uinteger(x.as_uint() / y.as_uint());
      case K::Double: return Val::dbl(x.as_double() / y.as_double());
      default: break;
    }
  }
  return no_such_overload("_/_", a, n);
}

Val fn_mod(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  const Val& y = a[1];
  if (x.kind() == y.kind()) {
    switch (x.kind()) {
      case K::Int:
        if (y.as_int() == 0) return Val::error("modulus by zero");
        if (x.as_int() == std::numeric_limits<std::int64_t>::min() && y.as_int() == -1)
          return overflow("modulus");
        return Val::integer(x.as_int() % y.as_int());
      case K::Uint:
        if (y.as_uint() == 0) return Val::error("modulus by zero");
        return Val::uinteger(x.as_uint() % y.as_uint());
      default: break;
    }
  }
  return no_such_overload("_%_", a, n);
}

Val fn_neg(EvalContext&, const Val* a, std::size_t n) {
  switch (a[0].kind()) {
    case K::Int:
      if (a[0].as_int() == std::numeric_limits<std::int64_t>::min()) return overflow("negation");
      return Val::integer(-a[0].as_int());
    case K::Double: return Val::dbl(-a[0].as_double());
    default: return no_such_overload("-_", a, n);
  }
}

Val fn_size(EvalContext&, const Val* a, std::size_t n) {
  switch (a[0].kind()) {
    case K::String:
      return Val::integer(static_cast<std::int64_t>(core::code_point_count(a[0].text())));
    case K::Bytes:
    case K::List:
    case K::Map: return Val::integer(static_cast<std::int64_t>(a[0].size()));
    default: return no_such_overload("size", a, n);
  }
}

bool two_strings(const Val* a, std::size_t n) {
  return n == 2 && a[0].kind() == K::String && a[1].kind() == K::String;
}

Val fn_contains(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!two_strings(a, n)) return no_such_overload("contains", a, n);
  ctx.charge(a[0].size() / 8);
  return Val::boolean(a[0].text().find(a[1].text()) != std::string_view::npos);
}
Val fn_starts_with(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!two_strings(a, n)) return no_such_overload("startsWith", a, n);
  ctx.charge(a[1].size() / 8);
  return Val::boolean(a[0].text().substr(0, a[1].size()) == a[1].text());
}
Val fn_ends_with(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!two_strings(a, n)) return no_such_overload("endsWith", a, n);
  ctx.charge(a[1].size() / 8);
  std::string_view s = a[0].text(), suf = a[1].text();
  return Val::boolean(s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf);
}

template <typename T>
bool parse_whole(std::string_view s, T* out) {
  if (s.empty()) return false;
  std::string_view digits = s;
  if constexpr (std::is_signed_v<T>) {
    if (digits[0] == '+') digits.remove_prefix(1);
  }
  auto res = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
  return res.ec == std::errc() && res.ptr == digits.data() + digits.size();
}

Val fn_int(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  switch (x.kind()) {
    case K::Int: return x;
    case K::Uint:
      if (x.as_uint() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return Val::error("int() range error: " + x.debug_string());
      return Val::integer(static_cast<std::int64_t>(x.as_uint()));
    case K::Double: {
      double d = x.as_double();
      if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
        return Val::error("int() range error: " + x.debug_string());
      return Val::integer(static_cast<std::int64_t>(d));
    }
    case K::String: {
      std::int64_t v;
      if (!parse_whole(x.text(), &v))
        return Val::error("int() cannot convert '" + std::string(x.text()) + "'");
      return Val::integer(v);
    }
    case K::Timestamp: return Val::integer(x.seconds());
    default: return no_such_overload("int", a, n);
  }
}

Val fn_uint(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  switch (x.kind()) {
    case K::Uint: return x;
    case K::Int:
      if (x.as_int() < 0) return Val::error("uint() range error: " + x.debug_string());
      return Val::uinteger(static_cast<std::uint64_t>(x.as_int()));
    case K::Double: {
      double d = x.as_double();
      if (!(d >= 0 && d < 18446744073709551616.0))
        return Val::error("uint() range error: " + x.debug_string());
      return Val::uinteger(static_cast<std::uint64_t>(d));
    }
    case K::String: {
      std::uint64_t v;
      if (!parse_whole(x.text(), &v))
        return Val::error("uint() cannot convert '" + std::string(x.text()) + "'");
      return Val::uinteger(v);
    }
    default: return no_such_overload("uint", a, n);
  }
}

Val fn_double(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  switch (x.kind()) {
    case K::Double: return x;
    case K::Int: return Val::dbl(static_cast<double>(x.as_int()));
    case K::Uint: return Val::dbl(static_cast<double>(x.as_uint()));
    case K::String: {
      std::string s(x.text());
      if (s == "NaN") return Val::dbl(std::nan(""));
      if (s == "Infinity" || s == "+Infinity") return Val::dbl(HUGE_VAL);
      if (s == "-Infinity") return Val::dbl(-HUGE_VAL);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() ||
          std::isspace(static_cast<unsigned char>(s[0]))) {
        return Val::error("double() cannot convert '" + s + "'");
      }
      return Val::dbl(d);
    }
    default: return no_such_overload("double", a, n);
  }
}

Val fn_string(EvalContext&, const Val* a, std::size_t n) {
  const Val& x = a[0];
  switch (x.kind()) {
    case K::String: return x;
    case K::Bytes:
      if (!core::is_valid_utf8(x.text())) return Val::error("string() invalid UTF-8 in bytes");
      return Val::string(std::string(x.text()));
    case K::Int:
    case K::Uint:
    case K::Double:
    case K::Bool:
    case K::Timestamp:
    case K::Duration: return Val::string(x.debug_string());
    default: return no_such_overload("string", a, n);
  }
}

Val fn_bytes(EvalContext&, const Val* a, std::size_t n) {
  switch (a[0].kind()) {
    case K::Bytes: return a[0];
    case K::String: return Val::bytes(std::string(a[0].text()));
    default: return no_such_overload("bytes", a, n);
  }
}

Val fn_bool(EvalContext&, const Val* a, std::size_t n) {
  switch (a[0].kind()) {
    case K::Bool: return a[0];
    case K::String: {
      std::string_view s = a[0].text();
      if (s == "1" || s == "t" || s == "true" || s == "TRUE" || s == "True")
        return Val::boolean(true);
      if (s == "0" || s == "f" || s == "false" || s == "FALSE" || s == "False")
        return Val::boolean(false);
      return Val::error("bool() cannot convert '" + std::string(s) + "'");
    }
    default: return no_such_overload("bool", a, n);
  }
}

Val fn_dyn(EvalContext&, const Val* a, std::size_t) { return a[0]; }

Val fn_type(EvalContext&, const Val* a, std::size_t) { return Val::type(a[0].type_name()); }

}  // namespace

void register_core_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"_+_",
                 fn_add,
                 {"(int, int)->int", "(uint, uint)->uint", "(double, double)->double",
                  "(string, string)->string", "(bytes, bytes)->bytes",
                  "(list(A), list(A))->list(A)", "(timestamp, duration)->timestamp",
                  "(duration, timestamp)->timestamp", "(duration, duration)->duration"},
                 {}});
  out.push_back({"_-_",
                 fn_sub,
                 {"(int, int)->int", "(uint, uint)->uint", "(double, double)->double",
                  "(timestamp, timestamp)->duration", "(timestamp, duration)->timestamp",
                  "(duration, duration)->duration"},
                 {}});
  out.push_back(
      {"_*_", fn_mul, {"(int, int)->int", "(uint, uint)->uint", "(double, double)->double"}, {}});
  out.push_back(
      {"_/_", fn_div, {"(int, int)->int", "(uint, uint)->uint", "(double, double)->double"}, {}});
  out.push_back({"_%_", fn_mod, {"(int, int)->int", "(uint, uint)->uint"}, {}});
  out.push_back({"-_", fn_neg, {"(int)->int", "(double)->double"}, {}});
  out.push_back({"size",
                 fn_size,
                 {"*(string)->int", "*(bytes)->int", "*(list(A))->int", "*(map(A, B))->int"},
                 {}});
  out.push_back({"contains", fn_contains, {".(string, string)->bool"}, {}});
  out.push_back({"startsWith", fn_starts_with, {".(string, string)->bool"}, {}});
  out.push_back({"endsWith", fn_ends_with, {".(string, string)->bool"}, {}});
  out.push_back(
      {"int",
       fn_int,
       {"(int)->int", "(uint)->int", "(double)->int", "(string)->int", "(timestamp)->int"},
       {}});
  out.push_back(
      {"uint", fn_uint, {"(int)->uint", "(uint)->uint", "(double)->uint", "(string)->uint"}, {}});
  out.push_back({"double",
                 fn_double,
                 {"(int)->double", "(uint)->double", "(double)->double", "(string)->double"},
                 {}});
  out.push_back({"string",
                 fn_string,
                 {"(int)->string", "(uint)->string", "(double)->string", "(string)->string",
                  "(bytes)->string", "(bool)->string", "(timestamp)->string", "(duration)->string"},
                 {}});
  out.push_back({"bytes", fn_bytes, {"(string)->bytes", "(bytes)->bytes"}, {}});
  out.push_back({"bool", fn_bool, {"(bool)->bool", "(string)->bool"}, {}});
  out.push_back({"dyn", fn_dyn, {"(A)->dyn"}, {}});
  out.push_back({"type", fn_type, {"(A)->type"}, {}});
}

}  // namespace gpufleet::cel
