// A thread-safe object cache keyed by "namespace/name", with secondary indexes (by namespace,
// by node name, or any function of the object). Objects are immutable once stored and shared
// (shared_ptr<const Value>), so readers never copy and never see a half-updated object.
//
// A compact store (StoreOptions::compact) keeps each object as a CompactObject (kube/api/
// compact.h: one flat tape, interned strings; ~4-6x less memory for Nodes). Its readers that take
// core::Value (get, list, by_index) rebuild the Value per call; the *_compact readers and
// for_each_compact read the tape in place and cost nothing extra.
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
#include "kube/api/compact.h"

namespace gpufleet::kube {

using ObjectPtr = std::shared_ptr<const core::Value>;
// The index values of an object (an object may sit under several values, or none).
using IndexFunc = std::function<std::vector<std::string>(const core::Value&)>;

// Built-in index functions.
std::vector<std::string> index_by_namespace(const core::Value& obj);
std::vector<std::string> index_by_node_name(const core::Value& obj);  // Pod spec.nodeName

inline constexpr const char* kNamespaceIndex = "namespace";
inline constexpr const char* kNodeNameIndex = "nodeName";

struct StoreOptions {
  bool compact = false;
};

class Store {
 public:
  Store() = default;
  explicit Store(StoreOptions options) : options_(options) {}
  [[nodiscard]] bool compact() const noexcept { return options_.compact; }

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

  // ---- compact stores (each also works on a plain store, encoding or decoding per call) ----
  // Inserts or replaces; returns the previous object (null if none).
  CompactPtr upsert_compact(CompactPtr obj);
  CompactPtr erase_compact(const std::string& key);
  struct CompactReplaceResult {
    std::vector<std::pair<CompactPtr, CompactPtr>> changed;  // (old or null, new)
    std::vector<CompactPtr> removed;
  };
  CompactReplaceResult replace_compact(std::vector<CompactPtr> objects);
  [[nodiscard]] CompactPtr get_compact(const std::string& key) const;
  [[nodiscard]] std::vector<CompactPtr> list_compact() const;
  [[nodiscard]] std::vector<CompactPtr> by_index_compact(const std::string& index,
                                                         const std::string& value) const;
  // Calls fn for every object under the read lock (keep fn short; do not call the store).
  void for_each_compact(const std::function<void(const CompactObject&)>& fn) const;

 private:
  // One of the two is set: `value` in a plain store, `compact` in a compact one.
  struct Entry {
    ObjectPtr value;
    CompactPtr compact;
  };
  Entry make_entry(ObjectPtr obj) const;
  Entry make_entry(CompactPtr obj) const;
  static ObjectPtr value_of(const Entry& e);
  static CompactPtr compact_of(const Entry& e);
  static std::string_view resource_version_of_entry(const Entry& e);
  static std::string key_of(const Entry& e);
  void index_locked(const std::string& key, const Entry* old_obj, const Entry* new_obj);
  struct EntryDiff {
    std::vector<std::pair<Entry, Entry>> changed;
    std::vector<Entry> removed;
  };
  EntryDiff replace_entries(std::vector<Entry> objects);
  std::vector<const Entry*> by_index_locked(const std::string& index,
                                            const std::string& value) const;

  StoreOptions options_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Entry> objects_;
  std::map<std::string, IndexFunc> index_funcs_;
  // index name -> index value -> keys
  std::map<std::string, std::unordered_map<std::string, std::set<std::string>>> indices_;
};

}  // namespace gpufleet::kube
