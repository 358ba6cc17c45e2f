#include "kube/informer.h"

#include <cstdio>

#include "core/errors.h"
#include "kube/rate_limit.h"

namespace gpufleet::kube {

Informer::Informer(Client& client, InformerOptions options)
    : client_(client), options_(std::move(options)), store_(StoreOptions{options_.compact}) {}

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
      if (options_.transform) options_.transform(item);
      if (options_.compact) {
        compacts.push_back(CompactObject::encode(item));
      } else {
        values.push_back(std::make_shared<const core::Value>(std::move(item)));
      }
    };
    try {
      page = client_.list_page_streamed(options_.resource, options_.namespace_, lo, options_.shape,
                                        on_item);
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
  for (const auto& h : handlers_) {
    if (h.on_delete) {
      for (const auto& gone : diff.removed) h.on_delete(*gone, true);
    }
    for (const auto& [old_obj, new_obj] : diff.changed) {
      if (old_obj) {
        if (h.on_update) h.on_update(*old_obj, *new_obj);
      } else if (h.on_add) {
        h.on_add(*new_obj);
      }
    }
  }
}

// The same for a compact cache: each object is rebuilt once for all handlers, and only when
// some handler takes it.
void Informer::dispatch_replace(const Store::CompactReplaceResult& diff) {
  if (handlers_.empty()) return;
  for (const auto& gone : diff.removed) {
    core::Value v = gone->to_value();
    for (const auto& h : handlers_) {
      if (h.on_delete) h.on_delete(v, true);
    }
  }
  for (const auto& [old_obj, new_obj] : diff.changed) {
    core::Value fresh = new_obj->to_value();
    if (old_obj) {
      core::Value old = old_obj->to_value();
      for (const auto& h : handlers_) {
        if (h.on_update) h.on_update(old, fresh);
      }
    } else {
      for (const auto& h : handlers_) {
        if (h.on_add) h.on_add(fresh);
      }
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
    for (const auto& h : handlers_) {
      if (h.on_delete) h.on_delete(*final_state, false);
    }
  } else if (options_.compact) {
    // The decoded event is handed to handlers as it is; only the compact form is cached.
    if (options_.transform) options_.transform(ev.object);
    CompactPtr old = store_.upsert_compact(CompactObject::encode(ev.object));
    note_applied();
    bool any_update = false;
    for (const auto& h : handlers_) any_update = any_update || static_cast<bool>(h.on_update);
    core::Value old_value = old && any_update ? old->to_value() : core::Value();
    for (const auto& h : handlers_) {
      if (old) {
        if (h.on_update) h.on_update(old_value, ev.object);
      } else if (h.on_add) {
        h.on_add(ev.object);
      }
    }
  } else {
    ObjectPtr obj = prepare(std::move(ev.object));
    ObjectPtr old = store_.upsert(obj);
    note_applied();
    for (const auto& h : handlers_) {
      if (old) {
        if (h.on_update) h.on_update(*old, *obj);
      } else if (h.on_add) {
        h.on_add(*obj);
      }
    }
  }
}

// Every resync period: on_update(obj, obj) for each cached object, so that controllers
// re-check state they may have failed to act on.
void Informer::resync_loop() {
  for (;;) {
    if (!sleep_for(options_.resync_period)) return;
    if (!synced_) continue;
    std::lock_guard dispatch(dispatch_mu_);
    for (const auto& obj : store_.list()) {
      for (const auto& h : handlers_) {
        if (h.on_update) h.on_update(*obj, *obj);
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
    while (auto ev = stream->next()) {
      apply_event(*ev);
      if (stopping_) break;
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
