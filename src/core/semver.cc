#include "core/semver.h"

#include <initializer_list>
#include <limits>

#include "core/errors.h"
#include "core/text.h"

namespace gpufleet::core {
namespace {

constexpr std::string_view kValidForms =
    "expected MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], such as 1.32.4, v1.32.4 or 2.0.0-rc.1";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Joins message parts (also sidesteps a GCC 12 -Wrestrict false positive on "lit" + string).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}
bool is_ident_char(char c, bool lenient) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         (lenient && c == '_');
}
bool all_digits(std::string_view s) {
  for (char c : s) {
    if (!is_digit(c)) return false;
  }
  return !s.empty();
}

// The outcome of reading a version: either a version or the reason it is not one.
struct Parsed {
  SemVer version;
  int parts = 0;          // numeric parts present (1-3; partial only when lenient)
  bool wildcard = false;  // a part was x, X or * (constraints only)
  std::string error;      // empty on success
};

bool parse_number(std::string_view digits, bool lenient, std::uint64_t& out, std::string& error) {
  if (!all_digits(digits)) {
    error = cat({"'", digits, "' is not a non-negative integer"});
    return false;
  }
  if (!lenient && digits.size() > 1 && digits[0] == '0') {
    error = cat({"numeric part '", digits, "' has a leading zero"});
    return false;
  }
  std::uint64_t v = 0;
  for (char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
      error = cat({"numeric part '", digits, "' is too large"});
      return false;
    }
    v = v * 10 + d;
  }
  out = v;
  return true;
}

// Splits dot-separated identifiers and checks each one.
bool parse_identifiers(std::string_view text, bool prerelease, bool lenient,
                       std::vector<std::string>& out, std::string& error) {
  const char* what = prerelease ? "prerelease" : "build";
  if (text.empty()) {
    error = std::string("empty ") + what + " after '" + (prerelease ? "-" : "+") + "'";
    return false;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = text.find('.', start);
    const std::string_view id =
        text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (id.empty()) {
      error = std::string("empty ") + what + " identifier in '" + std::string(text) + "'";
      return false;
    }
    for (char c : id) {
      if (!is_ident_char(c, lenient)) {
        error = std::string(what) + " identifier '" + std::string(id) +
                "' may only contain [0-9A-Za-z-]";
        return false;
      }
    }
    if (prerelease && !lenient && id.size() > 1 && id[0] == '0' && all_digits(id)) {
      error = cat({"numeric prerelease identifier '", id, "' has a leading zero"});
      return false;
    }
    out.emplace_back(id);
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// Reads a version. `partial` allows 1-3 numeric parts; `wildcards` allows x/X/* parts.
Parsed read_version(std::string_view text, bool lenient, bool wildcards) {
  Parsed p;
  std::string_view rest = text;
  if (!rest.empty() && (rest[0] == 'v' || rest[0] == 'V')) rest.remove_prefix(1);
  if (rest.empty()) {
    p.error = "it is empty";
    return p;
  }
  // The numeric core ends at the first '-' or '+'.
  const std::size_t core_end = rest.find_first_of("-+");
  std::string_view core = rest.substr(0, core_end);
  std::string_view suffix =
      core_end == std::string_view::npos ? std::string_view{} : rest.substr(core_end);

  std::uint64_t* fields[] = {&p.version.major, &p.version.minor, &p.version.patch};
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = core.find('.', start);
    const std::string_view part =
        core.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (p.parts == 3) {
      p.error = "it has more than three numeric parts";
      return p;
    }
    if (part.empty()) {
      p.error = "a numeric part is empty";
      return p;
    }
    if (wildcards && (part == "x" || part == "X" || part == "*")) {
      p.wildcard = true;
    } else if (p.wildcard) {
      p.error = "a number follows a wildcard part";
      return p;
    } else if (!parse_number(part, lenient, *fields[p.parts], p.error)) {
      return p;
    }
    ++p.parts;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (p.wildcard) {
    // "1.x" has one real part; the wildcard and anything after it float.
    int real = 0;
    std::size_t s = 0;
    for (int i = 0; i < p.parts; ++i) {
      const std::size_t dot = core.find('.', s);
      const std::string_view part = core.substr(s, dot - s);
      if (part == "x" || part == "X" || part == "*") break;
      ++real;
      s = dot + 1;
    }
    p.parts = real;
    if (!suffix.empty()) {
      p.error = "a wildcard version cannot carry a prerelease or build";
      return p;
    }
    return p;
  }
  if (p.parts < 3 && !lenient) {
    p.error = "it needs three numeric parts";
    return p;
  }
  if (!suffix.empty() && suffix[0] == '-') {
    const std::size_t plus = suffix.find('+');
    if (!parse_identifiers(suffix.substr(1, plus == std::string_view::npos ? plus : plus - 1), true,
                           lenient, p.version.prerelease, p.error)) {
      return p;
    }
    suffix = plus == std::string_view::npos ? std::string_view{} : suffix.substr(plus);
  }
  if (!suffix.empty()) {  // starts with '+'
    std::vector<std::string> ids;
    if (!parse_identifiers(suffix.substr(1), false, lenient, ids, p.error)) return p;
    p.version.build = std::string(suffix.substr(1));
  }
  return p;
}

int compare_identifiers(const std::string& a, const std::string& b) {
  const bool an = all_digits(a);
  const bool bn = all_digits(b);
  if (an && bn) {
    // Compare numerically without overflow: strip leading zeros (lenient input), then
    // the longer number is larger, equal lengths compare as text.
    const std::size_t az = std::min(a.find_first_not_of('0'), a.size());
    const std::size_t bz = std::min(b.find_first_not_of('0'), b.size());
    const std::string_view as = std::string_view(a).substr(az);
    const std::string_view bs = std::string_view(b).substr(bz);
    if (as.size() != bs.size()) return as.size() < bs.size() ? -1 : 1;
    const int c = as.compare(bs);
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (an != bn) return an ? -1 : 1;  // numeric identifiers have lower precedence
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

}  // namespace

SemVer SemVer::parse(std::string_view text, bool lenient) {
  Parsed p = read_version(text, lenient, false);
  if (!p.error.empty()) {
    throw InvalidInput("invalid version " + quoted(text) + ": " + p.error + "; " +
                       std::string(kValidForms) +
                       (lenient ? " (partial versions like 1.32 are accepted here)" : ""));
  }
  return std::move(p.version);
}

std::optional<SemVer> SemVer::try_parse(std::string_view text, bool lenient) noexcept {
  try {
    Parsed p = read_version(text, lenient, false);
    if (!p.error.empty()) return std::nullopt;
    return std::move(p.version);
  } catch (...) {  // allocation failure only
    return std::nullopt;
  }
}

std::string SemVer::to_string() const {
  std::string out =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  for (std::size_t i = 0; i < prerelease.size(); ++i) {
    out += i == 0 ? '-' : '.';
    out += prerelease[i];
  }
  if (!build.empty()) {
    out += '+';
    out += build;
  }
  return out;
}

int compare(const SemVer& a, const SemVer& b) noexcept {
  if (a.major != b.major) return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
  if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
  if (a.prerelease.empty() || b.prerelease.empty()) {
    if (a.prerelease.empty() == b.prerelease.empty()) return 0;
    return a.prerelease.empty() ? 1 : -1;  // a prerelease is lower than the release
  }
  const std::size_t n = std::min(a.prerelease.size(), b.prerelease.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (int c = compare_identifiers(a.prerelease[i], b.prerelease[i]); c != 0) return c;
  }
  if (a.prerelease.size() == b.prerelease.size()) return 0;
  return a.prerelease.size() < b.prerelease.size() ? -1 : 1;
}

std::weak_ordering operator<=>(const SemVer& a, const SemVer& b) noexcept {
  const int c = compare(a, b);
  if (c < 0) return std::weak_ordering::less;
  if (c > 0) return std::weak_ordering::greater;
  return std::weak_ordering::equivalent;
}

// Builds the terms of a VersionConstraint; a friend so the term layout stays private.
struct ConstraintParser {
  using Op = VersionConstraint::Op;
  using Term = VersionConstraint::Term;

  static constexpr std::string_view kForms =
      "expected comma-separated comparisons such as \">= 1.32\", \"< 1.34\", \"== 570.86.15\", "
      "\"!= 1.2.3\", \"~1.32\", \"^1.2\", \"1.32.x\" or \"*\"";

  // The lowest version above every version with the first `parts` parts of v: 1.32 -> 1.33.0-0.
  // nullopt when that would overflow (no upper bound).
  static std::optional<SemVer> prefix_upper(const SemVer& v, int parts) {
    constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
    SemVer u;
    u.prerelease = {"0"};
    switch (parts) {
      case 1:
        if (v.major == kMax) return std::nullopt;
        u.major = v.major + 1;
        return u;
      case 2:
        if (v.minor == kMax) return std::nullopt;
        u.major = v.major;
        u.minor = v.minor + 1;
        return u;
      default:
        if (v.patch == kMax) return std::nullopt;
        u.major = v.major;
        u.minor = v.minor;
        u.patch = v.patch + 1;
        return u;
    }
  }

  static void add_range(std::vector<Term>& terms, const SemVer& lo,
                        const std::optional<SemVer>& hi) {
    terms.push_back({Op::Ge, lo, {}});
    if (hi) terms.push_back({Op::Lt, *hi, {}});
  }

  // Parses one comparison into terms; returns an error message or "".
  static std::string parse_term(std::string_view item, std::vector<Term>& terms) {
    std::string_view op_text;
    for (std::string_view candidate : {">=", "<=", "==", "!=", ">", "<", "=", "~", "^"}) {
      if (item.substr(0, candidate.size()) == candidate) {
        op_text = candidate;
        break;
      }
    }
    std::string_view version_text = item.substr(op_text.size());
    while (!version_text.empty() && (version_text[0] == ' ' || version_text[0] == '\t')) {
      version_text.remove_prefix(1);
    }
    if (version_text.empty()) return cat({"'", item, "' has no version"});
    if (version_text == "latest" || version_text == "stable") {
      return cat({"'", version_text, "' is not a version"});
    }
    Parsed p = read_version(version_text, true, true);
    if (!p.error.empty()) {
      return cat({"'", version_text, "' is not a version: ", p.error});
    }
    const SemVer& lo = p.version;
    // A prerelease or build pins the full version even when parts are missing.
    const bool exact = !p.wildcard && (p.parts == 3 || !lo.prerelease.empty());
    const int parts = exact ? 3 : p.parts;
    const std::optional<SemVer> hi =
        exact ? std::nullopt : (parts == 0 ? std::nullopt : prefix_upper(lo, parts));

    if (op_text == "~") {
      if (parts == 0) return "'~' needs a version, not a wildcard";
      add_range(terms, lo, prefix_upper(lo, parts == 1 ? 1 : 2));
      return "";
    }
    if (op_text == "^") {
      if (parts == 0) return "'^' needs a version, not a wildcard";
      // The first non-zero part among those given is the one that may not change.
      int keep = 1;
      if (lo.major == 0 && parts >= 2) keep = (lo.minor == 0 && parts == 3) ? 3 : 2;
      add_range(terms, lo, prefix_upper(lo, keep));
      return "";
    }
    if (parts == 0) {  // "*", "x": any version for =, >=, <=; nothing else is meaningful
      if (op_text.empty() || op_text == "=" || op_text == "==" || op_text == ">=" ||
          op_text == "<=") {
        return "";
      }
      return cat({"'", item, "' matches no version"});
    }
    if (exact) {
      Op op = Op::Eq;
      if (op_text == ">=") op = Op::Ge;
      if (op_text == ">") op = Op::Gt;
      if (op_text == "<=") op = Op::Le;
      if (op_text == "<") op = Op::Lt;
      if (op_text == "!=") op = Op::Ne;
      terms.push_back({op, lo, {}});
      return "";
    }
    // A prefix [lo, hi): compare against the whole range.
    if (op_text == ">=") {
      terms.push_back({Op::Ge, lo, {}});
    } else if (op_text == ">") {
      if (!hi) return cat({"'", item, "' matches no version"});
      terms.push_back({Op::Ge, *hi, {}});
    } else if (op_text == "<=") {
      if (hi) terms.push_back({Op::Lt, *hi, {}});
    } else if (op_text == "<") {
      terms.push_back({Op::Lt, lo, {}});
    } else if (op_text == "!=") {
      terms.push_back({Op::NotIn, lo, hi.value_or(lo)});
      if (!hi) terms.back().op = Op::Lt;  // != every version >= lo
    } else {
      add_range(terms, lo, hi);
    }
    return "";
  }

  static std::string parse(std::string_view text, std::vector<Term>& terms) {
    if (text.find_first_not_of(" \t") == std::string_view::npos) return "it is empty";
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = text.find(',', start);
      std::string_view item = text.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      const std::size_t b = item.find_first_not_of(" \t");
      const std::size_t e = item.find_last_not_of(" \t");
      if (b == std::string_view::npos) return "a comparison between commas is empty";
      item = item.substr(b, e - b + 1);
      if (item.find_first_of(" \t") != std::string_view::npos) {
        // Only whitespace right after the operator is allowed ("  >= 1.32").
        std::size_t op_end = item.find_first_not_of("<>=!~^");
        std::size_t ver = item.find_first_not_of(" \t", op_end);
        if (item.find_first_of(" \t", ver) != std::string_view::npos) {
          return cat({"'", item, "' has spaces inside; separate comparisons with ','"});
        }
      }
      if (std::string err = parse_term(item, terms); !err.empty()) return err;
      if (comma == std::string_view::npos) return "";
      start = comma + 1;
    }
  }
};

VersionConstraint VersionConstraint::parse(std::string_view text) {
  VersionConstraint c;
  if (std::string err = ConstraintParser::parse(text, c.terms_); !err.empty()) {
    throw InvalidInput("invalid version constraint " + quoted(text) + ": " + err + "; " +
                       std::string(ConstraintParser::kForms));
  }
  c.text_ = std::string(text);
  return c;
}

std::optional<VersionConstraint> VersionConstraint::try_parse(std::string_view text) noexcept {
  try {
    VersionConstraint c;
    if (!ConstraintParser::parse(text, c.terms_).empty()) return std::nullopt;
    c.text_ = std::string(text);
    return c;
  } catch (...) {  // allocation failure only
    return std::nullopt;
  }
}

bool VersionConstraint::satisfied_by(const SemVer& v) const noexcept {
  for (const Term& t : terms_) {
    const int c = compare(v, t.version);
    bool ok = false;
    switch (t.op) {
      case Op::Ge: ok = c >= 0; break;
      case Op::Gt: ok = c > 0; break;
      case Op::Le: ok = c <= 0; break;
      case Op::Lt: ok = c < 0; break;
      case Op::Eq: ok = c == 0; break;
      case Op::Ne: ok = c != 0; break;
      case Op::NotIn: ok = c < 0 || compare(v, t.upper) >= 0; break;
    }
    if (!ok) return false;
  }
  return true;
}

bool VersionConstraint::satisfied_by(std::string_view version) const {
  return satisfied_by(SemVer::parse(version, true));
}

bool is_exact_pin(std::string_view text) noexcept {
  try {
    Parsed p = read_version(text, true, false);
    return p.error.empty() && p.parts == 3;
  } catch (...) {
    return false;
  }
}

}  // namespace gpufleet::core
