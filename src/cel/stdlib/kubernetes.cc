// Kubernetes CEL extension types: quantity("1.5Gi") and semver("1.32.4"), backed by
// core::Quantity and core::SemVer, with the methods Kubernetes validation rules use.
#include <cmath>

#include "cel/eval_context.h"
#include "cel/functions.h"
#include "core/errors.h"
#include "core/quantity.h"
#include "core/semver.h"

namespace gpufleet::cel {
namespace {

using K = ValKind;

constexpr std::string_view kQuantity = "kubernetes.Quantity";
constexpr std::string_view kSemver = "kubernetes.Semver";

struct QuantityObj final : OpaqueObj {
  explicit QuantityObj(core::Quantity v) : q(v) {}
  std::string_view type_name() const noexcept override { return kQuantity; }
  int compare(const OpaqueObj& o) const override {
    const auto& other = static_cast<const QuantityObj&>(o).q;
    return q < other ? -1 : (q > other ? 1 : 0);
  }
  std::string to_string() const override { return q.to_string(); }
  core::Quantity q;
};

struct SemverObj final : OpaqueObj {
  explicit SemverObj(core::SemVer v) : s(std::move(v)) {}
  std::string_view type_name() const noexcept override { return kSemver; }
  int compare(const OpaqueObj& o) const override {
    return core::compare(s, static_cast<const SemverObj&>(o).s);
  }
  std::string to_string() const override { return s.to_string(); }
  core::SemVer s;
};

bool is_opaque(const Val& v, std::string_view type) {
  return v.kind() == K::Opaque && v.opaque().type_name() == type;
}
const core::Quantity& quantity_of(const Val& v) {
  return static_cast<const QuantityObj&>(v.opaque()).q;
}
const core::SemVer& semver_of(const Val& v) { return static_cast<const SemverObj&>(v.opaque()).s; }

Val make_quantity(core::Quantity q) { return Val::opaque(new QuantityObj(q)); }

Val fn_quantity(EvalContext&, const Val* a, std::size_t n) {
  if (n != 1 || a[0].kind() != K::String) return no_such_overload("quantity", a, n);
  auto q = core::Quantity::try_parse(a[0].text());
  if (!q) {
    return Val::error("quantity() cannot parse '" + std::string(a[0].text()) +
                      "' (expected a Kubernetes quantity such as 500m, 2, 1.5Gi, 1e3)");
  }
  return make_quantity(*q);
}

Val fn_is_quantity(EvalContext&, const Val* a, std::size_t n) {
  if (n != 1 || a[0].kind() != K::String) return no_such_overload("isQuantity", a, n);
  return Val::boolean(core::Quantity::try_parse(a[0].text()).has_value());
}

std::optional<core::SemVer> parse_semver(std::string_view text, bool normalize) {
  if (!normalize && !text.empty() && (text[0] == 'v' || text[0] == 'V')) return std::nullopt;
  return core::SemVer::try_parse(text, normalize);
}

Val fn_semver(EvalContext&, const Val* a, std::size_t n) {
  if ((n != 1 && n != 2) || a[0].kind() != K::String || (n == 2 && a[1].kind() != K::Bool)) {
    return no_such_overload("semver", a, n);
  }
  auto v = parse_semver(a[0].text(), n == 2 && a[1].as_bool());
  if (!v) {
    return Val::error("semver() cannot parse '" + std::string(a[0].text()) +
                      "' (expected MAJOR.MINOR.PATCH such as 1.32.4; pass true as the second "
                      "argument to accept 'v1.32' forms)");
  }
  return Val::opaque(new SemverObj(std::move(*v)));
}

Val fn_is_semver(EvalContext&, const Val* a, std::size_t n) {
  if ((n != 1 && n != 2) || a[0].kind() != K::String || (n == 2 && a[1].kind() != K::Bool)) {
    return no_such_overload("isSemver", a, n);
  }
  return Val::boolean(parse_semver(a[0].text(), n == 2 && a[1].as_bool()).has_value());
}

// Methods shared by both types: isLessThan, isGreaterThan, compareTo.
template <int Kind>
Val ordering(EvalContext&, const Val* a, std::size_t n) {
  static constexpr const char* kNames[] = {"isLessThan", "isGreaterThan", "compareTo"};
  if (n != 2 || a[0].kind() != K::Opaque || a[1].kind() != K::Opaque ||
      a[0].opaque().type_name() != a[1].opaque().type_name()) {
    return no_such_overload(kNames[Kind], a, n);
  }
  int c = a[0].opaque().compare(a[1].opaque());
  if (Kind == 0) return Val::boolean(c < 0);
  if (Kind == 1) return Val::boolean(c > 0);
  return Val::integer(c);
}

template <int Part>
Val semver_part(EvalContext&, const Val* a, std::size_t n) {
  static constexpr const char* kNames[] = {"major", "minor", "patch"};
  if (n != 1 || !is_opaque(a[0], kSemver)) return no_such_overload(kNames[Part], a, n);
  const core::SemVer& s = semver_of(a[0]);
  std::uint64_t v = Part == 0 ? s.major : (Part == 1 ? s.minor : s.patch);
  if (v > static_cast<std::uint64_t>(INT64_MAX)) return Val::error("version part out of int range");
  return Val::integer(static_cast<std::int64_t>(v));
}

Val fn_is_integer(EvalContext&, const Val* a, std::size_t n) {
  if (n != 1 || !is_opaque(a[0], kQuantity)) return no_such_overload("isInteger", a, n);
  return Val::boolean(quantity_of(a[0]).as_exact_int64().has_value());
}

Val fn_as_integer(EvalContext&, const Val* a, std::size_t n) {
  if (n != 1 || !is_opaque(a[0], kQuantity)) return no_such_overload("asInteger", a, n);
  auto v = quantity_of(a[0]).as_exact_int64();
  if (!v) {
    return Val::error("asInteger(): quantity " + quantity_of(a[0]).to_string() +
                      " is not a whole number within int64 (check isInteger() first)");
  }
  return Val::integer(*v);
}

Val fn_as_float(EvalContext&, const Val* a, std::size_t n) {
  if (n != 1 || !is_opaque(a[0], kQuantity)) return no_such_overload("asApproximateFloat", a, n);
  return Val::dbl(quantity_of(a[0]).as_double());
}

Val fn_sign(EvalContext&, const Val* a, std::size_t n) {
  if (n != 1 || !is_opaque(a[0], kQuantity)) return no_such_overload("sign", a, n);
  return Val::integer(quantity_of(a[0]).sign());
}

template <bool Add>
Val arith(EvalContext&, const Val* a, std::size_t n) {
  const char* name = Add ? "add" : "sub";
  if (n != 2 || !is_opaque(a[0], kQuantity)) return no_such_overload(name, a, n);
  core::Quantity rhs;
  if (is_opaque(a[1], kQuantity)) {
    rhs = quantity_of(a[1]);
  } else if (a[1].kind() == K::Int) {
    rhs = core::Quantity::from_int64(a[1].as_int());
  } else {
    return no_such_overload(name, a, n);
  }
  try {
    return make_quantity(Add ? quantity_of(a[0]) + rhs : quantity_of(a[0]) - rhs);
  } catch (const core::InvalidInput& e) {
    return Val::error(std::string(name) + "(): " + e.what());
  }
}

}  // namespace

void register_kubernetes_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"quantity", fn_quantity, {"(string)->quantity"}, {}});
  out.push_back({"isQuantity", fn_is_quantity, {"(string)->bool"}, {}});
  out.push_back({"semver", fn_semver, {"(string)->semver", "(string, bool)->semver"}, {}});
  out.push_back({"isSemver", fn_is_semver, {"(string)->bool", "(string, bool)->bool"}, {}});
  out.push_back(
      {"isLessThan", ordering<0>, {".(quantity, quantity)->bool", ".(semver, semver)->bool"}, {}});
  out.push_back({"isGreaterThan",
                 ordering<1>,
                 {".(quantity, quantity)->bool", ".(semver, semver)->bool"},
                 {}});
  out.push_back(
      {"compareTo", ordering<2>, {".(quantity, quantity)->int", ".(semver, semver)->int"}, {}});
  out.push_back({"major", semver_part<0>, {".(semver)->int"}, {}});
  out.push_back({"minor", semver_part<1>, {".(semver)->int"}, {}});
  out.push_back({"patch", semver_part<2>, {".(semver)->int"}, {}});
  out.push_back({"isInteger", fn_is_integer, {".(quantity)->bool"}, {}});
  out.push_back({"asInteger", fn_as_integer, {".(quantity)->int"}, {}});
  out.push_back({"asApproximateFloat", fn_as_float, {".(quantity)->double"}, {}});
  out.push_back({"sign", fn_sign, {".(quantity)->int"}, {}});
  out.push_back(
      {"add", arith<true>, {".(quantity, quantity)->quantity", ".(quantity, int)->quantity"}, {}});
  out.push_back(
      {"sub", arith<false>, {".(quantity, quantity)->quantity", ".(quantity, int)->quantity"}, {}});
}

}  // namespace gpufleet::cel
