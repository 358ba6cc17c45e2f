#include "core/json.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>

#include "core/base64.h"
#include "core/errors.h"
#include "core/text_position.h"

namespace gpufleet::core {

// ---- pruning ----------------------------------------------------------------------------

JsonPrune& JsonPrune::add(std::string_view dotted_path) {
  JsonPrune* node = this;
  while (!dotted_path.empty()) {
    std::size_t dot = dotted_path.find('.');
    std::string_view key = dotted_path.substr(0, dot);
    auto it = node->children_.find(key);
    if (it == node->children_.end()) {
      it = node->children_.emplace(std::string(key), std::make_unique<JsonPrune>()).first;
    }
    node = it->second.get();
    dotted_path = dot == std::string_view::npos ? std::string_view{} : dotted_path.substr(dot + 1);
  }
  node->drop_ = true;
  return *this;
}

const JsonPrune* JsonPrune::child(std::string_view key) const noexcept {
  auto it = children_.find(key);
  return it == children_.end() ? nullptr : it->second.get();
}

std::vector<std::string_view> JsonPrune::child_keys() const {
  std::vector<std::string_view> keys;
  keys.reserve(children_.size());
  for (const auto& [k, v] : children_) keys.emplace_back(k);
  return keys;
}

// ---- reading ----------------------------------------------------------------------------

namespace {

namespace dom = simdjson::dom;

struct Decoder {
  std::string_view source;
  const InputLimits& limits;

  [[noreturn]] void fail(const std::string& what) const {
    // The DOM keeps no positions; these limits are rare enough not to walk again for one.
    throw ParseError(std::string(source), 0, 0, what);
  }

  Value convert(dom::element e, const JsonPrune* prune, std::size_t depth = 0) {
    if (depth > limits.max_depth) {
      fail("document nested too deeply (limit " + std::to_string(limits.max_depth) + ")");
    }
    switch (e.type()) {
      case dom::element_type::OBJECT: {
        dom::object obj = e.get_object().value_unsafe();
        Map m;
        m.reserve(obj.size());
        for (dom::key_value_pair kv : obj) {
          const JsonPrune* child = prune ? prune->child(kv.key) : nullptr;
          if (child != nullptr && child->drops_all()) continue;
          if (kv.key.size() > limits.max_string_bytes) {
            fail("a key of " + describe_bytes(kv.key.size()) + " is over the limit of " +
                 describe_bytes(limits.max_string_bytes) + " for one value");
          }
          m.append_unsorted(std::string(kv.key), convert(kv.value, child, depth + 1));
        }
        if (auto dup = m.seal()) {
          throw ParseError(std::string(source), 0, 0,
                           "duplicate key \"" + *dup + "\" in an object; each key may appear once");
        }
        return Value(std::move(m));
      }
      case dom::element_type::ARRAY: {
        dom::array arr = e.get_array().value_unsafe();
        List l;
        l.reserve(arr.size());
        for (dom::element item : arr) l.push_back(convert(item, prune, depth + 1));
        return Value(std::move(l));
      }
      case dom::element_type::STRING: {
        std::string_view str = e.get_string().value_unsafe();
        if (str.size() > limits.max_string_bytes) {
          fail("a string of " + describe_bytes(str.size()) + " is over the limit of " +
               describe_bytes(limits.max_string_bytes) + " for one value");
        }
        return Value(std::string(str));
      }
      case dom::element_type::INT64: return Value(e.get_int64().value_unsafe());
      case dom::element_type::UINT64: return Value(e.get_uint64().value_unsafe());
      case dom::element_type::DOUBLE: return Value(e.get_double().value_unsafe());
      case dom::element_type::BOOL: return Value(e.get_bool().value_unsafe());
      case dom::element_type::NULL_VALUE: return Value();
    }
    return Value();
  }
};

// The DOM parser reports what went wrong but not where. On the (cold) error path walk the
// document again with the On-Demand API, which can say where it stopped.
namespace od = simdjson::ondemand;

bool walk(od::value v, int depth);

bool walk_array(od::array a, int depth) {
  for (auto item : a) {
    od::value v;
    if (item.get(v) != simdjson::SUCCESS || !walk(v, depth + 1)) return false;
  }
  return true;
}

bool walk_object(od::object o, int depth) {
  for (auto field : o) {
    od::value v;
    if (field.value().get(v) != simdjson::SUCCESS || !walk(v, depth + 1)) return false;
  }
  return true;
}

bool walk(od::value v, int depth) {
  if (depth > 1024) return false;
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) return false;
  switch (t) {
    case od::json_type::array: {
      od::array a;
      return v.get_array().get(a) == simdjson::SUCCESS && walk_array(a, depth);
    }
    case od::json_type::object: {
      od::object o;
      return v.get_object().get(o) == simdjson::SUCCESS && walk_object(o, depth);
    }
    case od::json_type::number: {
      od::number n;
      return v.get_number().get(n) == simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view s;
      return v.get_string().get(s) == simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b;
      return v.get_bool().get(b) == simdjson::SUCCESS;
    }
    case od::json_type::null: return v.is_null().value_unsafe();
  }
  return false;
}

// Byte offset of the first error, or npos when the walk cannot tell.
std::size_t locate_error(std::string_view text) {
  simdjson::padded_string padded(text);
  od::parser parser;
  od::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return std::string_view::npos;
  od::json_type t;
  bool ok = false;
  if (doc.type().get(t) == simdjson::SUCCESS) {
    switch (t) {
      case od::json_type::array: {
        od::array a;
        ok = doc.get_array().get(a) == simdjson::SUCCESS && walk_array(a, 0);
        break;
      }
      case od::json_type::object: {
        od::object o;
        ok = doc.get_object().get(o) == simdjson::SUCCESS && walk_object(o, 0);
        break;
      }
      default: {
        od::value v;
        ok = true;  // scalars: the DOM error message is precise enough
        (void)v;
      }
    }
  }
  const char* where = nullptr;
  if (doc.current_location().get(where) != simdjson::SUCCESS || where == nullptr) {
    return ok ? std::string_view::npos : text.size();
  }
  std::size_t off = static_cast<std::size_t>(where - padded.data());
  return off <= text.size() ? off : text.size();
}

std::string describe(simdjson::error_code code) {
  switch (code) {
    case simdjson::EMPTY: return "empty input: expected a JSON document";
    case simdjson::UNCLOSED_STRING: return "unclosed string: add the closing '\"'";
    case simdjson::TAPE_ERROR:
      return "malformed JSON (check for a missing ',' ':' or bracket, or a trailing comma)";
    case simdjson::DEPTH_ERROR: return "document nested too deeply (limit 1024)";
    case simdjson::NUMBER_ERROR: return "invalid number";
    case simdjson::UTF8_ERROR: return "invalid UTF-8: JSON text must be UTF-8";
    case simdjson::STRING_ERROR: return "invalid string escape or control character in a string";
    case simdjson::T_ATOM_ERROR: return "invalid literal: expected true";
    case simdjson::F_ATOM_ERROR: return "invalid literal: expected false";
    case simdjson::N_ATOM_ERROR: return "invalid literal: expected null";
    default: return std::string("malformed JSON: ") + simdjson::error_message(code);
  }
}

}  // namespace

Value parse_json(std::string_view text, std::string_view source, const JsonPrune* prune,
                 const InputLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw ParseError(std::string(source), 0, 0,
                     "document is " + describe_bytes(text.size()) + ", over the input limit of " +
                         describe_bytes(limits.max_bytes) +
                         "; raise it with GPUFLEET_MAX_INPUT_BYTES if it is meant to be this big");
  }
  // One parser per thread: it keeps its buffers, so repeated decodes do not reallocate.
  thread_local dom::parser parser;
  dom::element root;
  auto err = parser.parse(text.data(), text.size(), true).get(root);
  if (err != simdjson::SUCCESS) {
    std::size_t off = locate_error(text);
    TextPosition pos = off == std::string_view::npos ? TextPosition{} : position_of(text, off);
    throw ParseError(std::string(source), pos.line, pos.column, describe(err));
  }
  Decoder d{source, limits};
  if (prune != nullptr && prune->drops_all()) return Value();
  return d.convert(root, prune);
}

// ---- writing ----------------------------------------------------------------------------

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  std::size_t run = 0;  // start of the pending run of bytes that need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

namespace {

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    throw InvalidInput("cannot write " + std::string(std::isnan(d) ? "NaN" : "an infinite number") +
                       " as JSON: JSON numbers must be finite");
  }
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  std::string_view s(buf, static_cast<std::size_t>(res.ptr - buf));
  out += s;
  // Keep doubles recognisable as doubles when read back.
  if (s.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

void newline(std::string& out, int indent) {
  out.push_back('\n');
  out.append(static_cast<std::size_t>(indent) * 2, ' ');
}

void write(std::string& out, const Value& v, JsonStyle style, int indent) {
  const bool pretty = style == JsonStyle::Pretty;
  switch (v.kind()) {
    case Kind::Null: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: {
      char buf[24];
      auto res = std::to_chars(buf, buf + sizeof buf, v.as_int());
      out.append(buf, res.ptr);
      return;
    }
    case Kind::Uint: {
      char buf[24];
      auto res = std::to_chars(buf, buf + sizeof buf, v.as_uint());
      out.append(buf, res.ptr);
      return;
    }
    case Kind::Double: append_double(out, v.as_double()); return;
    case Kind::String: append_json_string(out, v.as_string()); return;
    case Kind::Bytes: append_json_string(out, base64_encode(v.as_bytes().data)); return;
    case Kind::List: {
      const List& l = v.as_list();
      out.push_back('[');
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out.push_back(',');
        if (pretty) newline(out, indent + 1);
        write(out, l[i], style, indent + 1);
      }
      if (pretty && !l.empty()) newline(out, indent);
      out.push_back(']');
      return;
    }
    case Kind::Map: {
      const Map& m = v.as_map();
      out.push_back('{');
      bool first = true;
      for (const auto& e : m) {
        if (!first) out.push_back(',');
        first = false;
        if (pretty) newline(out, indent + 1);
        append_json_string(out, e.key);
        out += pretty ? ": " : ":";
        write(out, e.value, style, indent + 1);
      }
      if (pretty && !m.empty()) newline(out, indent);
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

void append_json(std::string& out, const Value& v, JsonStyle style) { write(out, v, style, 0); }

std::string to_json(const Value& v, JsonStyle style) {
  std::string out;
  append_json(out, v, style);
  return out;
}

}  // namespace gpufleet::core
