// Per-field merge of overlay content with provenance: maps merge key by key, anything else
// (scalars, lists, null) replaces. A field set by two layers of equal specificity, neither of
// which inherits from the other, to different values is a conflict naming both files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::recipe {

struct Layer {
  std::string origin;  // file named in conflict messages
  int specificity = 0;
  std::string owner;                 // the overlay this layer belongs to (or "registry", ...)
  std::vector<std::string> lineage;  // owner and its ancestors
  bool mixin = false;                // a mixin of `owner` (the owner itself overrides it)
};

class LayeredMerge {
 public:
  // Layers must come in ascending specificity. A conflict is remembered; it is settled when
  // a later layer overrides both sides (a more specific overlay), else finish() reports it.
  void apply(const core::Value& content, const Layer& layer);
  // Throws core::InvalidInput naming both files of the first unsettled conflict.
  void finish() const;
  const core::Value& result() const { return result_; }
  core::Value& result() { return result_; }

 private:
  void merge(core::Value& dst, const core::Value& src, const std::string& path);
  void set_leaf(core::Value& dst, const core::Value& src, const std::string& path);
  void check(const std::string& path, const core::Value* old_value, const core::Value& new_value);
  bool overrides(std::size_t newer, std::size_t older) const;

  core::Value result_ = core::Value::map();
  std::map<std::string, std::size_t> origin_;  // leaf path -> layer index
  std::vector<Layer> layers_;
  struct Conflict {
    std::size_t first, second;
    std::string message;
  };
  std::map<std::string, Conflict> conflicts_;  // path -> unsettled conflict
};

}  // namespace gpufleet::recipe
