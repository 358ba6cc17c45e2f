#include "cel/types.h"

#include <cctype>

#include "core/errors.h"

namespace gpufleet::cel {
namespace types {
namespace {
Type make(CelType::K k) {
  auto t = std::make_shared<CelType>();
  t->kind = k;
  return t;
}
}  // namespace

Type dyn() {
  static const Type t = make(CelType::K::Dyn);
  return t;
}
Type null_type() {
  static const Type t = make(CelType::K::Null);
  return t;
}
Type boolean() {
  static const Type t = make(CelType::K::Bool);
  return t;
}
Type integer() {
  static const Type t = make(CelType::K::Int);
  return t;
}
Type uinteger() {
  static const Type t = make(CelType::K::Uint);
  return t;
}
Type dbl() {
  static const Type t = make(CelType::K::Double);
  return t;
}
Type string() {
  static const Type t = make(CelType::K::String);
  return t;
}
Type bytes() {
  static const Type t = make(CelType::K::Bytes);
  return t;
}
Type timestamp() {
  static const Type t = make(CelType::K::Timestamp);
  return t;
}
Type duration() {
  static const Type t = make(CelType::K::Duration);
  return t;
}
Type type() {
  static const Type t = make(CelType::K::TypeT);
  return t;
}
Type list(Type elem) {
  auto t = std::make_shared<CelType>();
  t->kind = CelType::K::List;
  t->params = {std::move(elem)};
  return t;
}
Type map(Type key, Type value) {
  auto t = std::make_shared<CelType>();
  t->kind = CelType::K::Map;
  t->params = {std::move(key), std::move(value)};
  return t;
}
Type opaque(std::string name) {
  auto t = std::make_shared<CelType>();
  t->kind = CelType::K::Opaque;
  t->name = std::move(name);
  return t;
}
Type param(std::string name) {
  auto t = std::make_shared<CelType>();
  t->kind = CelType::K::Param;
  t->name = std::move(name);
  return t;
}
}  // namespace types

namespace {

struct TypeParser {
  std::string_view text;
  std::size_t pos = 0;

  [[noreturn]] void fail(const std::string& why) {
    throw core::InvalidInput("invalid CEL type '" + std::string(text) + "': " + why +
                             " (use e.g. int, string, list(string), map(string, dyn))");
  }
  void skip() {
    while (pos < text.size() && text[pos] == ' ') ++pos;
  }
  std::string word() {
    skip();
    std::size_t start = pos;
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) ||
                                 text[pos] == '_' || text[pos] == '.')) {
      ++pos;
    }
    if (start == pos) fail("expected a type name at position " + std::to_string(pos + 1));
    return std::string(text.substr(start, pos - start));
  }
  void expect(char c) {
    skip();
    if (pos >= text.size() || text[pos] != c) fail(std::string("expected '") + c + "'");
    ++pos;
  }
  Type parse() {
    std::string w = word();
    if (w == "list") {
      expect('(');
      Type e = parse();
      expect(')');
      return types::list(e);
    }
    if (w == "map") {
      expect('(');
      Type k = parse();
      expect(',');
      Type v = parse();
      expect(')');
      return types::map(k, v);
    }
    if (w == "dyn" || w == "any") return types::dyn();
    if (w == "null_type" || w == "null") return types::null_type();
    if (w == "bool") return types::boolean();
    if (w == "int") return types::integer();
    if (w == "uint") return types::uinteger();
    if (w == "double") return types::dbl();
    if (w == "string") return types::string();
    if (w == "bytes") return types::bytes();
    if (w == "timestamp" || w == "google.protobuf.Timestamp") return types::timestamp();
    if (w == "duration" || w == "google.protobuf.Duration") return types::duration();
    if (w == "type") return types::type();
    if (w == "quantity" || w == "kubernetes.Quantity") return types::opaque("kubernetes.Quantity");
    if (w == "semver" || w == "kubernetes.Semver") return types::opaque("kubernetes.Semver");
    if (w.size() == 1 && w[0] >= 'A' && w[0] <= 'Z') return types::param(w);
    fail("unknown type '" + w + "'");
  }
};

}  // namespace

Type parse_type(std::string_view text) {
  TypeParser p{text};
  Type t = p.parse();
  p.skip();
  if (p.pos != text.size()) p.fail("unexpected text after the type");
  return t;
}

std::string type_to_string(const Type& t) {
  switch (t->kind) {
    case CelType::K::Dyn: return "dyn";
    case CelType::K::Null: return "null_type";
    case CelType::K::Bool: return "bool";
    case CelType::K::Int: return "int";
    case CelType::K::Uint: return "uint";
    case CelType::K::Double: return "double";
    case CelType::K::String: return "string";
    case CelType::K::Bytes: return "bytes";
    case CelType::K::List: return "list(" + type_to_string(t->params[0]) + ")";
    case CelType::K::Map:
      return "map(" + type_to_string(t->params[0]) + ", " + type_to_string(t->params[1]) + ")";
    case CelType::K::Timestamp: return "google.protobuf.Timestamp";
    case CelType::K::Duration: return "google.protobuf.Duration";
    case CelType::K::TypeT: return "type";
    case CelType::K::Opaque:
    case CelType::K::Param: return t->name;
  }
  return "?";
}

bool type_equal(const Type& a, const Type& b) {
  if (a->kind != b->kind || a->name != b->name || a->params.size() != b->params.size())
    return false;
  for (std::size_t i = 0; i < a->params.size(); ++i) {
    if (!type_equal(a->params[i], b->params[i])) return false;
  }
  return true;
}

bool is_dyn(const Type& t) { return t->kind == CelType::K::Dyn; }

}  // namespace gpufleet::cel
