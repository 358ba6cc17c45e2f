// Tokens of the CEL grammar: literals with every escape form, identifiers, operators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpufleet::cel {

enum class Tok : std::uint8_t {
  End,
  Int,  // magnitude in `u`; `int_overflow_magnitude` for 9223372036854775808
  Uint,
  Double,
  String,  // decoded text in `text`
  Bytes,
  Ident,
  QuotedIdent,  // `field name` (only after '.')
  True,
  False,
  Null,
  In,
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Dot,
  Comma,
  Colon,
  Question,
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Bang,
  AndAnd,
  OrOr,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
};

struct Token {
  Tok kind = Tok::End;
  std::size_t offset = 0;  // byte offset of the first character
  std::uint64_t u = 0;
  double d = 0;
  std::string text;
  bool int_min_magnitude = false;  // an Int of magnitude 2^63, valid only after '-'
};

// Thrown by the lexer and parser; turned into a CompileError with line:column and caret.
struct SyntaxError {
  std::size_t offset;
  std::string message;
};

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}
  Token next();  // throws SyntaxError

 private:
  Token number(std::size_t start);
  Token quoted(std::size_t start, bool raw, bool bytes);
  [[noreturn]] void fail(std::size_t at, std::string msg) const {
    throw SyntaxError{at, std::move(msg)};
  }

  std::string_view src_;
  std::size_t pos_ = 0;
};

// True for the words CEL reserves (they may not name variables or functions).
bool is_reserved_word(std::string_view w) noexcept;

}  // namespace gpufleet::cel
