// A thread-safe object cache keyed by "namespace/name", with secondary indexes (by namespace,
// by node name, or any function of the object). Objects are immutable once stored and shared
// (shared_ptr<const Value>), so readers never copy and never see a half-updated object.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/value.h"

namespace gpufleet::kube {

using ObjectPtr = std::shared_ptr<const core::Value>;
// The index values of an object (an object may sit under several values, or none).
using IndexFunc = std::function<std::vector<std::string>(const core::Value&)>;

// Built-in index functions.
std::vector<std::string> index_by_namespace(const core::Value& obj);
std::vector<std::string> index_by_node_name(const core::Value& obj);  // Pod spec.nodeName

inline constexpr const char* kNamespaceIndex = "namespace";
inline constexpr const char* kNodeNameIndex = "nodeName";

class Store {
 public:
  // Adds an index; existing objects are indexed at once.
  void add_index(const std::string& name, IndexFunc func);

  // Inserts or replaces; returns the previous object under that key (null if none).
  ObjectPtr upsert(ObjectPtr obj);
  // Removes; returns the removed object (null if absent).
  ObjectPtr erase(const std::string& key);

  struct ReplaceResult {
    std::vector<std::pair<ObjectPtr, ObjectPtr>> changed;  // (old or null, new)
    std::vector<ObjectPtr> removed;                        // present before, gone now
  };
  // Replaces the whole content (after a list). Objects whose resourceVersion did not change
  // are not reported as changed; changes come in the order of `objects`.
  ReplaceResult replace(std::vector<ObjectPtr> objects);

  [[nodiscard]] ObjectPtr get(const std::string& key) const;
  [[nodiscard]] std::vector<ObjectPtr> list() const;
  [[nodiscard]] std::vector<std::string> keys() const;
  [[nodiscard]] std::size_t size() const;
  // Objects whose index `index` contains `value`. Throws core::InvalidInput for an unknown index.
  [[nodiscard]] std::vector<ObjectPtr> by_index(const std::string& index,
                                                const std::string& value) const;
  [[nodiscard]] std::vector<std::string> index_values(const std::string& index) const;

 private:
  void index_locked(const std::string& key, const core::Value* old_obj, const core::Value* new_obj);

  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, ObjectPtr> objects_;
  std::map<std::string, IndexFunc> index_funcs_;
  // index name -> index value -> keys
  std::map<std::string, std::unordered_map<std::string, std::set<std::string>>> indices_;
};

}  // namespace gpufleet::kube
