#include "kube/api/store.h"

#include <mutex>

#include "core/errors.h"
#include "kube/api/meta.h"

namespace gpufleet::kube {

std::vector<std::string> index_by_namespace(const core::Value& obj) {
  return {std::string(namespace_of(obj))};
}

std::vector<std::string> index_by_node_name(const core::Value& obj) {
  std::string_view node = obj.get_string({"spec", "nodeName"});
  if (node.empty()) return {};
  return {std::string(node)};
}

Store::Entry Store::make_entry(ObjectPtr obj) const {
  if (!options_.compact) return {std::move(obj), nullptr};
  return {nullptr, CompactObject::encode(*obj)};
}

Store::Entry Store::make_entry(CompactPtr obj) const {
  if (options_.compact) return {nullptr, std::move(obj)};
  return {std::make_shared<const core::Value>(obj->to_value()), nullptr};
}

ObjectPtr Store::value_of(const Entry& e) {
  if (e.value || !e.compact) return e.value;
  return std::make_shared<const core::Value>(e.compact->to_value());
}

CompactPtr Store::compact_of(const Entry& e) {
  if (e.compact || !e.value) return e.compact;
  return CompactObject::encode(*e.value);
}

std::string_view Store::resource_version_of_entry(const Entry& e) {
  return e.compact ? e.compact->resource_version() : resource_version_of(*e.value);
}

std::string Store::key_of(const Entry& e) {
  return e.compact ? object_key(e.compact->namespace_(), e.compact->name()) : object_key(*e.value);
}

void Store::add_index(const std::string& name, IndexFunc func) {
  std::unique_lock lock(mu_);
  auto& idx = indices_[name];
  idx.clear();
  for (const auto& [key, entry] : objects_) {
    for (auto& v : func(*value_of(entry))) idx[std::move(v)].insert(key);
  }
  index_funcs_[name] = std::move(func);
}

// Index functions take a core::Value: a compact entry is rebuilt once for all of them, and only
// when there is an index at all.
void Store::index_locked(const std::string& key, const Entry* old_obj, const Entry* new_obj) {
  if (index_funcs_.empty()) return;
  ObjectPtr old_value = old_obj != nullptr ? value_of(*old_obj) : nullptr;
  ObjectPtr new_value = new_obj != nullptr ? value_of(*new_obj) : nullptr;
  for (const auto& [name, func] : index_funcs_) {
    auto& idx = indices_[name];
    if (old_value) {
      for (const auto& v : func(*old_value)) {
        auto it = idx.find(v);
        if (it == idx.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
    }
    if (new_value) {
      for (auto& v : func(*new_value)) idx[std::move(v)].insert(key);
    }
  }
}

ObjectPtr Store::upsert(ObjectPtr obj) {
  std::string key = object_key(*obj);
  Entry fresh = make_entry(std::move(obj));
  std::unique_lock lock(mu_);
  Entry& slot = objects_[key];
  Entry old = std::move(slot);
  bool had = old.value || old.compact;
  index_locked(key, had ? &old : nullptr, &fresh);
  slot = std::move(fresh);
  lock.unlock();
  return had ? value_of(old) : nullptr;
}

CompactPtr Store::upsert_compact(CompactPtr obj) {
  std::string key = object_key(obj->namespace_(), obj->name());
  Entry fresh = make_entry(std::move(obj));
  std::unique_lock lock(mu_);
  Entry& slot = objects_[key];
  Entry old = std::move(slot);
  bool had = old.value || old.compact;
  index_locked(key, had ? &old : nullptr, &fresh);
  slot = std::move(fresh);
  lock.unlock();
  return had ? compact_of(old) : nullptr;
}

ObjectPtr Store::erase(const std::string& key) {
  std::unique_lock lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  Entry old = std::move(it->second);
  objects_.erase(it);
  index_locked(key, &old, nullptr);
  lock.unlock();
  return value_of(old);
}

CompactPtr Store::erase_compact(const std::string& key) {
  std::unique_lock lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  Entry old = std::move(it->second);
  objects_.erase(it);
  index_locked(key, &old, nullptr);
  lock.unlock();
  return compact_of(old);
}

Store::EntryDiff Store::replace_entries(std::vector<Entry> objects) {
  EntryDiff result;
  std::unordered_map<std::string, Entry> fresh;
  fresh.reserve(objects.size());
  std::vector<std::string> order;  // changes are reported in the list's order
  order.reserve(objects.size());
  for (auto& o : objects) {
    std::string key = key_of(o);
    if (fresh.insert_or_assign(key, std::move(o)).second) order.push_back(std::move(key));
  }
  std::unique_lock lock(mu_);
  for (auto& [key, obj] : objects_) {
    if (!fresh.contains(key)) {
      index_locked(key, &obj, nullptr);
      result.removed.push_back(obj);
    }
  }
  for (const std::string& key : order) {
    Entry& obj = fresh[key];
    auto it = objects_.find(key);
    Entry old = it == objects_.end() ? Entry{} : it->second;
    bool had = old.value || old.compact;
    if (had && resource_version_of_entry(old) == resource_version_of_entry(obj) &&
        !resource_version_of_entry(obj).empty()) {
      obj = old;  // unchanged: keep the cached instance
      continue;
    }
    index_locked(key, had ? &old : nullptr, &obj);
    result.changed.emplace_back(std::move(old), obj);
  }
  objects_ = std::move(fresh);
  return result;
}

Store::ReplaceResult Store::replace(std::vector<ObjectPtr> objects) {
  std::vector<Entry> entries;
  entries.reserve(objects.size());
  for (auto& o : objects) entries.push_back(make_entry(std::move(o)));
  objects.clear();
  EntryDiff diff = replace_entries(std::move(entries));
  ReplaceResult result;
  for (auto& [old, fresh] : diff.changed) {
    bool had = old.value || old.compact;
    result.changed.emplace_back(had ? value_of(old) : nullptr, value_of(fresh));
  }
  for (auto& gone : diff.removed) result.removed.push_back(value_of(gone));
  return result;
}

Store::CompactReplaceResult Store::replace_compact(std::vector<CompactPtr> objects) {
  std::vector<Entry> entries;
  entries.reserve(objects.size());
  for (auto& o : objects) entries.push_back(make_entry(std::move(o)));
  objects.clear();
  EntryDiff diff = replace_entries(std::move(entries));
  CompactReplaceResult result;
  for (auto& [old, fresh] : diff.changed) {
    bool had = old.value || old.compact;
    result.changed.emplace_back(had ? compact_of(old) : nullptr, compact_of(fresh));
  }
  for (auto& gone : diff.removed) result.removed.push_back(compact_of(gone));
  return result;
}

ObjectPtr Store::get(const std::string& key) const {
  Entry e;
  {
    std::shared_lock lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return nullptr;
    e = it->second;
  }
  return value_of(e);
}

CompactPtr Store::get_compact(const std::string& key) const {
  Entry e;
  {
    std::shared_lock lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return nullptr;
    e = it->second;
  }
  return compact_of(e);
}

std::vector<ObjectPtr> Store::list() const {
  std::vector<Entry> entries;
  {
    std::shared_lock lock(mu_);
    entries.reserve(objects_.size());
    for (const auto& [key, obj] : objects_) entries.push_back(obj);
  }
  std::vector<ObjectPtr> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(value_of(e));
  return out;
}

std::vector<CompactPtr> Store::list_compact() const {
  std::vector<Entry> entries;
  {
    std::shared_lock lock(mu_);
    entries.reserve(objects_.size());
    for (const auto& [key, obj] : objects_) entries.push_back(obj);
  }
  std::vector<CompactPtr> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(compact_of(e));
  return out;
}

void Store::for_each_compact(const std::function<void(const CompactObject&)>& fn) const {
  std::shared_lock lock(mu_);
  for (const auto& [key, obj] : objects_) {
    if (obj.compact) {
      fn(*obj.compact);
    } else {
      fn(*CompactObject::encode(*obj.value));
    }
  }
}

std::vector<std::string> Store::keys() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(key);
  return out;
}

std::size_t Store::size() const {
  std::shared_lock lock(mu_);
  return objects_.size();
}

std::vector<const Store::Entry*> Store::by_index_locked(const std::string& index,
                                                        const std::string& value) const {
  auto idx = indices_.find(index);
  if (idx == indices_.end()) {
    throw core::InvalidInput("store has no index \"" + index + "\"; add it with add_index first");
  }
  std::vector<const Entry*> out;
  auto it = idx->second.find(value);
  if (it == idx->second.end()) return out;
  for (const auto& key : it->second) {
    if (auto o = objects_.find(key); o != objects_.end()) out.push_back(&o->second);
  }
  return out;
}

std::vector<ObjectPtr> Store::by_index(const std::string& index, const std::string& value) const {
  std::vector<Entry> entries;
  {
    std::shared_lock lock(mu_);
    for (const Entry* e : by_index_locked(index, value)) entries.push_back(*e);
  }
  std::vector<ObjectPtr> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(value_of(e));
  return out;
}

std::vector<CompactPtr> Store::by_index_compact(const std::string& index,
                                                const std::string& value) const {
  std::vector<Entry> entries;
  {
    std::shared_lock lock(mu_);
    for (const Entry* e : by_index_locked(index, value)) entries.push_back(*e);
  }
  std::vector<CompactPtr> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(compact_of(e));
  return out;
}

std::vector<std::string> Store::index_values(const std::string& index) const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  auto idx = indices_.find(index);
  if (idx == indices_.end()) return out;
  for (const auto& [v, keys] : idx->second) out.push_back(v);
  return out;
}

}  // namespace gpufleet::kube
