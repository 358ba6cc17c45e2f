#include "core/yaml.h"

#include <yaml.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "core/base64.h"
#include "core/errors.h"

namespace gpufleet::core {

namespace {

// ---- scalar resolution (YAML 1.2 core schema) -------------------------------------------

bool is_digits(std::string_view s, int base) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = base == 16  ? std::isxdigit(static_cast<unsigned char>(c)) != 0
              : base == 8 ? (c >= '0' && c <= '7')
                          : (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::optional<Value> resolve_int(std::string_view s) {
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    base = s[1] == 'x' ? 16 : 8;
    body = s.substr(2);
    negative = false;
  }
  if (!is_digits(body, base)) return std::nullopt;
  std::uint64_t mag = 0;
  auto res = std::from_chars(body.data(), body.data() + body.size(), mag, base);
  if (res.ec != std::errc() || res.ptr != body.data() + body.size()) return std::nullopt;
  if (!negative) {
    if (mag <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return Value(static_cast<std::int64_t>(mag));
    }
    return Value(mag);
  }
  if (mag <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) + 1) {
    return Value(static_cast<std::int64_t>(0 - mag));
  }
  return std::nullopt;
}

std::optional<Value> resolve_float(std::string_view s) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF") {
    return Value(std::numeric_limits<double>::infinity());
  }
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") {
    return Value(-std::numeric_limits<double>::infinity());
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return Value(std::nan(""));
  // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  std::size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  bool dot = false;
  if (i < s.size() && s[i] == '.') {
    dot = true;
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return std::nullopt;
  bool exp = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    exp = true;
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    std::size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != s.size() || (!dot && !exp)) return std::nullopt;
  std::string copy(s[0] == '+' ? s.substr(1) : s);
  return Value(std::strtod(copy.c_str(), nullptr));
}

// How a plain (unquoted, untagged) scalar reads.
Value resolve_plain(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value();
  if (s == "true" || s == "True" || s == "TRUE") return Value(true);
  if (s == "false" || s == "False" || s == "FALSE") return Value(false);
  if (auto i = resolve_int(s)) return *i;
  if (auto f = resolve_float(s)) return *f;
  return Value(std::string(s));
}

// ---- parsing ----------------------------------------------------------------------------

// What a node costs once every alias in it is expanded: the budget that stops a small
// document from growing into billions of nodes is charged in these units.
struct Cost {
  std::uint64_t nodes = 0;
  std::uint64_t bytes = 0;
  Cost& operator+=(const Cost& o) {
    nodes += o.nodes;
    bytes += o.bytes;
    return *this;
  }
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, const InputLimits& limits)
      : source_(source), limits_(limits) {
    if (text.size() > limits.max_bytes) {
      throw ParseError(
          std::string(source), 0, 0,
          "document is " + describe_bytes(text.size()) + ", over the input limit of " +
              describe_bytes(limits.max_bytes) +
              "; raise it with GPUFLEET_MAX_INPUT_BYTES if it is meant to be this big");
    }
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~Parser() {
    if (have_event_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  std::vector<Value> documents() {
    std::vector<Value> docs;
    next();
    expect(YAML_STREAM_START_EVENT);
    for (;;) {
      next();
      if (event_.type == YAML_STREAM_END_EVENT) break;
      expect(YAML_DOCUMENT_START_EVENT);
      anchors_.clear();
      next();
      Cost cost;
      docs.push_back(node(0, cost));
      next();
      expect(YAML_DOCUMENT_END_EVENT);
    }
    return docs;
  }

 private:
  void next() {
    if (have_event_) {
      yaml_event_delete(&event_);
      have_event_ = false;
    }
    if (!yaml_parser_parse(&parser_, &event_)) {
      const yaml_mark_t& m = parser_.problem_mark;
      std::string what = parser_.problem ? parser_.problem : "invalid YAML";
      if (parser_.context) what = std::string(parser_.context) + ": " + what;
      throw ParseError(std::string(source_), m.line + 1, m.column + 1, what);
    }
    have_event_ = true;
  }

  [[noreturn]] void fail(const yaml_mark_t& m, const std::string& what) {
    throw ParseError(std::string(source_), m.line + 1, m.column + 1, what);
  }

  void expect(yaml_event_type_t type) {
    if (event_.type != type) fail(event_.start_mark, "unexpected YAML structure");
  }

  void remember(const unsigned char* anchor, const Value& v, const Cost& cost) {
    if (anchor != nullptr) anchors_[reinterpret_cast<const char*>(anchor)] = {v, cost};
  }

  // Charges one expansion of `*name` to the stream's alias budget before anything is copied,
  // so a bomb fails at the first alias that crosses the limit.
  void charge_alias(const std::string& name, const Cost& c, const yaml_mark_t& mark) {
    alias_.nodes += c.nodes;
    alias_.bytes += c.bytes;
    std::string what;
    if (alias_.nodes > limits_.max_alias_nodes) {
      what = std::to_string(c.nodes) +
             " nodes, which takes the nodes added by aliases past the limit of " +
             std::to_string(limits_.max_alias_nodes);
    } else if (alias_.bytes > limits_.max_alias_bytes) {
      what = describe_bytes(c.bytes) +
             " of scalars, which takes the bytes added by aliases past the limit of " +
             describe_bytes(limits_.max_alias_bytes);
    } else {
      return;
    }
    fail(mark,
         "alias *" + name + " expands to " + what +
             " (nested aliases that multiply like this are a \"billion laughs\" bomb; write the "
             "content out without aliases if it is real)");
  }

  Value scalar() {
    const auto& s = event_.data.scalar;
    std::string_view text(reinterpret_cast<const char*>(s.value), s.length);
    if (text.size() > limits_.max_string_bytes) {
      fail(event_.start_mark, "scalar of " + describe_bytes(text.size()) +
                                  " is over the limit of " +
                                  describe_bytes(limits_.max_string_bytes) + " for one value");
    }
    std::string_view tag = s.tag ? reinterpret_cast<const char*>(s.tag) : "";
    if (tag.empty() || tag == "!") {
      return s.plain_implicit ? resolve_plain(text) : Value(std::string(text));
    }
    if (tag == YAML_STR_TAG) return Value(std::string(text));
    if (tag == YAML_NULL_TAG) return Value();
    if (tag == YAML_BOOL_TAG || tag == YAML_INT_TAG || tag == YAML_FLOAT_TAG) {
      Value v = resolve_plain(text);
      bool ok = (tag == YAML_BOOL_TAG && v.is_bool()) ||
                (tag == YAML_INT_TAG && (v.is_int() || v.is_uint())) ||
                (tag == YAML_FLOAT_TAG && v.is_number());
      if (!ok)
        fail(event_.start_mark,
             "value \"" + std::string(text) + "\" does not match its tag " + std::string(tag));
      if (tag == YAML_FLOAT_TAG && !v.is_double()) return Value(v.as_double());
      return v;
    }
    if (tag == "tag:yaml.org,2002:binary") {
      std::string compact;
      for (char c : text) {
        if (c != '\n' && c != ' ' && c != '\r' && c != '\t') compact += c;
      }
      auto decoded = base64_decode(compact);
      if (!decoded) fail(event_.start_mark, "!!binary value is not valid base64");
      return Value(Bytes{std::move(*decoded)});
    }
    fail(event_.start_mark, "unsupported tag " + std::string(tag) +
                                ": use plain YAML types (strings, numbers, booleans, lists, maps)");
  }

  // Reads the node whose first event is current; leaves its last event current.
  // Adds what the node costs (aliases expanded) to `cost`.
  Value node(std::size_t depth, Cost& cost) {
    if (depth > limits_.max_depth) {
      fail(event_.start_mark,
           "document nested too deeply (limit " + std::to_string(limits_.max_depth) + ")");
    }
    switch (event_.type) {
      case YAML_SCALAR_EVENT: {
        Value v = scalar();
        Cost c{1, event_.data.scalar.length};
        remember(event_.data.scalar.anchor, v, c);
        cost += c;
        return v;
      }
      case YAML_ALIAS_EVENT: {
        std::string name = reinterpret_cast<const char*>(event_.data.alias.anchor);
        auto it = anchors_.find(name);
        if (it == anchors_.end()) fail(event_.start_mark, "unknown alias *" + name);
        charge_alias(name, it->second.cost, event_.start_mark);
        cost += it->second.cost;
        return it->second.value;
      }
      case YAML_SEQUENCE_START_EVENT: {
        std::string anchor = event_.data.sequence_start.anchor
                                 ? reinterpret_cast<const char*>(event_.data.sequence_start.anchor)
                                 : "";
        List l;
        Cost c{1, 0};
        for (;;) {
          next();
          if (event_.type == YAML_SEQUENCE_END_EVENT) break;
          l.push_back(node(depth + 1, c));
        }
        Value v(std::move(l));
        if (!anchor.empty()) anchors_[anchor] = {v, c};
        cost += c;
        return v;
      }
      case YAML_MAPPING_START_EVENT: {
        std::string anchor = event_.data.mapping_start.anchor
                                 ? reinterpret_cast<const char*>(event_.data.mapping_start.anchor)
                                 : "";
        Map m;
        Cost c{1, 0};
        for (;;) {
          next();
          if (event_.type == YAML_MAPPING_END_EVENT) break;
          yaml_mark_t key_mark = event_.start_mark;
          Value key = node(depth + 1, c);
          std::string key_text;
          switch (key.kind()) {
            case Kind::String: key_text = key.as_string(); break;
            case Kind::Int: key_text = std::to_string(key.as_int()); break;
            case Kind::Uint: key_text = std::to_string(key.as_uint()); break;
            case Kind::Bool: key_text = key.as_bool() ? "true" : "false"; break;
            case Kind::Null: key_text = "null"; break;
            default: fail(key_mark, "mapping keys must be scalars");
          }
          next();
          Value val = node(depth + 1, c);
          if (m.contains(key_text)) {
            fail(key_mark,
                 "duplicate key \"" + key_text + "\": each key may appear once in a mapping");
          }
          m.set(key_text, std::move(val));
        }
        Value v(std::move(m));
        if (!anchor.empty()) anchors_[anchor] = {v, c};
        cost += c;
        return v;
      }
      default: fail(event_.start_mark, "unexpected YAML structure");
    }
  }

  struct Anchor {
    Value value;
    Cost cost;
  };

  std::string_view source_;
  const InputLimits& limits_;
  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool have_event_ = false;
  std::map<std::string, Anchor> anchors_;
  Cost alias_;  // added by expanding aliases, over the whole stream
};

// ---- emitting ---------------------------------------------------------------------------

class Emitter {
 public:
  Emitter() {
    yaml_emitter_initialize(&emitter_);
    yaml_emitter_set_output(&emitter_, &Emitter::write_handler, this);
    yaml_emitter_set_unicode(&emitter_, 1);
    yaml_emitter_set_width(&emitter_, -1);
    yaml_emitter_set_indent(&emitter_, 2);
  }
  ~Emitter() { yaml_emitter_delete(&emitter_); }
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  std::string emit(const std::vector<Value>& docs) {
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit_event(ev);
    for (std::size_t i = 0; i < docs.size(); ++i) {
      yaml_document_start_event_initialize(&ev, nullptr, nullptr, nullptr, i == 0 ? 1 : 0);
      emit_event(ev);
      node(docs[i]);
      yaml_document_end_event_initialize(&ev, 1);
      emit_event(ev);
    }
    yaml_stream_end_event_initialize(&ev);
    emit_event(ev);
    return std::move(out_);
  }

 private:
  static int write_handler(void* self, unsigned char* buffer, size_t size) {
    static_cast<Emitter*>(self)->out_.append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }

  void emit_event(yaml_event_t& ev) {
    if (!yaml_emitter_emit(&emitter_, &ev)) {
      throw InvalidInput(std::string("cannot write YAML: ") +
                         (emitter_.problem ? emitter_.problem : "emitter error"));
    }
  }

  void scalar(std::string_view text, yaml_scalar_style_t style, const char* tag = nullptr) {
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, nullptr, reinterpret_cast<const yaml_char_t*>(tag),
                                 reinterpret_cast<const yaml_char_t*>(text.data()),
                                 static_cast<int>(text.size()), tag == nullptr ? 1 : 0,
                                 tag == nullptr ? 1 : 0, style);
    emit_event(ev);
  }

  void string(const std::string& s) {
    // A string that would read back as null/bool/number must be quoted.
    Value back = resolve_plain(s);
    if (!back.is_string()) {
      scalar(s, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    } else if (s.find('\n') != std::string::npos) {
      scalar(s, YAML_LITERAL_SCALAR_STYLE);
    } else {
      scalar(s, YAML_ANY_SCALAR_STYLE);
    }
  }

  void node(const Value& v) {
    yaml_event_t ev;
    switch (v.kind()) {
      case Kind::Null: scalar("null", YAML_PLAIN_SCALAR_STYLE); return;
      case Kind::Bool: scalar(v.as_bool() ? "true" : "false", YAML_PLAIN_SCALAR_STYLE); return;
      case Kind::Int: scalar(std::to_string(v.as_int()), YAML_PLAIN_SCALAR_STYLE); return;
      case Kind::Uint: scalar(std::to_string(v.as_uint()), YAML_PLAIN_SCALAR_STYLE); return;
      case Kind::Double: {
        double d = v.as_double();
        if (std::isnan(d)) return scalar(".nan", YAML_PLAIN_SCALAR_STYLE);
        if (std::isinf(d)) return scalar(d > 0 ? ".inf" : "-.inf", YAML_PLAIN_SCALAR_STYLE);
        char buf[32];
        auto res = std::to_chars(buf, buf + sizeof buf, d);
        std::string s(buf, res.ptr);
        if (s.find_first_of(".eE") == std::string::npos) s += ".0";
        scalar(s, YAML_PLAIN_SCALAR_STYLE);
        return;
      }
      case Kind::String: string(v.as_string()); return;
      case Kind::Bytes:
        scalar(base64_encode(v.as_bytes().data), YAML_ANY_SCALAR_STYLE, "tag:yaml.org,2002:binary");
        return;
      case Kind::List: {
        const List& l = v.as_list();
        yaml_sequence_start_event_initialize(
            &ev, nullptr, nullptr, 1,
            l.empty() ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
        emit_event(ev);
        for (const Value& item : l) node(item);
        yaml_sequence_end_event_initialize(&ev);
        emit_event(ev);
        return;
      }
      case Kind::Map: {
        const Map& m = v.as_map();
        yaml_mapping_start_event_initialize(
            &ev, nullptr, nullptr, 1,
            m.empty() ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
        emit_event(ev);
        for (const auto& e : m) {
          string(e.key);
          node(e.value);
        }
        yaml_mapping_end_event_initialize(&ev);
        emit_event(ev);
        return;
      }
    }
  }

  yaml_emitter_t emitter_{};
  std::string out_;
};

}  // namespace

std::vector<Value> parse_yaml_documents(std::string_view text, std::string_view source,
                                        const InputLimits& limits) {
  Parser p(text, source, limits);
  return p.documents();
}

Value parse_yaml(std::string_view text, std::string_view source, const InputLimits& limits) {
  std::vector<Value> docs = parse_yaml_documents(text, source, limits);
  if (docs.empty()) return Value();
  if (docs.size() > 1) {
    throw ParseError(std::string(source), 0, 0,
                     "expected one YAML document but found " + std::to_string(docs.size()) +
                         ": remove the extra '---' documents");
  }
  return std::move(docs.front());
}

std::string to_yaml(const Value& v) { return Emitter().emit({v}); }

std::string to_yaml_documents(const std::vector<Value>& docs) { return Emitter().emit(docs); }

}  // namespace gpufleet::core
