#include "cel/lexer.h"

#include "core/utf8.h"

#include <cerrno>
#include <cstdlib>

namespace gpufleet::cel {
namespace {

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool is_reserved_word(std::string_view w) noexcept {
  static constexpr std::string_view kWords[] = {
      "as",     "break", "const", "continue", "else",      "for",    "function", "if",
      "import", "let",   "loop",  "package",  "namespace", "return", "var",      "void"};
  for (auto k : kWords) {
    if (k == w) return true;
  }
  return false;
}

Token Lexer::next() {
  // Skip whitespace and // comments.
  for (;;) {
    while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\n' ||
                                  src_[pos_] == '\r' || src_[pos_] == '\f')) {
      ++pos_;
    }
    if (pos_ + 1 < src_.size() && src_[pos_] == '/' && src_[pos_ + 1] == '/') {
      while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      continue;
    }
    break;
  }
  Token t;
  t.offset = pos_;
  if (pos_ >= src_.size()) return t;
  const std::size_t start = pos_;
  char c = src_[pos_];
  auto two = [&](char second) { return pos_ + 1 < src_.size() && src_[pos_ + 1] == second; };
  auto simple = [&](Tok k, std::size_t len) {
    t.kind = k;
    pos_ += len;
    return t;
  };
  switch (c) {
    case '(': return simple(Tok::LParen, 1);
    case ')': return simple(Tok::RParen, 1);
    case '[': return simple(Tok::LBracket, 1);
    case ']': return simple(Tok::RBracket, 1);
    case '{': return simple(Tok::LBrace, 1);
    case '}': return simple(Tok::RBrace, 1);
    case ',': return simple(Tok::Comma, 1);
    case ':': return simple(Tok::Colon, 1);
    case '?': return simple(Tok::Question, 1);
    case '+': return simple(Tok::Plus, 1);
    case '-': return simple(Tok::Minus, 1);
    case '*': return simple(Tok::Star, 1);
    case '/': return simple(Tok::Slash, 1);
    case '%': return simple(Tok::Percent, 1);
    case '!': return two('=') ? simple(Tok::Ne, 2) : simple(Tok::Bang, 1);
    case '=':
      if (two('=')) return simple(Tok::Eq, 2);
      fail(start, "unexpected '=' (use '==' to compare)");
    case '<': return two('=') ? simple(Tok::Le, 2) : simple(Tok::Lt, 1);
    case '>': return two('=') ? simple(Tok::Ge, 2) : simple(Tok::Gt, 1);
    case '&':
      if (two('&')) return simple(Tok::AndAnd, 2);
      fail(start, "unexpected '&' (use '&&' for logical and)");
    case '|':
      if (two('|')) return simple(Tok::OrOr, 2);
      fail(start, "unexpected '|' (use '||' for logical or)");
    case '.':
      if (pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])) return number(start);
      return simple(Tok::Dot, 1);
    case '\'':
    case '"': return quoted(start, false, false);
    case '`': {
      std::size_t end = src_.find('`', pos_ + 1);
      if (end == std::string_view::npos) fail(start, "unterminated quoted field name");
      t.kind = Tok::QuotedIdent;
      t.text = std::string(src_.substr(pos_ + 1, end - pos_ - 1));
      if (t.text.empty()) fail(start, "empty quoted field name");
      for (char ch : t.text) {
        if (!is_ident_char(ch) && ch != '.' && ch != '-' && ch != '/' && ch != ' ') {
          fail(start,
               "quoted field names may contain only letters, digits, '_', '.', '-', '/' "
               "and spaces");
        }
      }
      pos_ = end + 1;
      return t;
    }
    default: break;
  }
  if (is_digit(c)) return number(start);
  if (is_ident_start(c)) {
    // String/bytes prefixes: r, b, br, rb in any case.
    std::size_t p = pos_;
    bool raw = false, bytes = false;
    for (int i = 0; i < 2 && p < src_.size(); ++i) {
      char l = src_[p];
      if ((l == 'r' || l == 'R') && !raw) {
        raw = true;
        ++p;
      } else if ((l == 'b' || l == 'B') && !bytes) {
        bytes = true;
        ++p;
      } else {
        break;
      }
      if (p < src_.size() && (src_[p] == '\'' || src_[p] == '"')) {
        pos_ = p;
        return quoted(start, raw, bytes);
      }
    }
    while (pos_ < src_.size() && is_ident_char(src_[pos_])) ++pos_;
    t.text = std::string(src_.substr(start, pos_ - start));
    if (t.text == "true")
      t.kind = Tok::True;
    else if (t.text == "false")
      t.kind = Tok::False;
    else if (t.text == "null")
      t.kind = Tok::Null;
    else if (t.text == "in")
      t.kind = Tok::In;
    else
      t.kind = Tok::Ident;
    return t;
  }
  if (static_cast<unsigned char>(c) >= 0x80) fail(start, "unexpected non-ASCII character");
  fail(start, std::string("unexpected character '") + c + "'");
}

Token Lexer::number(std::size_t start) {
  Token t;
  t.offset = start;
  if (src_[pos_] == '0' && pos_ + 1 < src_.size() &&
      (src_[pos_ + 1] == 'x' || src_[pos_ + 1] == 'X')) {
    pos_ += 2;
    std::size_t digits_start = pos_;
    unsigned __int128 v = 0;
    while (pos_ < src_.size() && hex_value(src_[pos_]) >= 0) {
      v = v * 16 + static_cast<unsigned>(hex_value(src_[pos_]));
      if (v > UINT64_MAX) fail(start, "hexadecimal literal out of range");
      ++pos_;
    }
    if (pos_ == digits_start) fail(start, "hexadecimal literal needs digits after 0x");
    t.u = static_cast<std::uint64_t>(v);
  } else {
    bool is_double = false;
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_double = true;
      ++pos_;
      while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    } else if (pos_ < src_.size() && src_[pos_] == '.' && start == pos_) {
      is_double = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_double = true;
        pos_ = p;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      }
    }
    std::string lit(src_.substr(start, pos_ - start));
    if (is_double) {
      t.kind = Tok::Double;
      errno = 0;
      t.d = std::strtod(lit.c_str(), nullptr);
      if (pos_ < src_.size() && is_ident_char(src_[pos_]))
        fail(pos_, "unexpected character after number");
      return t;
    }
    unsigned __int128 v = 0;
    for (char ch : lit) {
      v = v * 10 + static_cast<unsigned>(ch - '0');
      if (v > UINT64_MAX) fail(start, "integer literal out of range: " + lit);
    }
    t.u = static_cast<std::uint64_t>(v);
  }
  if (pos_ < src_.size() && (src_[pos_] == 'u' || src_[pos_] == 'U')) {
    ++pos_;
    t.kind = Tok::Uint;
  } else {
    t.kind = Tok::Int;
    if (t.u == 9223372036854775808ULL) {
      t.int_min_magnitude = true;
    } else if (t.u > 9223372036854775807ULL) {
      fail(start, "integer literal out of range for int (add a 'u' suffix for uint)");
    }
  }
  if (pos_ < src_.size() && is_ident_char(src_[pos_]))
    fail(pos_, "unexpected character after number");
  return t;
}

Token Lexer::quoted(std::size_t start, bool raw, bool bytes) {
  Token t;
  t.offset = start;
  t.kind = bytes ? Tok::Bytes : Tok::String;
  const char q = src_[pos_];
  const bool triple = pos_ + 2 < src_.size() && src_[pos_ + 1] == q && src_[pos_ + 2] == q;
  pos_ += triple ? 3 : 1;
  std::string out;
  for (;;) {
    if (pos_ >= src_.size()) fail(start, "unterminated string literal");
    char c = src_[pos_];
    if (c == q) {
      if (!triple) {
        ++pos_;
        break;
      }
      if (pos_ + 2 < src_.size() && src_[pos_ + 1] == q && src_[pos_ + 2] == q) {
        pos_ += 3;
        break;
      }
    }
    if (!triple && (c == '\n' || c == '\r'))
      fail(pos_, "newline in a single-quoted string (use ''' or \\n)");
    if (c != '\\' || raw) {
      out += c;
      ++pos_;
      continue;
    }
    const std::size_t esc = pos_;
    if (pos_ + 1 >= src_.size()) fail(esc, "unterminated escape sequence");
    char e = src_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case 'a': out += '\a'; continue;
      case 'b': out += '\b'; continue;
      case 'f': out += '\f'; continue;
      case 'n': out += '\n'; continue;
      case 'r': out += '\r'; continue;
      case 't': out += '\t'; continue;
      case 'v': out += '\v'; continue;
      case '\\': out += '\\'; continue;
      case '?': out += '?'; continue;
      case '"': out += '"'; continue;
      case '\'': out += '\''; continue;
      case '`': out += '`'; continue;
      default: break;
    }
    std::uint32_t cp = 0;
    int n = 0;
    bool byte_escape = false;
    if (e == 'x' || e == 'X') {
      n = 2;
      byte_escape = true;
    } else if (e == 'u') {
      n = 4;
    } else if (e == 'U') {
      n = 8;
    } else if (e >= '0' && e <= '3') {
      // Octal: exactly three digits.
      if (pos_ + 1 >= src_.size() || src_[pos_] < '0' || src_[pos_] > '7' || src_[pos_ + 1] < '0' ||
          src_[pos_ + 1] > '7') {
        fail(esc, "octal escape needs three digits (\\000 to \\377)");
      }
      cp = static_cast<std::uint32_t>((e - '0') * 64 + (src_[pos_] - '0') * 8 +
                                      (src_[pos_ + 1] - '0'));
      pos_ += 2;
      byte_escape = true;
    } else {
      fail(esc, std::string("invalid escape sequence '\\") + e + "'");
    }
    for (int i = 0; i < n; ++i) {
      if (pos_ >= src_.size() || hex_value(src_[pos_]) < 0) {
        fail(esc,
             std::string("escape \\") + e + " needs " + std::to_string(n) + " hexadecimal digits");
      }
      cp = cp * 16 + static_cast<std::uint32_t>(hex_value(src_[pos_]));
      ++pos_;
    }
    if (bytes) {
      if (!byte_escape) fail(esc, "unicode escapes are not allowed in bytes literals");
      out += static_cast<char>(cp);
      continue;
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      fail(esc, "escape is not a valid unicode code point");
    }
    core::append_utf8(out, cp);
  }
  t.text = std::move(out);
  return t;
}

}  // namespace gpufleet::cel
