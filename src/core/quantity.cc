#include "core/quantity.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/errors.h"
#include "core/text.h"
#include "core/value.h"

namespace gpufleet::core {
namespace {

constexpr std::string_view kValidForms =
    "expected a number with an optional suffix, such as 100m, 1.5Gi, 2e3, 1k or 10Ki "
    "(decimal suffixes n u m k M G T P E, binary suffixes Ki Mi Gi Ti Pi Ei, or e/E followed "
    "by an integer exponent)";

constexpr Int128 kNanosPerUnit = 1'000'000'000;
// The largest magnitude a quantity may hold: 2^63-1 units, in nanos.
// Binary quantities are capped at 2^63-1 units, as the API server caps them.
constexpr Int128 kMaxBinaryNanos = Int128{std::numeric_limits<std::int64_t>::max()} * kNanosPerUnit;
// The representable range: 38 decimal digits of nanos, so 29 digits before the point.
constexpr std::size_t kMaxNanosDigits = 38;
constexpr Int128 kMaxNanos = [] {
  Int128 v = 1;
  for (std::size_t i = 0; i < kMaxNanosDigits; ++i) v *= 10;
  return v - 1;
}();
constexpr std::string_view kTooLarge =
    "it is too large: quantities hold at most 29 digits before the decimal point";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Multiplies a decimal digit string (no leading zeros) by a small factor.
std::string multiply_digits(const std::string& digits, std::uint64_t factor) {
  std::string out(digits.size() + 20, '0');
  unsigned __int128 carry = 0;
  std::size_t pos = out.size();
  for (std::size_t i = digits.size(); i-- > 0;) {
    carry += static_cast<unsigned __int128>(digits[i] - '0') * factor;
    out[--pos] = static_cast<char>('0' + static_cast<int>(carry % 10));
    carry /= 10;
  }
  while (carry > 0) {
    out[--pos] = static_cast<char>('0' + static_cast<int>(carry % 10));
    carry /= 10;
  }
  return out.substr(out.find_first_not_of('0'));
}

Int128 digits_to_int(std::string_view digits) {  // caller bounds the length
  Int128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

std::string int_to_string(Int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 u =
      negative ? static_cast<unsigned __int128>(-(v + 1)) + 1 : static_cast<unsigned __int128>(v);
  std::string out;
  while (u > 0) {
    out += static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
  }
  if (negative) out += '-';
  return {out.rbegin(), out.rend()};
}

struct Suffix {
  std::string_view text;
  Quantity::Format format;
  int exponent;  // power of 10 (decimal) or power of 1024 (binary)
};

constexpr Suffix kSuffixes[] = {
    {"n", Quantity::Format::DecimalSI, -9}, {"u", Quantity::Format::DecimalSI, -6},
    {"m", Quantity::Format::DecimalSI, -3}, {"", Quantity::Format::DecimalSI, 0},
    {"k", Quantity::Format::DecimalSI, 3},  {"M", Quantity::Format::DecimalSI, 6},
    {"G", Quantity::Format::DecimalSI, 9},  {"T", Quantity::Format::DecimalSI, 12},
    {"P", Quantity::Format::DecimalSI, 15}, {"E", Quantity::Format::DecimalSI, 18},
    {"Ki", Quantity::Format::BinarySI, 1},  {"Mi", Quantity::Format::BinarySI, 2},
    {"Gi", Quantity::Format::BinarySI, 3},  {"Ti", Quantity::Format::BinarySI, 4},
    {"Pi", Quantity::Format::BinarySI, 5},  {"Ei", Quantity::Format::BinarySI, 6},
};

// Parses into nanos and format; returns "" or the reason the text is not a quantity.
std::string parse_quantity(std::string_view text, Int128& nanos, Quantity::Format& format) {
  if (text.empty()) return "it is empty";
  std::size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    pos = 1;
  }
  const std::size_t int_start = pos;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  std::string_view int_digits = text.substr(int_start, pos - int_start);
  std::string_view frac_digits;
  if (pos < text.size() && text[pos] == '.') {
    const std::size_t frac_start = ++pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos;
    frac_digits = text.substr(frac_start, pos - frac_start);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return pos < text.size() ? "it does not start with a number" : "it has no digits";
  }
  const std::string_view suffix = text.substr(pos);

  // Power of ten to apply, and a power of 1024 for binary suffixes.
  std::int64_t exponent10 = 0;
  int exponent1024 = 0;
  bool known = false;
  for (const Suffix& s : kSuffixes) {
    if (s.text == suffix) {
      format = s.format;
      if (s.format == Quantity::Format::BinarySI) {
        exponent1024 = s.exponent;
      } else {
        exponent10 = s.exponent;
      }
      known = true;
      break;
    }
  }
  if (!known) {
    if ((suffix[0] == 'e' || suffix[0] == 'E') && suffix.size() > 1) {
      std::size_t p = 1;
      bool exp_negative = false;
      if (suffix[p] == '+' || suffix[p] == '-') exp_negative = suffix[p++] == '-';
      if (p == suffix.size()) return "exponent '" + std::string(suffix) + "' has no digits";
      std::int64_t e = 0;
      for (; p < suffix.size(); ++p) {
        if (!is_digit(suffix[p])) {
          return "unknown suffix '" + std::string(suffix) + "'";
        }
        // Beyond +-100000 the value is zero-rounded-up or capped either way.
        if (e < 100000) e = e * 10 + (suffix[p] - '0');
      }
      exponent10 = exp_negative ? -e : e;
      format = Quantity::Format::DecimalExponent;
    } else {
      return "unknown suffix '" + std::string(suffix) + "'";
    }
  }

  // value = significant digits * 10^exponent10 * 1024^exponent1024
  std::string digits = std::string(int_digits) + std::string(frac_digits);
  exponent10 -= static_cast<std::int64_t>(frac_digits.size());
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    nanos = 0;
    return "";
  }
  digits.erase(0, first);
  if (exponent1024 > 0) digits = multiply_digits(digits, std::uint64_t{1} << (10 * exponent1024));

  const std::int64_t shift = exponent10 + 9;  // power of ten that turns digits into nanos
  const bool binary = format == Quantity::Format::BinarySI;
  Int128 magnitude = 0;
  const auto length = static_cast<std::int64_t>(digits.size());
  if (shift >= 0) {
    if (length + shift > static_cast<std::int64_t>(kMaxNanosDigits)) {
      if (!binary) return std::string(kTooLarge);
      magnitude = kMaxBinaryNanos;
    } else {
      magnitude = digits_to_int(digits);
      for (std::int64_t i = 0; i < shift; ++i) magnitude *= 10;
    }
  } else if (-shift >= length) {
    magnitude = 1;  // below one nano: rounded up to the smallest non-zero value
  } else {
    const std::size_t keep = static_cast<std::size_t>(length + shift);
    if (keep > kMaxNanosDigits) {
      if (!binary) return std::string(kTooLarge);
      magnitude = kMaxBinaryNanos;
    } else {
      magnitude = digits_to_int(std::string_view(digits).substr(0, keep));
      if (digits.find_first_not_of('0', keep) != std::string::npos) ++magnitude;  // round up
    }
  }
  if (magnitude > kMaxNanos) return std::string(kTooLarge);
  if (binary && magnitude > kMaxBinaryNanos) magnitude = kMaxBinaryNanos;
  nanos = negative ? -magnitude : magnitude;
  return "";
}

}  // namespace

Quantity Quantity::parse(std::string_view text) {
  Int128 nanos = 0;
  Format format = Format::DecimalSI;
  if (std::string err = parse_quantity(text, nanos, format); !err.empty()) {
    throw InvalidInput("invalid quantity " + quoted(text) + ": " + err + "; " +
                       std::string(kValidForms));
  }
  return Quantity(nanos, format);
}

std::optional<Quantity> Quantity::try_parse(std::string_view text) noexcept {
  try {
    Int128 nanos = 0;
    Format format = Format::DecimalSI;
    if (!parse_quantity(text, nanos, format).empty()) return std::nullopt;
    return Quantity(nanos, format);
  } catch (...) {  // allocation failure only
    return std::nullopt;
  }
}

Quantity Quantity::from_value(const Value& v, std::string_view field) {
  if (const std::string* s = v.if_string()) {
    // The API server trims surrounding spaces from JSON strings (" 1" reads as 1).
    std::string_view text = *s;
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    try {
      return parse(text);
    } catch (const InvalidInput& e) {
      throw InvalidInput(std::string(field) + ": " + e.what());
    }
  }
  if (v.is_int()) return from_int64(v.as_int());
  if (v.is_uint()) return Quantity(Int128{v.as_uint()} * kNanosPerUnit, Format::DecimalSI);
  if (v.is_double()) {
    const double d = v.as_double();
    if (!std::isfinite(d)) {
      throw InvalidInput(std::string(field) + ": a quantity must be finite, not " +
                         std::to_string(d));
    }
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, d);
    try {
      return parse(std::string_view(buffer, static_cast<std::size_t>(result.ptr - buffer)));
    } catch (const InvalidInput& e) {
      throw InvalidInput(std::string(field) + ": " + e.what());
    }
  }
  throw InvalidInput(std::string(field) + ": expected a quantity (a string such as \"1.5Gi\" or " +
                     "a number) but found a " + std::string(kind_name(v.kind())));
}

Quantity Quantity::from_int64(std::int64_t value, Format format) noexcept {
  return Quantity(Int128{value} * kNanosPerUnit, format);
}

Quantity Quantity::from_milli(std::int64_t milli, Format format) noexcept {
  return Quantity(Int128{milli} * 1'000'000, format);
}

std::string Quantity::to_string() const {
  if (nanos_ == 0) return "0";
  Format format = format_;
  if (format == Format::BinarySI) {
    // Small or fractional binary values read better in decimal (as the API server does).
    const Int128 limit = 1024 * kNanosPerUnit;
    if ((nanos_ > -limit && nanos_ < limit) || nanos_ % kNanosPerUnit != 0) {
      format = Format::DecimalSI;
    }
  }
  if (format == Format::BinarySI) {
    Int128 units = nanos_ / kNanosPerUnit;
    int power = 0;
    while (power < 6 && units % 1024 == 0) {
      units /= 1024;
      ++power;
    }
    static constexpr std::string_view kBinary[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    return int_to_string(units) + std::string(kBinary[power]);
  }
  // Remove factors of ten, then step back to a multiple of three.
  Int128 mantissa = nanos_;
  int exponent = -9;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  while (((exponent % 3) + 3) % 3 != 0) {
    mantissa *= 10;
    --exponent;
  }
  std::string out = int_to_string(mantissa);
  if (format == Format::DecimalExponent) {
    if (exponent != 0) {
      out += 'e';
      out += std::to_string(exponent);
    }
    return out;
  }
  static constexpr std::string_view kDecimal[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
  if (exponent > 18) {  // beyond E there is no suffix: fall back to exponent notation
    out += 'e';
    out += std::to_string(exponent);
    return out;
  }
  out += kDecimal[(exponent + 9) / 3];
  return out;
}

double Quantity::as_double() const noexcept {
  return static_cast<double>(nanos_ / kNanosPerUnit) +
         static_cast<double>(nanos_ % kNanosPerUnit) / 1e9;
}

std::int64_t Quantity::as_int64() const {
  Int128 units = nanos_ / kNanosPerUnit;
  if (nanos_ % kNanosPerUnit != 0) units += nanos_ < 0 ? -1 : 1;
  if (units > std::numeric_limits<std::int64_t>::max() ||
      units < std::numeric_limits<std::int64_t>::min()) {
    throw InvalidInput("quantity " + to_string() +
                       " is too large for a 64-bit integer (the limit is about 9.2E)");
  }
  return static_cast<std::int64_t>(units);
}

std::optional<std::int64_t> Quantity::as_exact_int64() const noexcept {
  if (nanos_ % kNanosPerUnit != 0) return std::nullopt;
  const Int128 units = nanos_ / kNanosPerUnit;
  if (units > std::numeric_limits<std::int64_t>::max() ||
      units < std::numeric_limits<std::int64_t>::min()) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(units);
}

std::int64_t Quantity::as_int64_milli() const {
  constexpr Int128 kNanosPerMilli = 1'000'000;
  Int128 milli = nanos_ / kNanosPerMilli;
  if (nanos_ % kNanosPerMilli != 0) milli += nanos_ < 0 ? -1 : 1;
  if (milli > std::numeric_limits<std::int64_t>::max() ||
      milli < std::numeric_limits<std::int64_t>::min()) {
    throw InvalidInput("quantity " + to_string() +
                       " is too large to express in thousandths (the limit is about 9.2P)");
  }
  return static_cast<std::int64_t>(milli);
}

Quantity Quantity::checked(Int128 nanos, Format format, const char* operation) {
  if (nanos > kMaxNanos || nanos < -kMaxNanos) {
    throw InvalidInput(std::string("quantity ") + operation +
                       " overflows: the result has more than 29 digits before the decimal point");
  }
  return Quantity(nanos, format);
}

Quantity Quantity::operator+(const Quantity& o) const {
  Int128 sum = 0;
  if (__builtin_add_overflow(nanos_, o.nanos_, &sum)) sum = kMaxNanos + 1;
  return checked(sum, format_, "addition");
}

Quantity Quantity::operator-(const Quantity& o) const {
  Int128 difference = 0;
  if (__builtin_sub_overflow(nanos_, o.nanos_, &difference)) difference = kMaxNanos + 1;
  return checked(difference, format_, "subtraction");
}

Quantity Quantity::operator-() const noexcept { return Quantity(-nanos_, format_); }

Quantity Quantity::operator*(std::int64_t factor) const {
  Int128 product = 0;
  if (__builtin_mul_overflow(nanos_, Int128{factor}, &product)) {
    return checked(kMaxNanos + 1, format_, "multiplication");
  }
  return checked(product, format_, "multiplication");
}

}  // namespace gpufleet::core
