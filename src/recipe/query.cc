#include "recipe/query.h"

#include <charconv>
#include <vector>

#include "core/errors.h"
#include "core/json.h"
#include "core/text.h"
#include "core/yaml.h"

namespace gpufleet::recipe {

using core::Value;

namespace {

// Lists whose items have a unique name: addressed by it, as users think of them.
constexpr std::string_view kNamedLists[] = {"components", "nodePools", "overlays", "constraints"};

Value by_name(const Value& list) {
  Value out = Value::map();
  for (const Value& item : list.as_list()) out[item.get_string({"name"})] = item;
  return out;
}

// The document as the selector sees it: named lists become maps keyed by name.
Value selectable(const Recipe& r) {
  Value doc = recipe_to_value(r);
  Value& spec = doc["spec"];
  for (std::string_view key : kNamedLists) {
    if (Value* l = spec.find(key); l && l->is_list()) *l = by_name(*l);
  }
  for (auto& e : spec["nodePools"].as_map()) {
    if (Value* c = e.value.find("constraints"); c && c->is_list()) *c = by_name(*c);
  }
  return doc;
}

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = s.find('.', start);
    out.emplace_back(s.substr(start, dot == std::string_view::npos ? s.npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string keys_of(const Value& v) {
  if (const core::Map* m = v.if_map()) {
    std::vector<std::string> keys;
    for (const auto& e : *m) keys.push_back(e.key);
    return keys.empty() ? "it is an empty map" : "keys here: " + core::join(keys);
  }
  if (const core::List* l = v.if_list()) {
    return l->empty() ? "it is an empty list"
                      : "it is a list: use an index 0.." + std::to_string(l->size() - 1);
  }
  return "it is the value " + core::to_json(v) + ", which has no fields";
}

}  // namespace

Value query_recipe(const Recipe& r, std::string_view selector) {
  const std::string sel(selector);
  if (selector.empty() || selector.front() == '.' || selector.back() == '.' ||
      selector.find("..") != std::string_view::npos) {
    throw core::InvalidInput("--selector '" + sel +
                             "': write a dotted path such as "
                             "components.gpu-operator.values.driver.version");
  }
  const Value doc = selectable(r);
  std::vector<std::string> seg = split(selector);
  const Value* at = &doc;
  std::size_t i = 0;
  // spec's fields without the "spec." prefix.
  if (!doc.find(seg[0]) && doc.find("spec")->find(seg[0])) at = doc.find("spec");
  std::string walked;
  while (i < seg.size()) {
    const Value* next = nullptr;
    std::size_t used = 1;
    if (at->is_map()) {
      // The longest run of segments that is one key, so keys with dots match whole.
      std::string key;
      for (std::size_t j = i; j < seg.size(); ++j) {
        key += (j > i ? "." : "") + seg[j];
        if (const Value* v = at->find(key)) {
          next = v;
          used = j - i + 1;
        }
      }
    } else if (const core::List* l = at->if_list()) {
      std::size_t idx = 0;
      const std::string& s = seg[i];
      auto res = std::from_chars(s.data(), s.data() + s.size(), idx);
      if (res.ec == std::errc() && res.ptr == s.data() + s.size() && idx < l->size())
        next = &(*l)[idx];
    }
    if (next == nullptr) {
      throw core::InvalidInput("--selector '" + sel +
                               "': " + (walked.empty() ? std::string("the recipe") : walked) +
                               " has no '" + seg[i] + "' (" + keys_of(*at) + ")");
    }
    for (std::size_t j = i; j < i + used; ++j) walked += (walked.empty() ? "" : ".") + seg[j];
    i += used;
    at = next;
  }
  return *at;
}

std::string query_result_text(const Value& v) {
  if (const std::string* s = v.if_string()) return *s + "\n";
  if (v.is_map() || v.is_list()) return core::to_yaml(v);
  return core::to_json(v) + "\n";
}

}  // namespace gpufleet::recipe
