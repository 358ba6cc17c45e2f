// An informer keeps a local cache of one resource in step with the server: it lists, then
// watches from the list's resourceVersion, resumes the watch from the last version it saw
// after a disconnect, relists after 410 Gone, and calls handlers for every change. Objects can
// be trimmed (pruned paths, a transform, metadata only) before they are cached.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/api/compact_protobuf.h"
#include "kube/api/store.h"
#include "kube/client.h"

namespace gpufleet::kube {

struct InformerOptions {
  ResourceId resource;
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  // What is cached: metadata_only uses PartialObjectMetadata; prune drops paths while decoding
  // (e.g. {"status.images", "metadata.managedFields"} for Nodes).
  ObjectShape shape;
  // Keeps only these dotted paths of each object (kube/api/trim.h Projection rules, e.g.
  // node_health_fields()); empty keeps everything. metadata.name, .namespace and
  // .resourceVersion are always kept: the cache keys and resumes by them. In a compact cache
  // without a transform the projection is applied while decoding, so the dropped parts are
  // never built; otherwise it runs on the decoded core::Value, before the transform.
  std::vector<std::string> project;
  // Runs on each object after decoding and before caching (drop more, normalise). Optional.
  // A compact cache with a transform decodes each object into a core::Value first (slower);
  // prefer `prune` and `project` where they say what is needed.
  std::function<void(core::Value&)> transform;
  // Cache the compact form (kube/api/compact.h): a fraction of the memory per object. Without a
  // transform each list item and watch event is decoded straight from its JSON text into the
  // compact form (kube/api/compact_json.h): no core::Value tree is built at all.
  // store().get/list/by_index then rebuild a core::Value per call; get_compact and friends
  // read in place. Handlers taking core::Value get objects rebuilt from the compact form (once
  // per event for all of them); the *_compact handlers get the cached objects themselves.
  bool compact = false;
  // Ask the API server for protobuf instead of JSON where this build can decode it straight
  // into the compact form: core/v1 nodes and pods, compact, without a transform, not
  // metadata_only (kube/api/compact_protobuf.h). The cached objects are the same as with JSON;
  // the server encodes a Node list in about half the time. Content the compiled-in schema
  // lacks where the cache keeps it (a newer server's new field) switches this informer back
  // to JSON for good (last_error() says why).
  bool protobuf = true;
  // Every resync period handlers get on_update(obj, obj) for each cached object; 0 = never.
  std::chrono::milliseconds resync_period{0};
  std::int64_t page_size = 500;
  // Watches last a random time in [t, 2t) so that many informers do not reconnect at once.
  int watch_timeout_seconds = 300;
  // Backoff between failed attempts (list or watch); reset after a successful event.
  std::chrono::milliseconds backoff_base{800};
  std::chrono::milliseconds backoff_max{30000};
};

// Handlers run one at a time, in event order, on the informer's thread (resyncs on a timer
// thread, serialised with events); keep them short (enqueue a key into a WorkQueue and return).
//
// Each event goes to whichever form of a handler is set (both when both are): the core::Value
// ones, or the *_compact ones, which read the compact form in place. In a compact informer the
// compact handlers cost nothing (no object is rebuilt, the old object of an update is the one
// the cache held); in a plain one each object is encoded once for them.
struct EventHandlers {
  std::function<void(const core::Value& obj)> on_add;
  std::function<void(const core::Value& old_obj, const core::Value& new_obj)> on_update;
  // `final_state_unknown`: the object vanished while the watch was down; `obj` is the last
  // state the cache knew.
  std::function<void(const core::Value& obj, bool final_state_unknown)> on_delete;
  std::function<void(const CompactObject& obj)> on_add_compact;
  std::function<void(const CompactObject& old_obj, const CompactObject& new_obj)> on_update_compact;
  std::function<void(const CompactObject& obj, bool final_state_unknown)> on_delete_compact;
};

class Informer {
 public:
  // `client` must outlive the informer (stop or destroy informers before their Client).
  Informer(Client& client, InformerOptions options);
  ~Informer();  // stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Before start().
  void add_index(const std::string& name, IndexFunc func);
  void add_handlers(EventHandlers handlers);

  // Starts the list+watch thread. After stop(), start() resumes from the cache's
  // resourceVersion instead of listing again (a relist follows if the server says 410).
  void start();
  // Stops the watch and joins the thread. Idempotent.
  void stop();

  // True once the first list has been cached and its handlers have run.
  [[nodiscard]] bool has_synced() const noexcept { return synced_.load(); }
  // Waits for has_synced(); false on timeout or stop.
  bool wait_for_sync(std::chrono::milliseconds timeout);

  [[nodiscard]] const Store& store() const noexcept { return store_; }
  // The resourceVersion of the last event or list applied to the cache.
  [[nodiscard]] std::string resource_version() const;

  struct Stats {
    std::uint64_t lists = 0;             // lists done (1 + relists)
    std::uint64_t watches = 0;           // watch requests started
    std::uint64_t events = 0;            // watch events applied (bookmarks excluded)
    std::uint64_t gone = 0;              // 410 Gone answers that forced a relist
    std::uint64_t failures = 0;          // failed list/watch attempts
    std::uint64_t protobuf_lists = 0;    // list pages the server answered in protobuf
    std::uint64_t protobuf_watches = 0;  // watches the server answered in protobuf
  };
  [[nodiscard]] Stats stats() const;
  // The last failure, for health reporting ("" when none since the last success).
  [[nodiscard]] std::string last_error() const;
  // True while lists and watches ask for protobuf (see InformerOptions::protobuf).
  [[nodiscard]] bool asks_protobuf() const noexcept { return use_protobuf_.load(); }

 private:
  void run();
  // The first list is served from the API server's watch cache (resourceVersion="0"); a relist
  // after 410 Gone is a consistent read (see docs/kube-client.md, "Initial list").
  bool list_and_replace(bool from_watch_cache);
  void dispatch_replace(const Store::ReplaceResult& diff);
  void dispatch_replace(const Store::CompactReplaceResult& diff);
  bool watch_once();  // returns false to request a relist
  ObjectPtr prepare(core::Value obj);
  void apply_event(WatchEvent& ev);
  void apply_compact_event(CompactWatchEvent& ev);
  // Compact cache without a transform: JSON text straight into the compact form.
  [[nodiscard]] bool direct() const noexcept { return options_.compact && !options_.transform; }
  void resync_loop();
  bool sleep_for(std::chrono::milliseconds d);  // false when stopping
  void set_error(const std::string& e);

  Client& client_;
  InformerOptions options_;
  // Decode-time trees for direct(): the prune paths and the projection (with identity paths).
  core::JsonPrune prune_tree_;
  core::JsonPrune keep_tree_;
  CompactDecodeShape decode_shape_;
  std::optional<ProtobufKind> protobuf_kind_;  // set when the resource can come as protobuf
  std::atomic<bool> use_protobuf_{false};
  Store store_;
  std::vector<EventHandlers> handlers_;
  // Handlers run one at a time: events on the informer thread, resyncs on the resync thread.
  std::mutex dispatch_mu_;
  std::thread thread_;
  std::thread resync_thread_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::string resource_version_;
  WatchStream* current_watch_ = nullptr;
  Stats stats_;
  std::string last_error_;
};

}  // namespace gpufleet::kube
