// Kubernetes resource quantities ("100m", "1.5Gi", "2e3"), exact fixed-point, never double.
//
// Grammar (as Kubernetes' resource.Quantity):
//   quantity ::= [+-] number suffix
//   number   ::= digits | digits. | digits.digits | .digits
//   suffix   ::= "" | n | u | m | k | M | G | T | P | E      (decimal SI)
//              | Ki | Mi | Gi | Ti | Pi | Ei                (binary SI)
//              | (e|E) [+-] digits                          (decimal exponent)
// "1E" is one exa; "1E3" is 1000.
//
// Like the API server, values are kept to nano precision (more precise input is rounded up,
// away from zero: "0.1n" is 1n, "0.000000000001Ki" is 2n) and binary quantities are capped at
// 2^63-1 in magnitude ("9Ei" becomes 9223372036854775807). Decimal quantities may be larger
// ("12E"), up to 29 digits before the point; beyond that parsing fails (the API server would
// keep arbitrary precision; nothing real needs it). A quantity remembers the kind of suffix it
// was written with and serializes in the API server's canonical form for that kind: no
// fractional digits, the largest suffix that loses nothing ("1.5Gi" -> "1536Mi", "1000m" ->
// "1", "0.5" -> "500m", "2e3" stays "2e3", "1.5e3" -> "1500", "1000E" -> "1e21"). Binary values
// under 1024 in magnitude or with a fraction are written with decimal suffixes
// ("0.5Ki" -> "512").
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpufleet::core {

class Value;

// GCC/Clang 128-bit integer; `__extension__` keeps -Wpedantic builds quiet.
__extension__ typedef __int128 Int128;

class Quantity {
 public:
  enum class Format : std::uint8_t { DecimalSI, BinarySI, DecimalExponent };

  Quantity() = default;  // zero, DecimalSI

  // Throws InvalidInput naming the text and the valid forms.
  static Quantity parse(std::string_view text);
  static std::optional<Quantity> try_parse(std::string_view text) noexcept;
  // From a JSON/YAML value: a string is parsed (surrounding spaces ignored, as the API server
  // does), an integer is taken as is (DecimalSI), a
  // double is read from its shortest decimal text. Throws InvalidInput for anything else;
  // `field` names the field in the message.
  static Quantity from_value(const Value& v, std::string_view field = "quantity");

  static Quantity from_int64(std::int64_t value, Format format = Format::DecimalSI) noexcept;
  static Quantity from_milli(std::int64_t milli, Format format = Format::DecimalSI) noexcept;

  // Canonical form, as the API server writes it.
  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] Format format() const noexcept { return format_; }

  [[nodiscard]] bool is_zero() const noexcept { return nanos_ == 0; }
  [[nodiscard]] int sign() const noexcept { return nanos_ < 0 ? -1 : (nanos_ > 0 ? 1 : 0); }
  // Nearest double; for display and ratios only, never for comparisons.
  [[nodiscard]] double as_double() const noexcept;
  // The value in whole units, rounded up away from zero (like Quantity.Value()): 100m -> 1.
  // Throws InvalidInput beyond int64 (only decimal quantities above about 9.2E).
  [[nodiscard]] std::int64_t as_int64() const;
  // The value when it is a whole number that fits in int64 (like AsInt64()), else nullopt:
  // "2k" -> 2000, "1500m" and "12E" -> nullopt.
  [[nodiscard]] std::optional<std::int64_t> as_exact_int64() const noexcept;
  // The value in thousandths, rounded up away from zero (like MilliValue()): 1.5 -> 1500.
  // Throws InvalidInput when it does not fit in int64 (beyond about 9.2 peta-units).
  [[nodiscard]] std::int64_t as_int64_milli() const;

  // Exact arithmetic; the result keeps this quantity's format. Throws InvalidInput when the
  // result leaves the representable range (29 digits before the point).
  [[nodiscard]] Quantity operator+(const Quantity& o) const;
  [[nodiscard]] Quantity operator-(const Quantity& o) const;
  [[nodiscard]] Quantity operator-() const noexcept;
  [[nodiscard]] Quantity operator*(std::int64_t factor) const;
  Quantity& operator+=(const Quantity& o) { return *this = *this + o; }
  Quantity& operator-=(const Quantity& o) { return *this = *this - o; }

  // By value only: "1Ki" == "1024" even though they print differently.
  friend std::weak_ordering operator<=>(const Quantity& a, const Quantity& b) noexcept {
    if (a.nanos_ < b.nanos_) return std::weak_ordering::less;
    if (a.nanos_ > b.nanos_) return std::weak_ordering::greater;
    return std::weak_ordering::equivalent;
  }
  friend bool operator==(const Quantity& a, const Quantity& b) noexcept {
    return a.nanos_ == b.nanos_;
  }

 private:
  Quantity(Int128 nanos, Format format) noexcept : nanos_(nanos), format_(format) {}
  static Quantity checked(Int128 nanos, Format format, const char* operation);

  Int128 nanos_ = 0;  // value * 10^9, below 10^38 in magnitude
  Format format_ = Format::DecimalSI;
};

}  // namespace gpufleet::core
