// Semantic versions (SemVer 2.0.0) and version constraints such as ">= 1.32, < 1.34".
//
// Strict parsing follows https://semver.org exactly, except that a leading 'v' or 'V' is
// accepted (Helm chart versions "v26.3.2", Kubernetes versions "v1.32.4").
//
// Lenient parsing (lenient = true) also reads the versions that real hosts report:
//   - partial versions: "1.32" is 1.32.0, "6" is 6.0.0 (used on the right of constraints);
//   - leading zeros in numeric parts: NVIDIA driver "535.104.05" is 535.104.5;
//   - '_' inside prerelease/build identifiers: kernel "4.18.0-553.el8_10.x86_64".
// A suffix after '-' is always a prerelease, as SemVer defines it. So kernel "6.8.0-1015-aws"
// is 6.8.0 with prerelease ["1015-aws"] and EKS "v1.32.4-eks-1234" is 1.32.4 with prerelease
// ["eks-1234"]; both sort BELOW the plain 6.8.0 / 1.32.4. To ask "is this kernel at least
// 6.8", test its release part: `constraint.satisfied_by(kernel.release())`.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::core {

struct SemVer {
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  std::uint64_t patch = 0;
  std::vector<std::string> prerelease;  // dot-separated identifiers, in order
  std::string build;                    // build metadata after '+', without the '+'

  // Throws InvalidInput naming the text and what a valid version looks like.
  static SemVer parse(std::string_view text, bool lenient = false);
  static std::optional<SemVer> try_parse(std::string_view text, bool lenient = false) noexcept;

  // The same version without prerelease and build: 6.8.0-1015-aws -> 6.8.0.
  [[nodiscard]] SemVer release() const { return SemVer{major, minor, patch, {}, {}}; }

  // Canonical form without a leading 'v': "1.32.4-rc.1+build.5".
  [[nodiscard]] std::string to_string() const;

  // SemVer precedence: numeric major/minor/patch, then a version with a prerelease is lower
  // than one without; prerelease identifiers compare numerically when both are numeric,
  // numeric sorts below alphanumeric, otherwise ASCII order; a shorter list of equal
  // identifiers is lower. Build metadata is ignored, so 1.0.0+a == 1.0.0+b.
  friend std::weak_ordering operator<=>(const SemVer& a, const SemVer& b) noexcept;
  friend bool operator==(const SemVer& a, const SemVer& b) noexcept {
    return (a <=> b) == std::weak_ordering::equivalent;
  }
};

// -1, 0 or 1 by SemVer precedence.
int compare(const SemVer& a, const SemVer& b) noexcept;

// A conjunction of comparisons, parsed from a comma-separated list:
//   ">= 1.32", "> 1.32", "<= 1.32", "< 1.33", "== 570.86.15", "= 1.2.3", "1.2.3",
//   "!= 1.2.3", "~1.32" (patch updates: >= 1.32.0 < 1.33.0-0), "~1.32.4" (>= 1.32.4 < 1.33.0-0),
//   "^1.2" (>= 1.2.0 < 2.0.0-0; ^0.2.3 is < 0.3.0-0, ^0.0.3 is < 0.0.4-0),
//   "1.32.x", "1.x", "*" (wildcards), e.g. ">= 1.32, < 1.34".
// Versions on the right are read leniently. A partial version stands for every version with
// that prefix, so comparisons are version-aware: ">= 1.32" holds for 1.32.0 and 1.32.4,
// "<= 1.32" holds for 1.32.9 but not 1.33.0, "> 1.32" needs 1.33.0 or later, "== 1.32"
// matches any 1.32.z. Upper bounds of prefixes exclude prereleases of the next version
// (1.33.0-rc.1 is not "<= 1.32"). Prereleases are otherwise ordinary versions in the order.
class VersionConstraint {
 public:
  // Throws InvalidInput naming the constraint, the bad part and the accepted forms.
  static VersionConstraint parse(std::string_view text);
  static std::optional<VersionConstraint> try_parse(std::string_view text) noexcept;

  [[nodiscard]] bool satisfied_by(const SemVer& v) const noexcept;
  // Reads `version` leniently; throws InvalidInput when it is not a version.
  [[nodiscard]] bool satisfied_by(std::string_view version) const;

  // The text it was parsed from, for messages.
  [[nodiscard]] const std::string& text() const noexcept { return text_; }

 private:
  // NotIn holds when v < version or v >= upper: the negation of a prefix range.
  enum class Op : std::uint8_t { Ge, Gt, Le, Lt, Eq, Ne, NotIn };
  struct Term {
    Op op;
    SemVer version;
    SemVer upper;  // NotIn only
  };
  friend struct ConstraintParser;
  std::string text_;
  std::vector<Term> terms_;  // all must hold
};

// True when `text` names exactly one version: three numeric parts, optionally a 'v', a
// prerelease and a build ("570.86.15", "v1.32.4", "535.104.05", "6.8.0-1015-aws").
// False for "", "latest", "stable", "*", "x", "1.32" (floating), "1.x", "^1.2", ">=1.0", ...
bool is_exact_pin(std::string_view text) noexcept;

}  // namespace gpufleet::core
