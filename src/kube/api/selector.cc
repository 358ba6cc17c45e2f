#include "kube/api/selector.h"

#include "core/errors.h"
#include "kube/api/names.h"

namespace gpufleet::kube {
namespace {

bool has_value(const core::Value& values, std::string_view v) {
  if (const core::List* l = values.if_list()) {
    for (const core::Value& x : *l) {
      if (const std::string* s = x.if_string(); s != nullptr && *s == v) return true;
    }
  }
  return false;
}

}  // namespace

void validate_label_selector(const core::Value& selector, std::string_view field) {
  std::string f(field);
  if (selector.is_null()) return;
  if (!selector.is_map())
    throw core::InvalidInput(f + " must be a map (matchLabels, matchExpressions)");
  for (const auto& e : selector.as_map()) {
    if (e.key != "matchLabels" && e.key != "matchExpressions")
      throw core::InvalidInput(f + "." + e.key +
                               " is not a selector field; use matchLabels or matchExpressions");
  }
  if (const core::Value* ml = selector.find("matchLabels"); ml != nullptr && !ml->is_null()) {
    if (!ml->is_map()) throw core::InvalidInput(f + ".matchLabels must be a map of label: value");
    for (const auto& e : ml->as_map()) {
      if (std::string why = check_label_key(e.key); !why.empty())
        throw core::InvalidInput(f + ".matchLabels key \"" + e.key + "\": " + why);
      if (!e.value.is_string())
        throw core::InvalidInput(f + ".matchLabels." + e.key + " must be a string value");
    }
  }
  const core::Value* me = selector.find("matchExpressions");
  if (me == nullptr || me->is_null()) return;
  if (!me->is_list()) throw core::InvalidInput(f + ".matchExpressions must be a list");
  std::size_t i = 0;
  for (const core::Value& x : me->as_list()) {
    std::string at = f + ".matchExpressions[" + std::to_string(i++) + "]";
    std::string_view key = x.get_string({"key"});
    std::string_view op = x.get_string({"operator"});
    if (std::string why = check_label_key(key); !why.empty())
      throw core::InvalidInput(at + ".key \"" + std::string(key) + "\": " + why);
    const core::Value* values = x.find("values");
    std::size_t n = values != nullptr ? values->size() : 0;
    if (op == "In" || op == "NotIn") {
      if (n == 0) throw core::InvalidInput(at + ": operator " + std::string(op) + " needs values");
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (n != 0)
        throw core::InvalidInput(at + ": operator " + std::string(op) +
                                 " takes no values; remove them");
    } else {
      throw core::InvalidInput(at + ".operator \"" + std::string(op) +
                               "\" is not one of In, NotIn, Exists, DoesNotExist");
    }
  }
}

bool selector_matches(const core::Value& selector, const core::Value& labels) noexcept {
  if (selector.is_null()) return true;
  if (!selector.is_map()) return false;
  auto label = [&](std::string_view key) -> const std::string* {
    const core::Value* v = labels.find(key);
    return v != nullptr ? v->if_string() : nullptr;
  };
  if (const core::Value* ml = selector.find("matchLabels"); ml != nullptr && ml->is_map()) {
    for (const auto& e : ml->as_map()) {
      const std::string* have = label(e.key);
      const std::string* want = e.value.if_string();
      if (have == nullptr || want == nullptr || *have != *want) return false;
    }
  }
  if (const core::Value* me = selector.find("matchExpressions"); me != nullptr && me->is_list()) {
    for (const core::Value& x : me->as_list()) {
      const std::string* have = label(x.get_string({"key"}));
      std::string_view op = x.get_string({"operator"});
      const core::Value* values = x.find("values");
      static const core::Value kNone;
      const core::Value& vs = values != nullptr ? *values : kNone;
      bool ok = false;
      if (op == "In") {
        ok = have != nullptr && has_value(vs, *have);
      } else if (op == "NotIn") {
        ok = have == nullptr || !has_value(vs, *have);
      } else if (op == "Exists") {
        ok = have != nullptr;
      } else if (op == "DoesNotExist") {
        ok = have == nullptr;
      }
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace gpufleet::kube
