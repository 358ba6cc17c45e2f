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

void Store::add_index(const std::string& name, IndexFunc func) {
  std::unique_lock lock(mu_);
  auto& idx = indices_[name];
  idx.clear();
  for (const auto& [key, obj] : objects_) {
    for (auto& v : func(*obj)) idx[std::move(v)].insert(key);
  }
  index_funcs_[name] = std::move(func);
}

void Store::index_locked(const std::string& key, const core::Value* old_obj,
                         const core::Value* new_obj) {
  for (const auto& [name, func] : index_funcs_) {
    auto& idx = indices_[name];
    if (old_obj != nullptr) {
      for (const auto& v : func(*old_obj)) {
        auto it = idx.find(v);
        if (it == idx.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.erase(it);
      }
    }
    if (new_obj != nullptr) {
      for (auto& v : func(*new_obj)) idx[std::move(v)].insert(key);
    }
  }
}

ObjectPtr Store::upsert(ObjectPtr obj) {
  std::string key = object_key(*obj);
  std::unique_lock lock(mu_);
  ObjectPtr& slot = objects_[key];
  ObjectPtr old = std::move(slot);
  index_locked(key, old.get(), obj.get());
  slot = std::move(obj);
  return old;
}

ObjectPtr Store::erase(const std::string& key) {
  std::unique_lock lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr old = std::move(it->second);
  objects_.erase(it);
  index_locked(key, old.get(), nullptr);
  return old;
}

Store::ReplaceResult Store::replace(std::vector<ObjectPtr> objects) {
  ReplaceResult result;
  std::unordered_map<std::string, ObjectPtr> fresh;
  fresh.reserve(objects.size());
  std::vector<std::string> order;  // changes are reported in the list's order
  order.reserve(objects.size());
  for (auto& o : objects) {
    std::string key = object_key(*o);
    if (fresh.insert_or_assign(key, std::move(o)).second) order.push_back(std::move(key));
  }
  std::unique_lock lock(mu_);
  for (auto& [key, obj] : objects_) {
    if (!fresh.contains(key)) {
      index_locked(key, obj.get(), nullptr);
      result.removed.push_back(obj);
    }
  }
  for (const std::string& key : order) {
    ObjectPtr& obj = fresh[key];
    auto it = objects_.find(key);
    ObjectPtr old = it == objects_.end() ? nullptr : it->second;
    if (old && resource_version_of(*old) == resource_version_of(*obj) &&
        !resource_version_of(*obj).empty()) {
      obj = old;  // unchanged: keep the cached instance
      continue;
    }
    index_locked(key, old.get(), obj.get());
    result.changed.emplace_back(std::move(old), obj);
  }
  objects_ = std::move(fresh);
  return result;
}

ObjectPtr Store::get(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::list() const {
  std::shared_lock lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(obj);
  return out;
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

std::vector<ObjectPtr> Store::by_index(const std::string& index, const std::string& value) const {
  std::shared_lock lock(mu_);
  auto idx = indices_.find(index);
  if (idx == indices_.end()) {
    throw core::InvalidInput("store has no index \"" + index + "\"; add it with add_index first");
  }
  std::vector<ObjectPtr> out;
  auto it = idx->second.find(value);
  if (it == idx->second.end()) return out;
  for (const auto& key : it->second) {
    if (auto o = objects_.find(key); o != objects_.end()) out.push_back(o->second);
  }
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
