#include "cel/parser.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "cel/lexer.h"

namespace gpufleet::cel {
namespace {

class Parser {
 public:
  Parser(std::string_view src, const ParseLimits& limits, bool macros)
      : lex_(src), limits_(limits), macros_(macros) {
    advance();
  }

  ExprPtr parse_all() {
    ExprPtr e = expr();
    if (tok_.kind != Tok::End)
      fail(tok_.offset, "unexpected " + describe(tok_) + " after the end of the expression");
    return e;
  }

 private:
  // Depth guard for every recursive production.
  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > p_.limits_.max_depth) {
        p_.fail(p_.tok_.offset, "expression nested too deeply (limit " +
                                    std::to_string(p_.limits_.max_depth) + ")");
      }
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  [[noreturn]] void fail(std::size_t at, std::string msg) { throw SyntaxError{at, std::move(msg)}; }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "end of input";
      case Tok::Int:
      case Tok::Uint:
      case Tok::Double: return "number";
      case Tok::String: return "string";
      case Tok::Bytes: return "bytes";
      case Tok::Ident: return "'" + t.text + "'";
      case Tok::QuotedIdent: return "`" + t.text + "`";
      case Tok::True: return "'true'";
      case Tok::False: return "'false'";
      case Tok::Null: return "'null'";
      case Tok::In: return "'in'";
      case Tok::LParen: return "'('";
      case Tok::RParen: return "')'";
      case Tok::LBracket: return "'['";
      case Tok::RBracket: return "']'";
      case Tok::LBrace: return "'{'";
      case Tok::RBrace: return "'}'";
      case Tok::Dot: return "'.'";
      case Tok::Comma: return "','";
      case Tok::Colon: return "':'";
      case Tok::Question: return "'?'";
      case Tok::Plus: return "'+'";
      case Tok::Minus: return "'-'";
      case Tok::Star: return "'*'";
      case Tok::Slash: return "'/'";
      case Tok::Percent: return "'%'";
      case Tok::Bang: return "'!'";
      case Tok::AndAnd: return "'&&'";
      case Tok::OrOr: return "'||'";
      case Tok::Eq: return "'=='";
      case Tok::Ne: return "'!='";
      case Tok::Lt: return "'<'";
      case Tok::Le: return "'<='";
      case Tok::Gt: return "'>'";
      case Tok::Ge: return "'>='";
    }
    return "token";
  }

  void advance() { tok_ = lex_.next(); }
  void expect(Tok k, const char* what) {
    if (tok_.kind != k)
      fail(tok_.offset, std::string("expected ") + what + " but found " + describe(tok_));
    advance();
  }

  ExprPtr node(ExprKind k, std::size_t offset) {
    if (++nodes_ > limits_.max_nodes) {
      fail(offset, "expression too large (limit " + std::to_string(limits_.max_nodes) + " nodes)");
    }
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->offset = offset;
    return e;
  }
  // Records the height of a node whose children are set; long operator chains such as
  // `a + b + ... + z` grow the tree without nesting, so the height is bounded separately.
  ExprPtr seal(ExprPtr e) {
    std::uint32_t h = 0;
    if (e->target) h = e->target->height;
    for (const auto& a : e->args) h = std::max(h, a->height);
    e->height = h + 1;
    if (e->height > limits_.max_height) {
      fail(e->offset, "expression nested too deeply (more than " +
                          std::to_string(limits_.max_height) +
                          " levels; split it into smaller rules)");
    }
    return e;
  }

  ExprPtr call(std::string fn, std::size_t offset, ExprPtr a, ExprPtr b = nullptr,
               ExprPtr c = nullptr) {
    ExprPtr e = node(ExprKind::Call, offset);
    e->name = std::move(fn);
    e->args.push_back(std::move(a));
    if (b) e->args.push_back(std::move(b));
    if (c) e->args.push_back(std::move(c));
    return seal(std::move(e));
  }

  ExprPtr expr() {
    Depth d(*this);
    ExprPtr cond = or_expr();
    if (tok_.kind != Tok::Question) return cond;
    std::size_t at = tok_.offset;
    advance();
    ExprPtr yes = or_expr();
    expect(Tok::Colon, "':' of the conditional");
    ExprPtr no = expr();
    return call("_?_:_", at, std::move(cond), std::move(yes), std::move(no));
  }

  ExprPtr or_expr() {
    ExprPtr left = and_expr();
    while (tok_.kind == Tok::OrOr) {
      std::size_t at = tok_.offset;
      advance();
      Depth d(*this);
      left = call("_||_", at, std::move(left), and_expr());
    }
    return left;
  }

  ExprPtr and_expr() {
    ExprPtr left = relation();
    while (tok_.kind == Tok::AndAnd) {
      std::size_t at = tok_.offset;
      advance();
      Depth d(*this);
      left = call("_&&_", at, std::move(left), relation());
    }
    return left;
  }

  ExprPtr relation() {
    ExprPtr left = addition();
    for (;;) {
      const char* fn = nullptr;
      switch (tok_.kind) {
        case Tok::Lt: fn = "_<_"; break;
        case Tok::Le: fn = "_<=_"; break;
        case Tok::Gt: fn = "_>_"; break;
        case Tok::Ge: fn = "_>=_"; break;
        case Tok::Eq: fn = "_==_"; break;
        case Tok::Ne: fn = "_!=_"; break;
        case Tok::In: fn = "@in"; break;
        default: return left;
      }
      std::size_t at = tok_.offset;
      advance();
      Depth d(*this);
      left = call(fn, at, std::move(left), addition());
    }
  }

  ExprPtr addition() {
    ExprPtr left = multiplication();
    while (tok_.kind == Tok::Plus || tok_.kind == Tok::Minus) {
      const char* fn = tok_.kind == Tok::Plus ? "_+_" : "_-_";
      std::size_t at = tok_.offset;
      advance();
      Depth d(*this);
      left = call(fn, at, std::move(left), multiplication());
    }
    return left;
  }

  ExprPtr multiplication() {
    ExprPtr left = unary();
    for (;;) {
      const char* fn = nullptr;
      switch (tok_.kind) {
        case Tok::Star: fn = "_*_"; break;
        case Tok::Slash: fn = "_/_"; break;
        case Tok::Percent: fn = "_%_"; break;
        default: return left;
      }
      std::size_t at = tok_.offset;
      advance();
      Depth d(*this);
      left = call(fn, at, std::move(left), unary());
    }
  }

  ExprPtr unary() {
    Depth d(*this);
    if (tok_.kind == Tok::Bang) {
      std::size_t at = tok_.offset;
      advance();
      return call("!_", at, unary());
    }
    if (tok_.kind == Tok::Minus) {
      std::size_t at = tok_.offset;
      advance();
      // A negated integer literal is a literal: this is how -9223372036854775808 is written.
      if (tok_.kind == Tok::Int || tok_.kind == Tok::Double) {
        ExprPtr lit = primary();
        if (tok_.kind == Tok::Dot || tok_.kind == Tok::LBracket) {
          // `-2.f()` negates the whole member expression, as the grammar says.
          if (lit_min_)
            fail(lit->offset, "integer literal 9223372036854775808 is out of range for int");
          return call("-_", at, member_suffix(std::move(lit)));
        }
        if (lit->value.kind() == ValKind::Int) {
          lit->value = lit_min_ ? Val::integer(std::numeric_limits<std::int64_t>::min())
                                : Val::integer(-lit->value.as_int());
          lit_min_ = false;
        } else {
          lit->value = Val::dbl(-lit->value.as_double());
        }
        lit->offset = at;
        return lit;
      }
      return call("-_", at, unary());
    }
    ExprPtr m = member();
    if (lit_min_) fail(m->offset, "integer literal 9223372036854775808 is out of range for int");
    return m;
  }

  ExprPtr member() { return member_suffix(primary()); }

  ExprPtr member_suffix(ExprPtr e) {
    for (;;) {
      if (tok_.kind == Tok::Dot) {
        Depth d(*this);
        std::size_t at = tok_.offset;
        advance();
        if (tok_.kind != Tok::Ident && tok_.kind != Tok::QuotedIdent && tok_.kind != Tok::In &&
            tok_.kind != Tok::True && tok_.kind != Tok::False && tok_.kind != Tok::Null) {
          fail(tok_.offset, "expected a field name after '.' but found " + describe(tok_));
        }
        bool quoted = tok_.kind == Tok::QuotedIdent;
        std::string name = tok_.text;
        std::size_t name_at = tok_.offset;
        advance();
        if (tok_.kind == Tok::LParen && !quoted) {
          advance();
          std::vector<ExprPtr> args = expr_list(Tok::RParen, "')' to close the argument list");
          e = receiver_call(std::move(name), name_at, std::move(e), std::move(args));
        } else {
          ExprPtr s = node(ExprKind::Select, at);
          s->name = std::move(name);
          s->target = std::move(e);
          e = seal(std::move(s));
        }
      } else if (tok_.kind == Tok::LBracket) {
        Depth d(*this);
        std::size_t at = tok_.offset;
        advance();
        ExprPtr index = expr();
        expect(Tok::RBracket, "']' to close the index");
        e = call("_[_]", at, std::move(e), std::move(index));
      } else if (tok_.kind == Tok::LBrace && is_type_name(*e)) {
        e = struct_literal(std::move(e));
      } else {
        return e;
      }
    }
  }

  static bool is_type_name(const Expr& e) {
    if (e.kind == ExprKind::Ident) return true;
    return e.kind == ExprKind::Select && e.target && !e.test_only && is_type_name(*e.target);
  }
  static std::string dotted(const Expr& e) {
    if (e.kind == ExprKind::Ident) return (e.leading_dot ? "." : "") + e.name;
    return dotted(*e.target) + "." + e.name;
  }

  ExprPtr struct_literal(ExprPtr type) {
    ExprPtr s = node(ExprKind::Struct, type->offset);
    s->name = dotted(*type);
    advance();  // '{'
    while (tok_.kind != Tok::RBrace) {
      if (tok_.kind != Tok::Ident)
        fail(tok_.offset,
             "expected a field name in the message literal but found " + describe(tok_));
      s->field_names.push_back(tok_.text);
      advance();
      expect(Tok::Colon, "':' after the field name");
      s->args.push_back(expr());
      if (tok_.kind != Tok::Comma) break;
      advance();
    }
    expect(Tok::RBrace, "'}' to close the message literal");
    return seal(std::move(s));
  }

  std::vector<ExprPtr> expr_list(Tok close, const char* what) {
    std::vector<ExprPtr> out;
    while (tok_.kind != close) {
      out.push_back(expr());
      if (tok_.kind != Tok::Comma) break;
      advance();
    }
    expect(close, what);
    return out;
  }

  ExprPtr primary() {
    Depth d(*this);
    const Token t = tok_;
    switch (t.kind) {
      case Tok::Int: {
        advance();
        ExprPtr e = node(ExprKind::Const, t.offset);
        lit_min_ = t.int_min_magnitude;
        e->value = Val::integer(t.int_min_magnitude ? 0 : static_cast<std::int64_t>(t.u));
        return e;
      }
      case Tok::Uint: {
        advance();
        ExprPtr e = node(ExprKind::Const, t.offset);
        e->value = Val::uinteger(t.u);
        return e;
      }
      case Tok::Double: {
        advance();
        ExprPtr e = node(ExprKind::Const, t.offset);
        e->value = Val::dbl(t.d);
        return e;
      }
      case Tok::String:
      case Tok::Bytes: {
        advance();
        ExprPtr e = node(ExprKind::Const, t.offset);
        e->value = t.kind == Tok::String ? Val::string(t.text) : Val::bytes(t.text);
        return e;
      }
      case Tok::True:
      case Tok::False: {
        advance();
        ExprPtr e = node(ExprKind::Const, t.offset);
        e->value = Val::boolean(t.kind == Tok::True);
        return e;
      }
      case Tok::Null: {
        advance();
        return node(ExprKind::Const, t.offset);
      }
      case Tok::LParen: {
        advance();
        ExprPtr e = expr();
        expect(Tok::RParen, "')'");
        return e;
      }
      case Tok::LBracket: {
        advance();
        ExprPtr e = node(ExprKind::List, t.offset);
        e->args = expr_list(Tok::RBracket, "']' to close the list");
        return seal(std::move(e));
      }
      case Tok::LBrace: {
        advance();
        ExprPtr e = node(ExprKind::Map, t.offset);
        while (tok_.kind != Tok::RBrace) {
          e->args.push_back(expr());
          expect(Tok::Colon, "':' between map key and value");
          e->args.push_back(expr());
          if (tok_.kind != Tok::Comma) break;
          advance();
        }
        expect(Tok::RBrace, "'}' to close the map");
        return seal(std::move(e));
      }
      case Tok::Dot:
      case Tok::Ident: {
        bool leading_dot = t.kind == Tok::Dot;
        if (leading_dot) {
          advance();
          if (tok_.kind != Tok::Ident)
            fail(tok_.offset, "expected an identifier after '.' but found " + describe(tok_));
        }
        Token id = tok_;
        if (is_reserved_word(id.text))
          fail(id.offset,
               "'" + id.text + "' is a reserved word and cannot be used as an identifier");
        advance();
        if (tok_.kind == Tok::LParen) {
          advance();
          std::vector<ExprPtr> args = expr_list(Tok::RParen, "')' to close the argument list");
          return global_call((leading_dot ? "." : "") + id.text, id.offset, std::move(args));
        }
        ExprPtr e = node(ExprKind::Ident, leading_dot ? t.offset : id.offset);
        e->name = id.text;
        e->leading_dot = leading_dot;
        return e;
      }
      case Tok::End: fail(t.offset, "unexpected end of expression");
      default: fail(t.offset, "unexpected " + describe(t));
    }
  }

  ExprPtr global_call(std::string name, std::size_t at, std::vector<ExprPtr> args) {
    if (macros_ && name == "has" && args.size() == 1) {
      ExprPtr arg = std::move(args[0]);
      if (arg->kind != ExprKind::Select || arg->test_only) {
        fail(arg->offset, "has() needs a field selection such as has(a.b)");
      }
      arg->test_only = true;
      return seal(std::move(arg));
    }
    ExprPtr e = node(ExprKind::Call, at);
    e->name = std::move(name);
    e->args = std::move(args);
    return seal(std::move(e));
  }

  ExprPtr receiver_call(std::string name, std::size_t at, ExprPtr target,
                        std::vector<ExprPtr> args) {
    if (macros_) {
      MacroKind kind;
      bool is_macro = true;
      if ((name == "all") && args.size() == 2)
        kind = MacroKind::All;
      else if (name == "exists" && args.size() == 2)
        kind = MacroKind::Exists;
      else if (name == "exists_one" && args.size() == 2)
        kind = MacroKind::ExistsOne;
      else if (name == "map" && args.size() == 2)
        kind = MacroKind::Map;
      else if (name == "map" && args.size() == 3)
        kind = MacroKind::MapFilter;
      else if (name == "filter" && args.size() == 2)
        kind = MacroKind::Filter;
      else
        is_macro = false;
      if (is_macro) {
        if (args[0]->kind != ExprKind::Ident || args[0]->leading_dot) {
          fail(args[0]->offset, name + "() needs a simple variable name as its first argument");
        }
        ExprPtr c = node(ExprKind::Comprehension, at);
        c->macro = kind;
        c->name = name;
        c->iter_var = args[0]->name;
        c->args.push_back(std::move(target));
        for (std::size_t i = 1; i < args.size(); ++i) c->args.push_back(std::move(args[i]));
        return seal(std::move(c));
      }
    }
    ExprPtr e = node(ExprKind::Call, at);
    e->name = std::move(name);
    e->target = std::move(target);
    e->args = std::move(args);
    return seal(std::move(e));
  }

  Lexer lex_;
  ParseLimits limits_;
  bool macros_;
  Token tok_;
  std::size_t depth_ = 0;
  std::size_t nodes_ = 0;
  bool lit_min_ = false;  // the last literal read was 9223372036854775808
};

}  // namespace

ExprPtr parse_expression(std::string_view source, const ParseLimits& limits, bool enable_macros) {
  if (source.size() > limits.max_source_bytes) {
    throw SyntaxError{0, "expression is " + std::to_string(source.size()) +
                             " bytes, over the limit of " +
                             std::to_string(limits.max_source_bytes)};
  }
  Parser p(source, limits, enable_macros);
  return p.parse_all();
}

}  // namespace gpufleet::cel
