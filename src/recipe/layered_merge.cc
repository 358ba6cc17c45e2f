#include "recipe/layered_merge.h"

#include <algorithm>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::recipe {

namespace {

std::string child_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string show(const core::Value* v) {
  if (v == nullptr) return "a nested mapping";
  std::string s = core::to_json(*v, core::JsonStyle::Compact);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace

bool LayeredMerge::overrides(std::size_t newer, std::size_t older) const {
  const Layer& n = layers_[newer];
  const Layer& o = layers_[older];
  if (n.specificity != o.specificity) return n.specificity > o.specificity;
  bool in_lineage = std::find(n.lineage.begin(), n.lineage.end(), o.owner) != n.lineage.end();
  if (!in_lineage) return false;
  if (o.owner != n.owner) return true;  // an ancestor (or an ancestor's mixin)
  return o.mixin && !n.mixin;           // an overlay overrides its own mixins
}

void LayeredMerge::check(const std::string& path, const core::Value* old_value,
                         const core::Value& new_value) {
  std::size_t cur = layers_.size() - 1;
  auto within = [&](const std::string& p) { return p == path || p.rfind(path + ".", 0) == 0; };
  // Conflicts at or below `path` are settled when this layer overrides both sides.
  for (auto it = conflicts_.lower_bound(path); it != conflicts_.end() && within(it->first);) {
    if (overrides(cur, it->second.first) && overrides(cur, it->second.second)) {
      it = conflicts_.erase(it);
    } else {
      ++it;
    }
  }
  // Every recorded leaf at `path` or below it is replaced: each must be overridable.
  for (auto it = origin_.lower_bound(path); it != origin_.end() && within(it->first);) {
    std::size_t old_layer = it->second;
    bool same = old_value != nullptr && *old_value == new_value;
    if (!same && old_layer != cur && !overrides(cur, old_layer) && !conflicts_.count(it->first)) {
      conflicts_[it->first] = Conflict{
          old_layer, cur,
          "conflict at " + it->first + ": " + layers_[old_layer].origin + " sets " +
              show(it->first == path ? old_value : nullptr) + " and " + layers_[cur].origin +
              " sets " + show(&new_value) + "; both have specificity " +
              std::to_string(layers_[cur].specificity) +
              " and neither inherits from the other. Set it in one of them only, in a more "
              "specific overlay, or make one the parent of the other"};
    }
    it = origin_.erase(it);
  }
}

void LayeredMerge::finish() const {
  if (!conflicts_.empty()) throw core::InvalidInput(conflicts_.begin()->second.message);
}

void LayeredMerge::set_leaf(core::Value& dst, const core::Value& src, const std::string& path) {
  check(path, dst.is_map() ? nullptr : &dst, src);
  dst = src;
  origin_[path] = layers_.size() - 1;
}

void LayeredMerge::merge(core::Value& dst, const core::Value& src, const std::string& path) {
  for (const auto& e : src.as_map()) {
    std::string p = child_path(path, e.key);
    core::Value* existing = dst.find(e.key);
    if (e.value.is_map()) {  // mappings merge; an empty one adds nothing
      if (existing == nullptr) {
        dst[e.key] = core::Value::map();
        existing = dst.find(e.key);
        if (e.value.as_map().empty()) origin_[p] = layers_.size() - 1;
      } else if (!existing->is_map()) {
        check(p, existing, e.value);  // a leaf becomes a mapping
        *existing = core::Value::map();
      }
      merge(*existing, e.value, p);
    } else if (existing == nullptr) {
      dst[e.key] = e.value;
      origin_[p] = layers_.size() - 1;
    } else {
      set_leaf(*existing, e.value, p);
    }
  }
}

void LayeredMerge::apply(const core::Value& content, const Layer& layer) {
  layers_.push_back(layer);
  merge(result_, content, "");
}

}  // namespace gpufleet::recipe
