// Requirement strings of recipe constraints and overlay node-count criteria:
// ">= 1.32", "< 2.0", "== ubuntu", "!= cos", "matches NVIDIA-H100*", "in ubuntu, rhel".
// Parsed (and checked) when the library loads; evaluated against cluster facts by validate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::recipe {

enum class RequirementOp { Ge, Gt, Le, Lt, Eq, Ne, Matches, In };

struct Requirement {
  RequirementOp op = RequirementOp::Eq;
  std::string operand;                    // for every op but In
  std::vector<std::string> alternatives;  // for In
  std::string text;                       // the normalized text, "op operand"
};

// Throws core::InvalidInput naming `where` on a malformed requirement.
Requirement parse_requirement(std::string_view text, std::string_view where);

// Compares dotted versions numerically, component by component ("1.32" < "1.32.4" < "1.33"),
// ignoring a leading 'v' and anything after '-' or '+'. Non-numeric parts compare as text.
int compare_versions(std::string_view a, std::string_view b);

// Whether `actual` satisfies the requirement. Ordering ops compare versions; Eq/Ne compare
// versions when both sides start with a digit (so "== 1.32" holds for "1.32.0"), else text;
// Matches is a glob with '*' and '?'; In is text membership.
bool satisfies(const Requirement& r, std::string_view actual);

// Whole-number form used by overlay node-count criteria (">= 64").
bool satisfies_count(const Requirement& r, long long count);

}  // namespace gpufleet::recipe
