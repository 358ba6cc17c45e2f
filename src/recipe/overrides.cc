#include "recipe/overrides.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/dependency_graph.h"

namespace gpufleet::recipe {

namespace {

using core::InvalidInput;
using core::Value;

[[noreturn]] void bad(std::string_view flag, std::string_view given, const std::string& why) {
  throw InvalidInput(std::string(flag) + " '" + std::string(given) + "': " + why);
}

// "comp:path=rest" -> {comp, path, rest}.
struct Split {
  std::string component, path, rest;
};

Split split_assignment(std::string_view flag, std::string_view given, std::string_view what) {
  std::size_t colon = given.find(':');
  std::size_t eq = given.find('=');
  if (colon == std::string_view::npos || eq == std::string_view::npos || colon > eq || colon == 0 ||
      eq == colon + 1) {
    bad(flag, given,
        "expected COMPONENT:PATH=" + std::string(what) +
            " (e.g. gpu-operator:driver.version=580.105.08; list items as "
            "path[0]; gpu-operator:enabled=false leaves the component out)");
  }
  return {std::string(given.substr(0, colon)), std::string(given.substr(colon + 1, eq - colon - 1)),
          std::string(given.substr(eq + 1))};
}

// Helm's --set typing: true/false, null and integers are typed; everything else is text.
Value typed_scalar(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  if (s == "null") return nullptr;
  if (!s.empty() && s.size() < 19) {
    std::int64_t n = 0;
    const char* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, n);
    // "007" stays text: Helm keeps leading zeros as strings.
    bool leading_zero = s.size() > 1 && (s[0] == '0' || (s[0] == '-' && s[1] == '0'));
    if (ec == std::errc() && p == end && !leading_zero) return n;
  }
  return s;
}

Override make(std::string flag, std::string_view given, const Split& s, Value value) {
  Override o;
  o.flag = std::move(flag);
  o.given = std::string(given);
  o.component = s.component;
  if (s.path == "enabled") {
    if (!value.is_bool()) {
      bad(o.flag, given, "enabled takes true or false");
    }
    o.enabled_flag = true;
  } else {
    o.path = parse_value_path(s.path, o.flag, given);
  }
  o.value = std::move(value);
  return o;
}

// Walks (creating maps and list slots) to the value at `path`.
Value& slot(Value& root, const Override& o) {
  Value* cur = &root;
  for (std::size_t i = 0; i < o.path.size(); ++i) {
    const PathStep& step = o.path[i];
    std::string here = value_path_text({o.path.begin(), o.path.begin() + i + 1});
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (cur->is_null()) *cur = Value::map();
      if (!cur->is_map()) {
        bad(o.flag, o.given,
            "'" + value_path_text({o.path.begin(), o.path.begin() + i}) + "' of " + o.component +
                " is a " + std::string(core::kind_name(cur->kind())) +
                " in the recipe, not a map; set that path itself, or --set-json a whole map");
      }
      cur = &cur->as_map()[*key];
    } else {
      std::size_t index = std::get<std::size_t>(step);
      if (cur->is_null()) *cur = Value::list();
      if (!cur->is_list()) {
        bad(o.flag, o.given,
            "'" + value_path_text({o.path.begin(), o.path.begin() + i}) + "' of " + o.component +
                " is a " + std::string(core::kind_name(cur->kind())) +
                " in the recipe, not a list; drop the [index] or --set-json a whole list");
      }
      core::List& list = cur->as_list();
      if (index > list.size()) {
        bad(o.flag, o.given,
            "index " + std::to_string(index) + " of " + here + " is out of range: the list has " +
                std::to_string(list.size()) + " items; use an index up to " +
                std::to_string(list.size()) + " (that one appends)");
      }
      if (index == list.size()) list.emplace_back();
      cur = &list[index];
    }
  }
  return *cur;
}

void leaves(const Value& v, std::vector<PathStep>& path, std::vector<Override>& out,
            const std::string& flag, const std::string& component) {
  if (v.is_map() && !v.as_map().empty()) {
    for (const auto& [k, child] : v.as_map()) {
      path.emplace_back(k);
      leaves(child, path, out, flag, component);
      path.pop_back();
    }
    return;
  }
  Override o;
  o.flag = flag;
  o.component = component;
  o.path = path;
  o.given = component + ":" + value_path_text(path);
  o.value = v;
  out.push_back(std::move(o));
}

}  // namespace

std::vector<PathStep> parse_value_path(std::string_view path, std::string_view flag,
                                       std::string_view given) {
  std::vector<PathStep> out;
  std::string key;
  std::size_t i = 0;
  auto end_key = [&] {
    if (key.empty())
      bad(flag, given, "the value path '" + std::string(path) + "' has an empty key");
    out.emplace_back(key);
    key.clear();
  };
  bool after_index = false;
  while (i < path.size()) {
    char c = path[i];
    if (c == '\\' && i + 1 < path.size() && path[i + 1] == '.') {
      key += '.';
      i += 2;
    } else if (c == '.') {
      if (!after_index) end_key();
      after_index = false;
      ++i;
    } else if (c == '[') {
      if (!after_index) end_key();
      std::size_t close = path.find(']', i);
      std::string_view digits =
          path.substr(i + 1, close == std::string_view::npos ? 0 : close - i - 1);
      std::size_t n = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (close == std::string_view::npos || digits.empty() || ec != std::errc() ||
          p != digits.data() + digits.size()) {
        bad(flag, given,
            "the value path '" + std::string(path) +
                "' has a malformed list index; write path[N] with N a number from 0");
      }
      out.emplace_back(n);
      i = close + 1;
      after_index = true;
      if (i < path.size() && path[i] != '.' && path[i] != '[') {
        bad(flag, given, "the value path '" + std::string(path) + "' needs '.' after ']'");
      }
    } else {
      if (after_index)
        bad(flag, given, "the value path '" + std::string(path) + "' needs '.' after ']'");
      key += c;
      ++i;
    }
  }
  if (!after_index) end_key();
  return out;
}

std::string value_path_text(const std::vector<PathStep>& path) {
  std::string s;
  for (const PathStep& step : path) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (!s.empty()) s += '.';
      for (char c : *key) {
        if (c == '.') s += '\\';
        s += c;
      }
    } else {
      s += "[" + std::to_string(std::get<std::size_t>(step)) + "]";
    }
  }
  return s;
}

Override parse_set(std::string_view given) {
  Split s = split_assignment("--set", given, "VALUE");
  return make("--set", given, s, typed_scalar(s.rest));
}

Override parse_set_json(std::string_view given) {
  Split s = split_assignment("--set-json", given, "JSON");
  Value v;
  try {
    v = core::parse_json(s.rest, "--set-json");
  } catch (const InvalidInput& e) {
    bad("--set-json", given,
        std::string("the value is not JSON (") + e.what() +
            "); quote strings, e.g. comp:path='\"text\"' or comp:path='{\"a\":1}'");
  }
  return make("--set-json", given, s, std::move(v));
}

Override parse_set_file(std::string_view given) {
  Split s = split_assignment("--set-file", given, "FILE");
  std::string text;
  try {
    text = core::read_file(s.rest);
  } catch (const std::exception& e) {
    bad("--set-file", given, std::string("cannot read the file: ") + e.what());
  }
  return make("--set-file", given, s, Value(std::move(text)));
}

std::vector<Override> parse_overrides_file(std::string_view text, std::string_view file) {
  std::string flag = "-f " + std::string(file);
  Value doc = core::parse_yaml(text, file);
  std::vector<Override> out;
  if (doc.is_null()) return out;
  if (!doc.is_map()) {
    throw InvalidInput(flag +
                       ": expected a map of components, e.g.\n  gpu-operator:\n    values: "
                       "{driver: {version: 580.105.08}}\n  gatekeeper:\n    enabled: false");
  }
  for (const auto& [component, entry] : doc.as_map()) {
    std::string where = flag + ": " + component;
    if (!entry.is_map()) throw InvalidInput(where + ": expected {enabled: BOOL, values: MAP}");
    for (const auto& [key, v] : entry.as_map()) {
      if (key == "enabled") {
        if (!v.is_bool()) throw InvalidInput(where + ".enabled: takes true or false");
        Override o;
        o.flag = flag;
        o.component = component;
        o.given = component + ":enabled=" + (v.as_bool() ? "true" : "false");
        o.enabled_flag = true;
        o.value = v;
        out.push_back(std::move(o));
      } else if (key == "values") {
        if (!v.is_map()) throw InvalidInput(where + ".values: expected a map of chart values");
        std::vector<PathStep> path;
        leaves(v, path, out, flag, component);
      } else {
        throw InvalidInput(where + "." + key +
                           ": is not a known field; a component takes `enabled` and `values`");
      }
    }
  }
  return out;
}

Recipe apply_overrides(const Recipe& r, const std::vector<Override>& overrides) {
  if (overrides.empty()) return r;
  Recipe out = r;
  std::map<std::string, Component*> by_name;
  for (Component& c : out.components) by_name[c.name] = &c;
  std::set<std::string> disabled;
  for (const Override& o : overrides) {
    auto it = by_name.find(o.component);
    if (it == by_name.end()) {
      std::string names;
      for (const auto& [n, _] : by_name) names += (names.empty() ? "" : ", ") + n;
      bad(o.flag, o.given,
          "component '" + o.component + "' is not in recipe " + r.name + " (components: " + names +
              "); a component outside the recipe is enabled when rendering it (an overlay or "
              "--mixin), not at bundle time");
    }
    if (o.enabled_flag) {
      if (o.value.as_bool()) {
        disabled.erase(o.component);
      } else {
        disabled.insert(o.component);
      }
      continue;
    }
    slot(it->second->values, o) = o.value;
  }
  // Disabled components leave the bundle; whoever installs them instead, their dependents
  // treat them as already there (external), so the edges go and the levels are recomputed.
  std::map<std::string, std::vector<std::string>> graph;
  std::vector<Component> kept;
  for (Component& c : out.components) {
    if (disabled.count(c.name)) continue;
    std::erase_if(c.dependencies, [&](const std::string& d) { return disabled.count(d) > 0; });
    graph[c.name] = c.dependencies;
    kept.push_back(std::move(c));
  }
  DeploymentPlan plan = plan_deployment(graph);
  std::map<std::string, Component> kept_by_name;
  for (Component& c : kept) kept_by_name[c.name] = std::move(c);
  out.components.clear();
  for (const std::string& n : plan.order) {
    Component c = std::move(kept_by_name.at(n));
    c.level = plan.level_of.at(n);
    out.components.push_back(std::move(c));
  }
  out.levels = plan.levels;
  Value digest_doc = Value::map();
  digest_doc["recipe"] = r.digest;
  digest_doc["overrides"] = overrides_record(overrides);
  out.digest = "sha256:" + core::sha256_hex(core::to_json(digest_doc));
  return out;
}

core::Value parse_node_selector(std::string_view flag, std::string_view text) {
  Value out = Value::map();
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      bad(flag, text,
          "expected LABEL=VALUE[,LABEL=VALUE...] (e.g. node-role.example.com/system=true)");
    }
    out[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

core::Value parse_toleration(std::string_view flag, std::string_view text) {
  Value t = Value::map();
  std::string_view rest = text;
  std::size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view effect = rest.substr(colon + 1);
    if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
      bad(flag, text,
          "effect '" + std::string(effect) +
              "' is not NoSchedule, PreferNoSchedule or NoExecute (format KEY[=VALUE][:EFFECT], "
              "as kubectl taint writes it)");
    }
    t["effect"] = std::string(effect);
    rest = rest.substr(0, colon);
  }
  std::size_t eq = rest.find('=');
  std::string_view key = rest.substr(0, eq);
  if (key.empty()) bad(flag, text, "the taint key is empty (format KEY[=VALUE][:EFFECT])");
  t["key"] = std::string(key);
  if (eq == std::string_view::npos) {
    t["operator"] = "Exists";
  } else {
    t["operator"] = "Equal";
    t["value"] = std::string(rest.substr(eq + 1));
  }
  return t;
}

namespace {

std::vector<Override> shortcut_overrides(const Recipe& r, const SchedulingShortcuts& s) {
  const std::string accelerated_flag =
      s.accelerated_node_selector_from_pools ? "nodePools" : "--accelerated-node-selector";
  std::vector<std::pair<std::string, std::pair<std::string, Value>>> items = {
      {"systemNodeSelector", {"--system-node-selector", s.system_node_selector}},
      {"systemTolerations", {"--system-toleration", s.system_tolerations}},
      {"acceleratedNodeSelector", {accelerated_flag, s.accelerated_node_selector}},
      {"acceleratedTolerations", {"--accelerated-toleration", s.accelerated_tolerations}},
      {"storageClass",
       {"--storage-class", s.storage_class.empty() ? Value() : Value(s.storage_class)}},
  };
  std::vector<Override> out;
  for (const Component& c : r.components) {
    for (const auto& [key, flag_value] : items) {
      const auto& [flag, value] = flag_value;
      const Value* paths = c.scheduling.find(key);
      if (value.is_null() || paths == nullptr) continue;
      for (const Value& p : paths->as_list()) {
        Override o;
        o.flag = flag;
        o.component = c.name;
        o.path = parse_value_path(p.as_string(), "registry scheduling." + key, p.as_string());
        o.given = c.name + ":" + p.as_string();
        o.value = value;
        out.push_back(std::move(o));
      }
    }
  }
  return out;
}

}  // namespace

std::vector<Override> scheduling_overrides(const Recipe& r, const SchedulingShortcuts& s) {
  return shortcut_overrides(r, s);
}

std::vector<Override> pool_selector_overrides(const Recipe& r, const SchedulingShortcuts& s) {
  if (!s.accelerated_node_selector.is_null() || r.pools.empty()) return {};
  // The labels all pools share: one DaemonSet selector must match every pool's nodes.
  Value common = Value::map();
  for (const auto& e : r.pools.front().node_selector.as_map()) {
    bool shared = true;
    for (const NodePool& p : r.pools) {
      const Value* v = p.node_selector.find(e.key);
      shared = shared && v != nullptr && *v == e.value;
    }
    if (shared) common[e.key] = e.value;
  }
  if (common.as_map().empty()) return {};
  SchedulingShortcuts only;
  only.accelerated_node_selector = std::move(common);
  only.accelerated_node_selector_from_pools = true;
  return shortcut_overrides(r, only);
}

core::Value overrides_record(const std::vector<Override>& overrides) {
  Value list = Value::list();
  for (const Override& o : overrides) {
    Value e = Value::map();
    e["flag"] = o.flag.rfind("-f ", 0) == 0 ? "-f" : o.flag;
    if (o.flag.rfind("-f ", 0) == 0) e["file"] = o.flag.substr(3);
    e["component"] = o.component;
    e["path"] = o.enabled_flag ? "enabled" : value_path_text(o.path);
    e["value"] = o.value;
    list.push_back(std::move(e));
  }
  return list;
}

}  // namespace gpufleet::recipe
