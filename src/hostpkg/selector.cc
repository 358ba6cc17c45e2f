#include "hostpkg/selector.h"

#include <algorithm>

#include "core/errors.h"
#include "hostpkg/strict.h"

namespace gpufleet::hostpkg {

LabelSelector LabelSelector::parse(const core::Value& v, const std::string& field) {
  LabelSelector sel;
  if (v.is_null()) return sel;
  const core::Map& m = strict_map(v, field, {"matchLabels", "matchExpressions"});
  if (const core::Value* ml = m.find("matchLabels")) {
    const core::Map& labels = strict_map(*ml, field + ".matchLabels", {});
    for (const auto& [k, val] : labels) {
      if (!val.is_string()) {
        throw core::InvalidInput(
            field + ".matchLabels." + k + ": value is " + std::string(core::kind_name(val.kind())) +
            "; write the label value as a string (quote numbers and booleans)");
      }
      sel.requirements_.push_back({k, Op::In, {val.as_string()}});
    }
  }
  if (const core::Value* me = m.find("matchExpressions")) {
    if (!me->is_list()) {
      throw core::InvalidInput(field +
                               ".matchExpressions: expected a list of {key, operator, values}");
    }
    for (std::size_t i = 0; i < me->size(); ++i) {
      std::string f = field + ".matchExpressions[" + std::to_string(i) + "]";
      const core::Map& e = strict_map((*me)[i], f, {"key", "operator", "values"});
      Requirement r;
      r.key = required_string(e, f, "key");
      std::string op = required_string(e, f, "operator");
      if (op == "In")
        r.op = Op::In;
      else if (op == "NotIn")
        r.op = Op::NotIn;
      else if (op == "Exists")
        r.op = Op::Exists;
      else if (op == "DoesNotExist")
        r.op = Op::DoesNotExist;
      else {
        throw core::InvalidInput(f + ".operator: \"" + op +
                                 "\" is not an operator; use In, NotIn, Exists or DoesNotExist");
      }
      r.values = string_list(e.find("values"), f + ".values");
      bool wants_values = r.op == Op::In || r.op == Op::NotIn;
      if (wants_values && r.values.empty()) {
        throw core::InvalidInput(f + ".values: " + op +
                                 " needs at least one value; add values or use Exists");
      }
      if (!wants_values && !r.values.empty()) {
        throw core::InvalidInput(f + ".values: " + op + " takes no values; remove them");
      }
      std::sort(r.values.begin(), r.values.end());
      sel.requirements_.push_back(std::move(r));
    }
  }
  return sel;
}

bool LabelSelector::matches(const Labels& labels) const noexcept {
  for (const Requirement& r : requirements_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    switch (r.op) {
      case Op::In:
        if (!has || !std::binary_search(r.values.begin(), r.values.end(), it->second)) return false;
        break;
      case Op::NotIn:
        if (has && std::binary_search(r.values.begin(), r.values.end(), it->second)) return false;
        break;
      case Op::Exists:
        if (!has) return false;
        break;
      case Op::DoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

std::string LabelSelector::to_string() const {
  std::string out;
  for (const Requirement& r : requirements_) {
    if (!out.empty()) out += ',';
    auto join = [&] {
      std::string s = "(";
      for (std::size_t i = 0; i < r.values.size(); ++i) s += (i ? "," : "") + r.values[i];
      return s + ")";
    };
    switch (r.op) {
      case Op::In:
        out += r.values.size() == 1 ? r.key + "=" + r.values[0] : r.key + " in " + join();
        break;
      case Op::NotIn: out += r.key + " notin " + join(); break;
      case Op::Exists: out += r.key; break;
      case Op::DoesNotExist: out += "!" + r.key; break;
    }
  }
  return out;
}

}  // namespace gpufleet::hostpkg
