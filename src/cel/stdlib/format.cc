// "template %s and %d".format([args]): the strings extension's printf-like formatting.
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "cel/eval_context.h"
#include "cel/functions.h"

namespace gpufleet::cel {
namespace {

using K = ValKind;

Val clause_error(const std::string& what) { return Val::error("error during formatting: " + what); }

std::string non_finite(double d) {
  if (std::isnan(d)) return "NaN";
  return d > 0 ? "Infinity" : "-Infinity";
}

std::string to_base(std::uint64_t v, unsigned base, bool upper) {
  if (v == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (v > 0) {
    out.insert(out.begin(), digits[v % base]);
    v /= base;
  }
  return out;
}

// Integer in a base, with a '-' for negative ints.
bool integer_text(const Val& v, unsigned base, bool upper, std::string* out) {
  if (v.kind() == K::Int) {
    std::int64_t i = v.as_int();
    std::uint64_t mag = i < 0 ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
    *out = (i < 0 ? "-" : "") + to_base(mag, base, upper);
    return true;
  }
  if (v.kind() == K::Uint) {
    *out = to_base(v.as_uint(), base, upper);
    return true;
  }
  return false;
}

bool as_double(const Val& v, double* d) {
  switch (v.kind()) {
    case K::Double: *d = v.as_double(); return true;
    case K::Int: *d = static_cast<double>(v.as_int()); return true;
    case K::Uint: *d = static_cast<double>(v.as_uint()); return true;
    default: return false;
  }
}

std::string printf_double(char verb, int precision, double d) {
  if (!std::isfinite(d)) return non_finite(d);
  char fmt[16];
  std::snprintf(fmt, sizeof fmt, "%%.%d%c", precision, verb);
  int n = std::snprintf(nullptr, 0, fmt, d);
  std::string out(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt, d);
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool string_clause_ok(const Val& v) {
  switch (v.kind()) {
    case K::Opaque:
    case K::Error: return false;
    case K::List:
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!string_clause_ok(v.list_at(i))) return false;
      }
      return true;
    case K::Map:
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!string_clause_ok(v.map_value_at(i))) return false;
      }
      return true;
    default: return true;
  }
}

// Formats one argument for a clause; returns an error value for a mismatch.
Val format_one(char verb, int precision, const Val& v, std::string* out) {
  std::string_view given = v.type_name();
  switch (verb) {
    case 's':
      if (!string_clause_ok(v)) {
        return clause_error(
            "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
            "types, durations, and timestamps, was given " +
            std::string(given));
      }
      *out += v.debug_string();
      return Val();
    case 'd': {
      std::string s;
      if (integer_text(v, 10, false, &s)) {
        *out += s;
      } else if (v.kind() == K::Double && !std::isfinite(v.as_double())) {
        *out += non_finite(v.as_double());
      } else {
        return clause_error("decimal clause can only be used on integers, was given " +
                            std::string(given));
      }
      return Val();
    }
    case 'f':
    case 'e': {
      double d;
      if (!as_double(v, &d)) {
        return clause_error(std::string(verb == 'f' ? "fixed-point" : "scientific") +
                            " clause can only be used on doubles, was given " + std::string(given));
      }
      *out += printf_double(verb, precision < 0 ? 6 : precision, d);
      return Val();
    }
    case 'b': {
      std::string s;
      if (integer_text(v, 2, false, &s)) {
        *out += s;
      } else if (v.kind() == K::Bool) {
        *out += v.as_bool() ? "1" : "0";
      } else {
        return clause_error("only integers and bools can be formatted as binary, was given " +
                            std::string(given));
      }
      return Val();
    }
    case 'o': {
      std::string s;
      if (!integer_text(v, 8, false, &s)) {
        return clause_error("octal clause can only be used on integers, was given " +
                            std::string(given));
      }
      *out += s;
      return Val();
    }
    case 'x':
    case 'X': {
      bool upper = verb == 'X';
      std::string s;
      if (integer_text(v, 16, upper, &s)) {
        *out += s;
      } else if (v.kind() == K::String || v.kind() == K::Bytes) {
        for (unsigned char c : v.text()) {
          *out += to_base(c >> 4, 16, upper);
          *out += to_base(c & 15, 16, upper);
        }
      } else {
        return clause_error(
            "only integers, byte buffers, and strings can be formatted as hex, was given " +
            std::string(given));
      }
      return Val();
    }
    default: break;
  }
  return Val::error("could not parse formatting clause: unrecognized formatting clause \"" +
                    std::string(1, verb) + "\"");
}

}  // namespace

Val fn_format(EvalContext& ctx, const Val* a, std::size_t n) {
  if (n != 2 || a[0].kind() != K::String || a[1].kind() != K::List)
    return no_such_overload("format", a, n);
  std::string_view f = a[0].text();
  const Val& args = a[1];
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size())
      return Val::error("could not parse formatting clause: unexpected end of format string");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    int precision = -1;
    if (f[i] == '.') {
      precision = 0;
      ++i;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') {
        precision = precision * 10 + (f[i] - '0');
        if (precision > 100)
          return Val::error("could not parse formatting clause: precision too large");
        ++i;
      }
      if (i >= f.size())
        return Val::error("could not parse formatting clause: missing verb after precision");
    }
    char verb = f[i];
    if (std::string_view("sdfebxXo").find(verb) == std::string_view::npos) {
      return Val::error("could not parse formatting clause: unrecognized formatting clause \"" +
                        std::string(1, verb) + "\"");
    }
    if (next >= args.size()) return Val::error("index " + std::to_string(next) + " out of range");
    Val err = format_one(verb, precision, args.list_at(next++), &out);
    if (err.is_error()) return err;
    ctx.charge(1);
  }
  return Val::string(std::move(out));
}

}  // namespace gpufleet::cel
