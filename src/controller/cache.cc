#include "controller/cache.h"

#include <algorithm>

#include "core/errors.h"

namespace gpufleet::controller {
namespace {

kube::InformerOptions informer_options(const kube::ResourceId& r, const CacheOptions& o) {
  kube::InformerOptions io;
  io.resource = r;
  io.namespace_ = o.namespace_;
  io.label_selector = o.label_selector;
  io.field_selector = o.field_selector;
  io.shape = o.shape;
  io.compact = o.compact;
  return io;
}

CacheOptions normalised(CacheOptions o) {
  auto& p = o.shape.prune;
  if (std::find(p.begin(), p.end(), "metadata.managedFields") == p.end())
    p.push_back("metadata.managedFields");
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return o;
}

}  // namespace

Cache::Cache(kube::Client& client, kube::ResourceId resource, CacheOptions options)
    : resource_(std::move(resource)),
      options_(normalised(std::move(options))),
      informer_(client, informer_options(resource_, options_)) {}

void Cache::add_index(const std::string& name, kube::IndexFunc func) {
  if (started_) {
    throw core::InvalidInput("index " + name + " on the " + resource_.qualified_name() +
                             " cache: indexes must be added before the manager runs");
  }
  if (std::find(indexes_.begin(), indexes_.end(), name) != indexes_.end()) return;
  indexes_.push_back(name);
  informer_.add_index(name, std::move(func));
}

void Cache::add_handlers(kube::EventHandlers handlers) {
  if (started_) {
    throw core::InvalidInput("the " + resource_.qualified_name() +
                             " cache is running: watches must be set up before the manager runs");
  }
  informer_.add_handlers(std::move(handlers));
}

void Cache::start() {
  started_ = true;
  informer_.start();
}

void Cache::stop() { informer_.stop(); }

std::string Cache::sharing_key(const kube::ResourceId& r, const CacheOptions& in) {
  CacheOptions o = normalised(in);
  std::string k = r.api_version() + "/" + r.resource + "|" + o.namespace_ + "|" + o.label_selector +
                  "|" + o.field_selector + "|" + (o.shape.metadata_only ? "meta" : "full") +
                  (o.compact ? "|compact" : "|plain");
  for (const auto& p : o.shape.prune) k += "|" + p;
  return k;
}

}  // namespace gpufleet::controller
