// A cache shared by every controller of a Manager that watches the same (resource,
// namespace, label and field selectors, shape): one list+watch and one copy of the objects however
// many controllers read them. Reconcilers read from it (never from the API server in the hot path);
// writes go to the API server and come back through the watch.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kube/informer.h"

namespace gpufleet::controller {

struct CacheOptions {
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;  // e.g. "spec.nodeName!=" for pods bound to a node
  // What is cached (see kube::ObjectShape). metadata.managedFields is always pruned:
  // controllers write with server-side apply and never need to read it.
  kube::ObjectShape shape;
  // Cache the compact form (kube/api/compact.h): ~6x less memory per Node than core::Value
  // trees, so 5,000 Nodes fit a controller's budget. get/list/by_index rebuild a Value per
  // call; hot paths that scan many objects use for_each_compact / get_compact instead.
  bool compact = true;
};

class Cache {
 public:
  Cache(kube::Client& client, kube::ResourceId resource, CacheOptions options);
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  [[nodiscard]] const kube::ResourceId& resource() const noexcept { return resource_; }
  [[nodiscard]] const CacheOptions& options() const noexcept { return options_; }

  // Reads (thread-safe, no copies: objects are immutable and shared).
  [[nodiscard]] kube::ObjectPtr get(const std::string& key) const {
    return informer_.store().get(key);
  }
  [[nodiscard]] std::vector<kube::ObjectPtr> list() const { return informer_.store().list(); }
  [[nodiscard]] std::vector<kube::ObjectPtr> by_index(const std::string& index,
                                                      const std::string& value) const {
    return informer_.store().by_index(index, value);
  }
  // Reads of the compact form in place (no Value rebuilt): for scans over thousands of objects.
  [[nodiscard]] kube::CompactPtr get_compact(const std::string& key) const {
    return informer_.store().get_compact(key);
  }
  void for_each_compact(const std::function<void(const kube::CompactObject&)>& fn) const {
    informer_.store().for_each_compact(fn);
  }
  [[nodiscard]] std::size_t size() const { return informer_.store().size(); }
  [[nodiscard]] bool has_synced() const noexcept { return informer_.has_synced(); }
  [[nodiscard]] const kube::Informer& informer() const noexcept { return informer_; }

  // Before the Manager runs (throws core::InvalidInput after): an index by name; adding the
  // same name twice keeps the first (controllers sharing a cache may each ask for it).
  void add_index(const std::string& name, kube::IndexFunc func);
  // Before the Manager runs: event handlers (the Manager adds each controller's).
  void add_handlers(kube::EventHandlers handlers);

  // The Manager's lifecycle.
  void start();
  void stop();
  // The key the Manager shares caches by.
  static std::string sharing_key(const kube::ResourceId& r, const CacheOptions& o);

 private:
  kube::ResourceId resource_;
  CacheOptions options_;
  kube::Informer informer_;
  std::vector<std::string> indexes_;
  bool started_ = false;
};

}  // namespace gpufleet::controller
