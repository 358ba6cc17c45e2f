#include "kube/informer.h"

#include <cstdio>
#include <optional>

#include "core/errors.h"
#include "kube/api/compact_json.h"
#include "kube/api/trim.h"
#include "kube/rate_limit.h"

namespace gpufleet::kube {

namespace {

// Paths a projection always keeps: the cache keys objects by them and resumes from the last
// resourceVersion.
constexpr const char* kIdentityPaths[] = {"metadata.name", "metadata.namespace",
                                          "metadata.resourceVersion"};

// One object as handlers take it: the form the informer has, the other built on first use and
// then shared by every handler of the event.
class HandlerObject {
 public:
  explicit HandlerObject(const core::Value& v) : value_(&v) {}
  explicit HandlerObject(const CompactObject& c) : compact_(&c) {}
  const core::Value& value() {
    if (value_ == nullptr) value_ = &built_value_.emplace(compact_->to_value());
    return *value_;
  }
  const CompactObject& compact() {
    if (compact_ == nullptr) {
      built_compact_ = CompactObject::encode(*value_);
      compact_ = built_compact_.get();
    }
    return *compact_;
  }

 private:
  const core::Value* value_ = nullptr;
  const CompactObject* compact_ = nullptr;
  std::optional<core::Value> built_value_;
  CompactPtr built_compact_;
};

void notify_add(const std::vector<EventHandlers>& handlers, HandlerObject& obj) {
  for (const auto& h : handlers) {
    if (h.on_add) h.on_add(obj.value());
    if (h.on_add_compact) h.on_add_compact(obj.compact());
  }
}

void notify_update(const std::vector<EventHandlers>& handlers, HandlerObject& old_obj,
                   HandlerObject& new_obj) {
  for (const auto& h : handlers) {
    if (h.on_update) h.on_update(old_obj.value(), new_obj.value());
    if (h.on_update_compact) h.on_update_compact(old_obj.compact(), new_obj.compact());
  }
}

void notify_delete(const std::vector<EventHandlers>& handlers, HandlerObject& obj,
                   bool final_state_unknown) {
  for (const auto& h : handlers) {
    if (h.on_delete) h.on_delete(obj.value(), final_state_unknown);
    if (h.on_delete_compact) h.on_delete_compact(obj.compact(), final_state_unknown);
  }
}

}  // namespace

Informer::Informer(Client& client, InformerOptions options)
    : client_(client), options_(std::move(options)), store_(StoreOptions{options_.compact}) {
  for (const auto& p : options_.shape.prune) prune_tree_.add(p);
  decode_shape_.prune = &prune_tree_;
  if (!options_.project.empty()) {
    for (const auto& p : options_.project) keep_tree_.add(p);
    for (const char* p : kIdentityPaths) keep_tree_.add(p);
    decode_shape_.keep = &keep_tree_;
  }
  if (options_.protobuf && direct() && !options_.shape.metadata_only) {
    protobuf_kind_ = ProtobufKind::for_resource(options_.resource.group, options_.resource.version,
                                                options_.resource.resource);
    use_protobuf_ = protobuf_kind_.has_value();
  }
}

Informer::~Informer() { stop(); }

void Informer::add_index(const std::string& name, IndexFunc func) {
  store_.add_index(name, std::move(func));
}

void Informer::add_handlers(EventHandlers handlers) {
  if (thread_.joinable()) {
    throw core::InvalidInput("Informer::add_handlers: add handlers before start()");
  }
  handlers_.push_back(std::move(handlers));
}

void Informer::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
  if (options_.resync_period.count() > 0) resync_thread_ = std::thread([this] { resync_loop(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (current_watch_ != nullptr) current_watch_->cancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (resync_thread_.joinable()) resync_thread_.join();
}

bool Informer::wait_for_sync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return synced_.load() || stopping_.load(); }) &&
         synced_.load();
}

std::string Informer::resource_version() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

Informer::Stats Informer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string Informer::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void Informer::set_error(const std::string& e) {
  std::lock_guard lock(mu_);
  last_error_ = e;
  ++stats_.failures;
}

bool Informer::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stopping_.load(); });
}

ObjectPtr Informer::prepare(core::Value obj) {
  if (!options_.project.empty()) {
    // Built per call: informers that project without transforming take the direct path.
    Projection keep(options_.project);
    for (const char* p : kIdentityPaths) keep.keep(p);
    obj = keep.apply(std::move(obj));
  }
  if (options_.transform) options_.transform(obj);
  return std::make_shared<const core::Value>(std::move(obj));
}

bool Informer::list_and_replace(bool from_watch_cache) {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  if (from_watch_cache) lo.resource_version = "0";
  // Pages are decoded as they stream in, one item at a time, each turned into its cached form at
  // once: neither a page's text nor its tree is ever held whole beside the cache being built.
  std::vector<ObjectPtr> values;
  std::vector<CompactPtr> compacts;
  std::string list_rv;
  bool restarted = false;
  for (;;) {
    ListResult page;
    // Each item is cached as soon as it is decoded (compacted at once in a compact cache).
    auto on_item = [&](core::Value&& item) {
      ObjectPtr obj = prepare(std::move(item));
      if (options_.compact) {
        compacts.push_back(CompactObject::encode(*obj));
      } else {
        values.push_back(std::move(obj));
      }
    };
    // A compact cache without a transform: each item's text straight into its cached form.
    auto on_item_text = [&](std::string_view text) {
      compacts.push_back(decode_compact_json(text, decode_shape_, "list item"));
    };
    auto on_item_message = [&](std::string_view message) {
      compacts.push_back(
          decode_compact_protobuf(message, *protobuf_kind_, decode_shape_, nullptr, "list item"));
    };
    try {
      if (use_protobuf_) {
        page = client_.list_page_streamed_wire(options_.resource, options_.namespace_, lo,
                                               on_item_text, on_item_message);
      } else if (direct()) {
        page = client_.list_page_streamed_text(options_.resource, options_.namespace_, lo,
                                               options_.shape.metadata_only, on_item_text);
      } else {
        page = client_.list_page_streamed(options_.resource, options_.namespace_, lo,
                                          options_.shape, on_item);
      }
    } catch (const ApiError& e) {
      // The continue token's snapshot was compacted away: start over once, consistently.
      if (e.is(Reason::Gone) && !lo.continue_token.empty() && !restarted) {
        restarted = true;
        values.clear();
        compacts.clear();
        list_rv.clear();
        lo.continue_token.clear();
        continue;
      }
      throw;
    }
    if (list_rv.empty()) list_rv = page.resource_version;
    if (page.protobuf) {
      std::lock_guard lock(mu_);
      ++stats_.protobuf_lists;
    }
    if (page.continue_token.empty()) break;
    lo.continue_token = std::move(page.continue_token);
    // Later pages come from the first page's snapshot; resourceVersion must not be set.
    lo.resource_version.clear();
    lo.resource_version_match.clear();
  }
  {
    std::lock_guard dispatch(dispatch_mu_);
    if (options_.compact) {
      dispatch_replace(store_.replace_compact(std::move(compacts)));
    } else {
      dispatch_replace(store_.replace(std::move(values)));
    }
  }
  {
    std::lock_guard lock(mu_);
    resource_version_ = list_rv;
    ++stats_.lists;
    last_error_.clear();
  }
  if (!synced_.exchange(true)) cv_.notify_all();
  return true;
}

// Handlers first for removals (objects deleted while no watch was running), then changes.
void Informer::dispatch_replace(const Store::ReplaceResult& diff) {
  if (handlers_.empty()) return;
  for (const auto& gone : diff.removed) {
    HandlerObject o(*gone);
    notify_delete(handlers_, o, true);
  }
  for (const auto& [old_obj, new_obj] : diff.changed) {
    HandlerObject fresh(*new_obj);
    if (old_obj) {
      HandlerObject old(*old_obj);
      notify_update(handlers_, old, fresh);
    } else {
      notify_add(handlers_, fresh);
    }
  }
}

// The same for a compact cache: each object is rebuilt as a core::Value once for all handlers,
// and only when some handler takes that form.
void Informer::dispatch_replace(const Store::CompactReplaceResult& diff) {
  if (handlers_.empty()) return;
  for (const auto& gone : diff.removed) {
    HandlerObject o(*gone);
    notify_delete(handlers_, o, true);
  }
  for (const auto& [old_obj, new_obj] : diff.changed) {
    HandlerObject fresh(*new_obj);
    if (old_obj) {
      HandlerObject old(*old_obj);
      notify_update(handlers_, old, fresh);
    } else {
      notify_add(handlers_, fresh);
    }
  }
}

void Informer::apply_event(WatchEvent& ev) {
  std::string rv(resource_version_of(ev.object));
  if (ev.type == WatchEvent::Type::Bookmark) {
    std::lock_guard lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    return;
  }
  std::lock_guard dispatch(dispatch_mu_);
  // Book-keeping first, so that anyone who observes a handler's effect also sees the event
  // counted and the cache's resourceVersion advanced.
  auto note_applied = [&] {
    std::lock_guard lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    ++stats_.events;
    last_error_.clear();
  };
  if (ev.type == WatchEvent::Type::Deleted) {
    if (options_.compact) {
      store_.erase_compact(object_key(ev.object));
    } else {
      store_.erase(object_key(ev.object));
    }
    note_applied();
    ObjectPtr final_state = prepare(std::move(ev.object));
    HandlerObject o(*final_state);
    notify_delete(handlers_, o, false);
  } else if (options_.compact) {
    // The decoded event is handed to core::Value handlers as it is; only the compact form is
    // cached.
    ObjectPtr obj = prepare(std::move(ev.object));
    CompactPtr fresh = CompactObject::encode(*obj);
    CompactPtr old = store_.upsert_compact(fresh);
    note_applied();
    HandlerObject now(*obj);
    if (old) {
      HandlerObject before(*old);
      notify_update(handlers_, before, now);
    } else {
      notify_add(handlers_, now);
    }
  } else {
    ObjectPtr obj = prepare(std::move(ev.object));
    ObjectPtr old = store_.upsert(obj);
    note_applied();
    HandlerObject now(*obj);
    if (old) {
      HandlerObject before(*old);
      notify_update(handlers_, before, now);
    } else {
      notify_add(handlers_, now);
    }
  }
}

// A compact cache without a transform: the event's object arrives in its cached form; no
// core::Value is built unless a handler takes one.
void Informer::apply_compact_event(CompactWatchEvent& ev) {
  std::string rv(ev.object->resource_version());
  if (ev.type == WatchEvent::Type::Bookmark) {
    std::lock_guard lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    return;
  }
  std::lock_guard dispatch(dispatch_mu_);
  {
    std::lock_guard lock(mu_);
    if (!rv.empty()) resource_version_ = rv;
    ++stats_.events;
    last_error_.clear();
  }
  std::string key = object_key(ev.object->namespace_(), ev.object->name());
  if (ev.type == WatchEvent::Type::Deleted) {
    store_.erase_compact(key);
    HandlerObject o(*ev.object);
    notify_delete(handlers_, o, false);
    return;
  }
  CompactPtr old = store_.upsert_compact(ev.object);
  HandlerObject now(*ev.object);
  if (old) {
    HandlerObject before(*old);
    notify_update(handlers_, before, now);
  } else {
    notify_add(handlers_, now);
  }
}

// Every resync period: on_update(obj, obj) for each cached object, so that controllers
// re-check state they may have failed to act on.
void Informer::resync_loop() {
  for (;;) {
    if (!sleep_for(options_.resync_period)) return;
    if (!synced_) continue;
    std::lock_guard dispatch(dispatch_mu_);
    if (store_.compact()) {
      for (const auto& obj : store_.list_compact()) {
        HandlerObject o(*obj);
        notify_update(handlers_, o, o);
      }
    } else {
      for (const auto& obj : store_.list()) {
        HandlerObject o(*obj);
        notify_update(handlers_, o, o);
      }
    }
  }
}

// One watch request from the current resourceVersion. Returns true when the watch ended
// normally (server timeout: watch again), false when the cache must be relisted (410 Gone).
// Throws on other failures (the caller backs off and resumes from the same version).
bool Informer::watch_once() {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.resource_version = resource_version();
  wo.allow_bookmarks = true;
  wo.protobuf = use_protobuf_;
  wo.timeout_seconds = options_.watch_timeout_seconds +
                       static_cast<int>(options_.watch_timeout_seconds * random_fraction());
  std::unique_ptr<WatchStream> stream =
      client_.watch(options_.resource, options_.namespace_, wo, options_.shape);
  {
    std::lock_guard lock(mu_);
    ++stats_.watches;
    if (stopping_) return true;
    current_watch_ = stream.get();
  }
  struct Detach {
    Informer* self;
    ~Detach() {
      std::lock_guard lock(self->mu_);
      self->current_watch_ = nullptr;
    }
  } detach{this};
  try {
    if (direct()) {
      bool counted = false;
      while (auto ev = stream->next_compact(decode_shape_)) {
        if (!counted && stream->protobuf()) {
          counted = true;
          std::lock_guard lock(mu_);
          ++stats_.protobuf_watches;
        }
        apply_compact_event(*ev);
        if (stopping_) break;
      }
    } else {
      while (auto ev = stream->next()) {
        apply_event(*ev);
        if (stopping_) break;
      }
    }
  } catch (const ApiError& e) {
    if (e.is(Reason::Gone) || e.is(Reason::Expired)) {
      std::lock_guard lock(mu_);
      ++stats_.gone;
      return false;
    }
    throw;
  }
  return true;
}

void Informer::run() {
  Backoff backoff(options_.backoff_base, options_.backoff_max);
  // After stop() and start() the cache resumes watching from where it stopped; the server
  // answers 410 if that version is gone, and the relist then catches up.
  bool need_list = !synced_ || resource_version().empty();
  while (!stopping_) {
    try {
      if (need_list) {
        list_and_replace(/*from_watch_cache=*/!synced_);
        need_list = false;
        backoff.reset();
      }
      auto before = stats().events;
      auto started = std::chrono::steady_clock::now();
      need_list = !watch_once();
      if (need_list) continue;  // 410: relist at once
      if (stats().events != before) {
        backoff.reset();
      } else if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
        // A watch that ends at once without events (a server shutting down) must not spin.
        if (!sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(backoff.next())))
          break;
      }
    } catch (const UnsupportedProtobuf& e) {
      if (stopping_) break;
      // The server sent what this build's schema lacks: JSON from now on, at once (a list
      // that failed is redone; a watch resumes from the last event applied).
      use_protobuf_ = false;
      set_error(std::string(e.what()) + "; this informer uses JSON from now on");
    } catch (const std::exception& e) {
      if (stopping_) break;
      // The watch broke (server restart, network) or the list failed: back off and resume from
      // the last resourceVersion seen, so that no event is skipped; a version that is too old
      // by then comes back as 410 and triggers a relist.
      set_error(e.what());
      if (!sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(backoff.next()))) break;
    }
  }
}

}  // namespace gpufleet::kube
