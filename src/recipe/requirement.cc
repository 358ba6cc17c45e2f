#include "recipe/requirement.h"

#include <charconv>

#include "core/errors.h"
#include "core/semver.h"
#include "core/text.h"

namespace gpufleet::recipe {

namespace {

struct OpName {
  std::string_view token;
  RequirementOp op;
};
// Longer tokens first so that ">=" is not read as ">".
constexpr OpName kOps[] = {{">=", RequirementOp::Ge},
                           {"<=", RequirementOp::Le},
                           {"==", RequirementOp::Eq},
                           {"!=", RequirementOp::Ne},
                           {">", RequirementOp::Gt},
                           {"<", RequirementOp::Lt},
                           {"matches ", RequirementOp::Matches},
                           {"in ", RequirementOp::In}};

bool is_ordering(RequirementOp op) {
  return op == RequirementOp::Ge || op == RequirementOp::Gt || op == RequirementOp::Le ||
         op == RequirementOp::Lt;
}

bool starts_with_digit(std::string_view s) {
  if (!s.empty() && s[0] == 'v') s.remove_prefix(1);
  return !s.empty() && s[0] >= '0' && s[0] <= '9';
}

// The release part of a version: no leading 'v', nothing after '-' or '+'.
std::string_view release_part(std::string_view v) {
  if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) v.remove_prefix(1);
  std::size_t cut = v.find_first_of("-+");
  return cut == std::string_view::npos ? v : v.substr(0, cut);
}

}  // namespace

Requirement parse_requirement(std::string_view text, std::string_view where) {
  std::string_view s = core::trim(text);
  for (const OpName& o : kOps) {
    if (s.substr(0, o.token.size()) != o.token) continue;
    Requirement r;
    r.op = o.op;
    std::string_view rest = core::trim(s.substr(o.token.size()));
    if (rest.empty()) break;
    std::string op_text(core::trim(o.token));
    if (r.op == RequirementOp::In) {
      std::size_t start = 0;
      while (start <= rest.size()) {
        std::size_t comma = rest.find(',', start);
        std::string_view item =
            core::trim(rest.substr(start, comma == std::string_view::npos ? comma : comma - start));
        if (item.empty()) {
          throw core::InvalidInput(std::string(where) + ": requirement '" + std::string(text) +
                                   "' has an empty item; write 'in a, b, c'");
        }
        r.alternatives.emplace_back(item);
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      r.text = op_text + " ";
      for (std::size_t i = 0; i < r.alternatives.size(); ++i) {
        r.text += (i ? ", " : "") + r.alternatives[i];
      }
      return r;
    }
    if (rest.find(' ') != std::string_view::npos) {
      throw core::InvalidInput(std::string(where) + ": requirement '" + std::string(text) +
                               "' has more than one operand; one requirement compares with one "
                               "value (use several constraints for a range)");
    }
    if (is_ordering(r.op) && !starts_with_digit(rest)) {
      throw core::InvalidInput(std::string(where) + ": requirement '" + std::string(text) +
                               "' orders by version, so its operand must be a version such as "
                               "1.32 or 570.86");
    }
    r.operand = std::string(rest);
    r.text = op_text + " " + r.operand;
    return r;
  }
  throw core::InvalidInput(std::string(where) + ": requirement '" + std::string(text) +
                           "' is not understood; write one of '>= 1.32', '> 1.2', '<= 2.0', "
                           "'< 2.0', '== ubuntu', '!= cos', 'matches NVIDIA-H100*', "
                           "'in ubuntu, rhel'");
}

int compare_versions(std::string_view a, std::string_view b) {
  a = release_part(a);
  b = release_part(b);
  while (!a.empty() || !b.empty()) {
    std::size_t da = a.find('.'), db = b.find('.');
    std::string_view pa = a.substr(0, da), pb = b.substr(0, db);
    a = da == std::string_view::npos ? std::string_view{} : a.substr(da + 1);
    b = db == std::string_view::npos ? std::string_view{} : b.substr(db + 1);
    // A missing component is absent, not zero: "1.32" is the prefix of "1.32.4", and the
    // prefix compares as equal so that ">= 1.32" and "== 1.32" both hold for 1.32.4.
    if (pa.empty() || pb.empty()) return 0;
    unsigned long long na = 0, nb = 0;
    auto ra = std::from_chars(pa.data(), pa.data() + pa.size(), na);
    auto rb = std::from_chars(pb.data(), pb.data() + pb.size(), nb);
    bool numeric = ra.ec == std::errc() && ra.ptr == pa.data() + pa.size() &&
                   rb.ec == std::errc() && rb.ptr == pb.data() + pb.size();
    if (numeric) {
      if (na != nb) return na < nb ? -1 : 1;
    } else if (int c = pa.compare(pb); c != 0) {
      return c < 0 ? -1 : 1;
    }
  }
  return 0;
}

namespace {

// Ordering through core::VersionConstraint on the release part of the actual version, so
// that a kernel "6.8.0-1015-aws" or a kubelet "v1.32.4-eks-1234" counts as 6.8.0 / 1.32.4.
bool ordered(const Requirement& r, std::string_view actual) {
  std::optional<core::SemVer> v = core::SemVer::try_parse(actual, true);
  if (!v) return false;
  std::optional<core::VersionConstraint> c = core::VersionConstraint::try_parse(r.text);
  return c && c->satisfied_by(v->release());
}

}  // namespace

bool satisfies(const Requirement& r, std::string_view actual) {
  bool versions = starts_with_digit(actual) && starts_with_digit(r.operand);
  switch (r.op) {
    case RequirementOp::Ge:
    case RequirementOp::Gt:
    case RequirementOp::Le:
    case RequirementOp::Lt: return versions && ordered(r, actual);
    case RequirementOp::Eq:
      return versions ? compare_versions(actual, r.operand) == 0 : actual == r.operand;
    case RequirementOp::Ne:
      return versions ? compare_versions(actual, r.operand) != 0 : actual != r.operand;
    case RequirementOp::Matches: return core::glob_match(r.operand, actual);
    case RequirementOp::In:
      for (const std::string& alt : r.alternatives) {
        if (alt == actual) return true;
      }
      return false;
  }
  return false;
}

bool satisfies_count(const Requirement& r, long long count) {
  return satisfies(r, std::to_string(count));
}

}  // namespace gpufleet::recipe
