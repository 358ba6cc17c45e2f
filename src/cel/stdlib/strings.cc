// The strings extension (as cel-go's ext.Strings and Kubernetes ship it): charAt, indexOf,
// lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, join, quote,
// reverse and format (stdlib/format.cc). Indexes count code points, not bytes.
#include <algorithm>

#include "cel/eval_context.h"
#include "cel/functions.h"
#include "core/utf8.h"

namespace gpufleet::cel {

Val fn_format(EvalContext& ctx, const Val* a, std::size_t n);  // stdlib/format.cc
Val list_index_of(const Val* a, bool last);                    // stdlib/lists.cc

namespace {

using K = ValKind;

bool kinds(const Val* a, std::size_t n, std::initializer_list<K> want) {
  if (n != want.size()) return false;
  std::size_t i = 0;
  for (K k : want) {
    if (a[i++].kind() != k) return false;
  }
  return true;
}

Val out_of_range(std::int64_t i) { return Val::error("index out of range: " + std::to_string(i)); }

std::string encode(const std::vector<std::uint32_t>& cps, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) core::append_utf8(out, cps[i]);
  return out;
}

Val fn_char_at(EvalContext&, const Val* a, std::size_t n) {
  if (!kinds(a, n, {K::String, K::Int})) return no_such_overload("charAt", a, n);
  auto cps = core::decode_utf8(a[0].text());
  std::int64_t i = a[1].as_int();
  if (i < 0 || static_cast<std::uint64_t>(i) > cps.size()) return out_of_range(i);
  if (static_cast<std::size_t>(i) == cps.size()) return Val::string("");
  return Val::string(encode(cps, static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1));
}

// Position (in code points) of `sub` in `cps` at or after `from`, or -1.
std::int64_t find_cps(const std::vector<std::uint32_t>& cps, const std::vector<std::uint32_t>& sub,
                      std::size_t from, bool last, std::size_t last_start) {
  if (sub.size() > cps.size()) return -1;
  if (!last) {
    for (std::size_t i = from; i + sub.size() <= cps.size(); ++i) {
      if (std::equal(sub.begin(), sub.end(), cps.begin() + static_cast<std::ptrdiff_t>(i))) {
        return static_cast<std::int64_t>(i);
      }
    }
    return -1;
  }
  std::size_t start = std::min(last_start, cps.size() - sub.size());
  for (std::size_t i = start + 1; i-- > 0;) {
    if (std::equal(sub.begin(), sub.end(), cps.begin() + static_cast<std::ptrdiff_t>(i))) {
      return static_cast<std::int64_t>(i);
    }
  }
  return -1;
}

Val index_of(const Val* a, std::size_t n, bool last) {
  const char* name = last ? "lastIndexOf" : "indexOf";
  if (n == 2 && a[0].kind() == K::List) return list_index_of(a, last);
  if (!kinds(a, n, {K::String, K::String}) && !kinds(a, n, {K::String, K::String, K::Int})) {
    return no_such_overload(name, a, n);
  }
  auto cps = core::decode_utf8(a[0].text());
  auto sub = core::decode_utf8(a[1].text());
  std::size_t size = cps.size();
  if (n == 3) {
    std::int64_t i = a[2].as_int();
    if (i < 0 || static_cast<std::uint64_t>(i) > size) return out_of_range(i);
    return Val::integer(
        find_cps(cps, sub, static_cast<std::size_t>(i), last, static_cast<std::size_t>(i)));
  }
  return Val::integer(find_cps(cps, sub, 0, last, size));
}

// A linear scan: 1 unit per list element, or per 8 bytes of text.
void charge_scan(EvalContext& ctx, const Val* a, std::size_t n) {
  if (n >= 1) ctx.charge(a[0].kind() == K::List ? a[0].size() : a[0].size() / 8);
}
Val fn_index_of(EvalContext& ctx, const Val* a, std::size_t n) {
  charge_scan(ctx, a, n);
  return index_of(a, n, false);
}
Val fn_last_index_of(EvalContext& ctx, const Val* a, std::size_t n) {
  charge_scan(ctx, a, n);
  return index_of(a, n, true);
}

Val ascii_case(const Val* a, std::size_t n, bool upper) {
  if (!kinds(a, n, {K::String})) return no_such_overload(upper ? "upperAscii" : "lowerAscii", a, n);
  std::string s(a[0].text());
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return Val::string(std::move(s));
}
Val fn_lower(EvalContext&, const Val* a, std::size_t n) { return ascii_case(a, n, false); }
Val fn_upper(EvalContext&, const Val* a, std::size_t n) { return ascii_case(a, n, true); }

Val fn_replace(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!kinds(a, n, {K::String, K::String, K::String}) &&
      !kinds(a, n, {K::String, K::String, K::String, K::Int})) {
    return no_such_overload("replace", a, n);
  }
  std::string_view s = a[0].text(), from = a[1].text(), to = a[2].text();
  std::int64_t limit = n == 4 ? a[3].as_int() : -1;
  ctx.charge(s.size() / 8);
  std::string out;
  std::size_t pos = 0;
  std::int64_t done = 0;
  while (limit < 0 || done < limit) {
    std::size_t hit;
    if (from.empty()) {
      // Like Go's strings.Replace: an empty pattern matches before every code point.
      if (pos > s.size()) break;
      hit = pos;
    } else {
      hit = s.find(from, pos);
      if (hit == std::string_view::npos) break;
    }
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    ++done;
    if (from.empty()) {
      if (hit >= s.size()) {
        pos = s.size() + 1;
        break;
      }
      std::size_t next = hit + 1;
      while (next < s.size() && (static_cast<unsigned char>(s[next]) & 0xC0) == 0x80) ++next;
      out.append(s.substr(hit, next - hit));
      pos = next;
    } else {
      pos = hit + from.size();
    }
    ctx.charge(1);
  }
  if (pos <= s.size()) out.append(s.substr(pos));
  return Val::string(std::move(out));
}

Val fn_split(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!kinds(a, n, {K::String, K::String}) && !kinds(a, n, {K::String, K::String, K::Int})) {
    return no_such_overload("split", a, n);
  }
  std::string_view s = a[0].text(), sep = a[1].text();
  std::int64_t limit = n == 3 ? a[2].as_int() : -1;
  std::vector<Val> parts;
  if (limit == 0) return Val::list({});
  ctx.charge(s.size() / 8);
  if (sep.empty()) {
    auto cps = core::decode_utf8(s);
    for (std::size_t i = 0; i < cps.size(); ++i) {
      if (limit > 0 && static_cast<std::int64_t>(parts.size()) == limit - 1) {
        parts.push_back(Val::string(encode(cps, i, cps.size())));
        break;
      }
      parts.push_back(Val::string(encode(cps, i, i + 1)));
    }
    return Val::list(std::move(parts));
  }
  std::size_t pos = 0;
  for (;;) {
    if (limit > 0 && static_cast<std::int64_t>(parts.size()) == limit - 1) break;
    std::size_t hit = s.find(sep, pos);
    if (hit == std::string_view::npos) break;
    parts.push_back(Val::string(std::string(s.substr(pos, hit - pos))));
    pos = hit + sep.size();
  }
  parts.push_back(Val::string(std::string(s.substr(pos))));
  return Val::list(std::move(parts));
}

Val fn_substring(EvalContext&, const Val* a, std::size_t n) {
  if (!kinds(a, n, {K::String, K::Int}) && !kinds(a, n, {K::String, K::Int, K::Int})) {
    return no_such_overload("substring", a, n);
  }
  auto cps = core::decode_utf8(a[0].text());
  auto size = static_cast<std::int64_t>(cps.size());
  std::int64_t start = a[1].as_int();
  std::int64_t end = n == 3 ? a[2].as_int() : size;
  if (start < 0 || start > size) return out_of_range(start);
  if (end < 0 || end > size) return out_of_range(end);
  if (start > end) {
    return Val::error("invalid substring range. start: " + std::to_string(start) +
                      ", end: " + std::to_string(end));
  }
  return Val::string(encode(cps, static_cast<std::size_t>(start), static_cast<std::size_t>(end)));
}

// Unicode White_Space, as Go's unicode.IsSpace reports it.
bool is_space(std::uint32_t c) {
  switch (c) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

Val fn_trim(EvalContext&, const Val* a, std::size_t n) {
  if (!kinds(a, n, {K::String})) return no_such_overload("trim", a, n);
  auto cps = core::decode_utf8(a[0].text());
  std::size_t b = 0, e = cps.size();
  while (b < e && is_space(cps[b])) ++b;
  while (e > b && is_space(cps[e - 1])) --e;
  return Val::string(encode(cps, b, e));
}

Val fn_join(EvalContext& ctx, const Val* a, std::size_t n) {
  if ((n != 1 && n != 2) || a[0].kind() != K::List || (n == 2 && a[1].kind() != K::String)) {
    return no_such_overload("join", a, n);
  }
  std::string_view sep = n == 2 ? a[1].text() : std::string_view();
  std::string out;
  for (std::size_t i = 0; i < a[0].size(); ++i) {
    Val item = a[0].list_at(i);
    if (item.kind() != K::String)
      return Val::error("join() needs a list of strings, found " + std::string(item.type_name()));
    if (i > 0) out.append(sep);
    out.append(item.text());
  }
  ctx.charge(out.size() / 8);
  return Val::string(std::move(out));
}

Val fn_quote(EvalContext&, const Val* a, std::size_t n) {
  if (!kinds(a, n, {K::String})) return no_such_overload("strings.quote", a, n);
  std::string out = "\"";
  for (std::uint32_t c : core::decode_utf8(a[0].text())) {
    switch (c) {
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          core::append_utf8(out, c);
        }
    }
  }
  return Val::string(out + "\"");
}

Val fn_reverse(EvalContext&, const Val* a, std::size_t n) {
  if (n == 1 && a[0].kind() == K::List) {
    std::vector<Val> items;
    for (std::size_t i = a[0].size(); i-- > 0;) items.push_back(a[0].list_at(i));
    return Val::list(std::move(items));
  }
  if (!kinds(a, n, {K::String})) return no_such_overload("reverse", a, n);
  auto cps = core::decode_utf8(a[0].text());
  std::string out;
  for (std::size_t i = cps.size(); i-- > 0;) core::append_utf8(out, cps[i]);
  return Val::string(std::move(out));
}

}  // namespace

void register_string_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"charAt", fn_char_at, {".(string, int)->string"}, {}});
  out.push_back({"indexOf",
                 fn_index_of,
                 {".(string, string)->int", ".(string, string, int)->int", ".(list(A), A)->int"},
                 {}});
  out.push_back({"lastIndexOf",
                 fn_last_index_of,
                 {".(string, string)->int", ".(string, string, int)->int", ".(list(A), A)->int"},
                 {}});
  out.push_back({"lowerAscii", fn_lower, {".(string)->string"}, {}});
  out.push_back({"upperAscii", fn_upper, {".(string)->string"}, {}});
  out.push_back({"replace",
                 fn_replace,
                 {".(string, string, string)->string", ".(string, string, string, int)->string"},
                 {}});
  out.push_back({"split",
                 fn_split,
                 {".(string, string)->list(string)", ".(string, string, int)->list(string)"},
                 {}});
  out.push_back(
      {"substring", fn_substring, {".(string, int)->string", ".(string, int, int)->string"}, {}});
  out.push_back({"trim", fn_trim, {".(string)->string"}, {}});
  out.push_back(
      {"join", fn_join, {".(list(string))->string", ".(list(string), string)->string"}, {}});
  out.push_back({"strings.quote", fn_quote, {"(string)->string"}, {}});
  out.push_back({"reverse", fn_reverse, {".(string)->string", ".(list(A))->list(A)"}, {}});
  out.push_back({"format", fn_format, {".(string, list(dyn))->string"}, {}});
}

}  // namespace gpufleet::cel
