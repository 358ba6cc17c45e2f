// Value overrides applied at bundle time, on top of a recipe: `--set comp:path=value`,
// `--set-json comp:path=JSON`, `--set-file comp:path=FILE`, `-f overrides.yaml` and
// `comp:enabled=false` (the component is left out; its dependents treat it as installed by
// someone else). The bundle records them (overrides.yaml) and folds them into its digest.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/value.h"
#include "recipe/recipe.h"

namespace gpufleet::recipe {

// One step of a value path: a map key or a list index ("a.b[0].c" -> a, b, 0, c).
using PathStep = std::variant<std::string, std::size_t>;

struct Override {
  std::string flag;            // the flag it came from ("--set", "-f overrides.yaml", ...)
  std::string given;           // the text as given, for messages
  std::string component;       // component name
  std::vector<PathStep> path;  // inside the component's values; empty with `enabled`
  bool enabled_flag = false;   // comp:enabled=...: keep or leave out the component
  core::Value value;
};

// "a.b[0].c"; `\.` keeps a dot inside a key ("nvidia\.com/gpu"). Throws InvalidInput naming
// `flag` and `given` for an empty key or a malformed index.
std::vector<PathStep> parse_value_path(std::string_view path, std::string_view flag,
                                       std::string_view given);
std::string value_path_text(const std::vector<PathStep>& path);

// --set comp:path=value (value typed like Helm's --set: true/false, null, integers; text
// otherwise), --set-json comp:path=JSON, --set-file comp:path=FILE (the file's text).
Override parse_set(std::string_view given);
Override parse_set_json(std::string_view given);
Override parse_set_file(std::string_view given);
// -f FILE: {<component>: {enabled: bool, values: {...}}}; every leaf of `values` becomes one
// override (lists replace as a whole, like Helm's -f).
std::vector<Override> parse_overrides_file(std::string_view text, std::string_view file);

// Scheduling shortcuts: where system pods (operators, controllers) and accelerated pods (GPU
// node agents, device plugins) run, and the storage class of persistent volumes. Each is
// written to the value paths the registry declares per component (Component::scheduling).
struct SchedulingShortcuts {
  core::Value system_node_selector;  // map, or null when not given
  core::Value system_tolerations;    // list, or null
  core::Value accelerated_node_selector;
  core::Value accelerated_tolerations;
  std::string storage_class;
  bool accelerated_node_selector_from_pools = false;  // set by pool_selector_overrides
};

// "k=v,k2=v2" -> {k: v, k2: v2}; throws InvalidInput naming `flag`.
core::Value parse_node_selector(std::string_view flag, std::string_view text);
// kubectl taint syntax: "key=value:Effect", "key:Effect" or "key" (any effect, operator
// Exists without a value); throws InvalidInput naming `flag`.
core::Value parse_toleration(std::string_view flag, std::string_view text);

// The overrides the shortcuts given stand for, in component order.
std::vector<Override> scheduling_overrides(const Recipe& r, const SchedulingShortcuts& s);
// Without an accelerated node selector, the node pools' selector is fed in: the labels every
// pool's nodeSelector shares (one pool: its whole selector), flag "nodePools". Derived from
// the recipe alone, so the recipe's digest already covers them.
std::vector<Override> pool_selector_overrides(const Recipe& r, const SchedulingShortcuts& s);

// Applies the overrides in order to a copy of `r`: values set at their path (lists grow by
// appending at index == size), components with enabled=false removed from the recipe and from
// their dependents' dependencies (order and levels recomputed). The digest becomes the
// SHA-256 of the recipe's digest and the record below. Throws InvalidInput naming the flag,
// the value and the fix (unknown component, index out of range, a path through a scalar).
Recipe apply_overrides(const Recipe& r, const std::vector<Override>& overrides);

// The overrides.yaml document of a bundle: every override in order with its flag, component,
// path and value (a canonical form: the same overrides give the same bytes).
core::Value overrides_record(const std::vector<Override>& overrides);

}  // namespace gpufleet::recipe
