// The Kubernetes REST client: typed verbs over core::Value objects, server-side apply,
// subresources, discovery and watches. One Client is shared by a whole process (thread-safe);
// all its requests travel over one HTTP/2 connection where the server offers it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/value.h"
#include "kube/api/compact_json.h"
#include "kube/api/compact_protobuf.h"
#include "kube/api/meta.h"
#include "kube/api/resource.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace gpufleet::kube {

struct ListOptions {
  std::string label_selector;          // "app=x,tier!=db"
  std::string field_selector;          // "spec.nodeName=n1"
  std::int64_t limit = 500;            // page size; 0: everything in one answer
  std::string continue_token;          // list_page only
  std::string resource_version;        // "" (most recent, quorum read) or "0" (any cached)
  std::string resource_version_match;  // "", "NotOlderThan", "Exact"
};

struct ListResult {
  std::vector<core::Value> items;
  std::string resource_version;  // of the list, to start a watch from
  std::string continue_token;    // non-empty when more pages remain (list_page)
  bool protobuf = false;         // the server answered in protobuf
};

struct DeleteOptions {
  std::string precondition_uid;
  std::string precondition_resource_version;
  std::string propagation_policy;  // "", "Orphan", "Background", "Foreground"
  std::optional<std::int64_t> grace_period_seconds;
  bool dry_run = false;
};

enum class PatchType { Merge, Json, StrategicMerge };

struct ApplyOptions {
  std::string field_manager;  // required
  bool force = false;         // take ownership of fields another manager owns
  bool dry_run = false;
};

struct WatchOptions {
  std::string resource_version;  // start after this version ("" = now, with no initial state)
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // the server ends the watch after this long (randomize per call)
  // Ask for protobuf (core/v1 nodes and pods only: ProtobufKind::for_resource). Only
  // next_compact() reads a protobuf stream; the server may still answer JSON.
  bool protobuf = false;
};

struct WatchEvent {
  enum class Type { Added, Modified, Deleted, Bookmark };
  Type type;
  core::Value object;
};

std::string_view watch_event_type_name(WatchEvent::Type t) noexcept;

// A watch event whose object was decoded straight into the compact cached form.
struct CompactWatchEvent {
  WatchEvent::Type type;
  CompactPtr object;
};

class HttpStream;

// One watch request. next() blocks for the next event; it returns nullopt when the stream
// ends normally (server timeout, cancel()) and throws TransportError when the connection breaks
// and ApiError for an error answer or an ERROR event (410 Gone: resourceVersion too old).
// A WatchStream must not outlive the Client that opened it.
class WatchStream {
 public:
  WatchStream(std::shared_ptr<HttpStream> stream, RequestInfo info,
              const std::vector<std::string>& prune,
              std::optional<ProtobufKind> protobuf = std::nullopt);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  std::optional<WatchEvent> next();
  // next() for a compact cache: the object is decoded straight from the event's text into its
  // compact form, pruned and projected per `shape` (paths inside the object; the stream's own
  // prune paths are not applied); no core::Value is built. Errors as next().
  std::optional<CompactWatchEvent> next_compact(const CompactDecodeShape& shape);
  // Thread-safe: ends the stream; a blocked next() returns nullopt.
  void cancel();
  // True once the server's answer turned out to be protobuf frames.
  [[nodiscard]] bool protobuf() const noexcept;

 private:
  // The next event's bytes: a JSON line, or a protobuf frame when protobuf() is true.
  std::optional<std::string_view> next_line();
  struct State;
  std::unique_ptr<State> state_;
};

class Client {
 public:
  explicit Client(ClientConfig config);
  // Another identity over `base`'s connections and client-side rate limit: the same server,
  // CA and TLS settings, authenticated by `credentials`' token, token_file, client certificate
  // or exec plugin (its other fields are ignored; a different server is refused). Many
  // identities in one process (the agent's simulated nodes, each with its node's token) share
  // one connection pool this way instead of opening one each. `base` must outlive nothing:
  // the shared parts live as long as any Client using them.
  Client(const Client& base, const ClientConfig& credentials);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  [[nodiscard]] const ClientConfig& config() const noexcept;
  [[nodiscard]] const std::string& default_namespace() const noexcept;

  // ---- reads ----
  core::Value get(const ResourceId& r, std::string_view ns, std::string_view name,
                  const ObjectShape& shape = {});
  // nullopt on NotFound.
  std::optional<core::Value> try_get(const ResourceId& r, std::string_view ns,
                                     std::string_view name);
  // One page (follow continue_token yourself).
  ListResult list_page(const ResourceId& r, std::string_view ns, const ListOptions& options,
                       const ObjectShape& shape = {});
  // One page decoded as it streams in: each item (pruned per `shape`) goes to `on_item` as soon
  // as its bytes have arrived, so neither the answer's text nor the whole list's tree is ever
  // held (the transfer pauses while on_item works). The result carries no items. Not retried:
  // the informer, its caller, backs off and retries.
  ListResult list_page_streamed(const ResourceId& r, std::string_view ns,
                                const ListOptions& options, const ObjectShape& shape,
                                const std::function<void(core::Value&& item)>& on_item);
  // The same, handing each item's JSON text (valid during the call) to `on_item` undecoded,
  // for callers that decode it their own way (the informer's compact cache decodes straight
  // into its cached form). Nothing is pruned here.
  ListResult list_page_streamed_text(
      const ResourceId& r, std::string_view ns, const ListOptions& options, bool metadata_only,
      const std::function<void(std::string_view item_json)>& on_item);
  // The same for core/v1 nodes and pods in protobuf: asks for protobuf with JSON as the
  // fallback; each item goes to `on_protobuf_item` as its message bytes (decode with
  // decode_compact_protobuf and `kind`), or to `on_json_item` as JSON text when the server
  // answered JSON. The result's `protobuf` says which.
  ListResult list_page_streamed_wire(
      const ResourceId& r, std::string_view ns, const ListOptions& options,
      const std::function<void(std::string_view item_json)>& on_json_item,
      const std::function<void(std::string_view item_message)>& on_protobuf_item);
  // Every page; the result's resource_version is the first page's (consistent snapshot).
  // A 410 on a continue token (snapshot compacted) restarts the list once from scratch.
  ListResult list(const ResourceId& r, std::string_view ns, ListOptions options = {},
                  const ObjectShape& shape = {});

  // ---- writes ---- (namespace and name come from obj.metadata where not passed)
  core::Value create(const ResourceId& r, const core::Value& obj,
                     std::string_view field_manager = {});
  // Optimistic concurrency: fails with Conflict when obj.metadata.resourceVersion is stale.
  core::Value update(const ResourceId& r, const core::Value& obj,
                     std::string_view field_manager = {});
  core::Value update_status(const ResourceId& r, const core::Value& obj);
  // Returns the server's answer (the object when it is deleted asynchronously, else Status).
  core::Value remove(const ResourceId& r, std::string_view ns, std::string_view name,
                     const DeleteOptions& options = {});
  // DELETE on the collection (deletecollection): every object in `ns` matching the label and
  // field selectors of `selectors` (its paging fields are ignored) in one request. The answer
  // is the list of the objects deleted. An empty label and field selector is refused here: it
  // would delete the whole namespace's objects of that kind.
  core::Value remove_collection(const ResourceId& r, std::string_view ns,
                                const ListOptions& selectors, const DeleteOptions& options = {});
  core::Value patch(const ResourceId& r, std::string_view ns, std::string_view name, PatchType type,
                    const core::Value& patch, std::string_view subresource = {},
                    std::string_view field_manager = {});
  // Server-side apply of a (partial) object; conflicts throw ApiError Conflict whose causes()
  // name each conflicting field and its manager.
  core::Value apply(const ResourceId& r, const core::Value& obj, const ApplyOptions& options,
                    std::string_view subresource = {});

  // ---- subresources ----
  // policy/v1 Eviction. Throws ApiError with Reason::EvictionBlocked when a
  // PodDisruptionBudget forbids it (the caller retries later; this call never does).
  void evict(std::string_view ns, std::string_view pod, const DeleteOptions& options = {});
  // POST of `body` to a subresource, e.g. serviceaccounts/NAME/token (a TokenRequest): the
  // server's answer. Not retried (a create).
  core::Value create_subresource(const ResourceId& r, std::string_view ns, std::string_view name,
                                 std::string_view subresource, const core::Value& body);
  core::Value get_scale(const ResourceId& r, std::string_view ns, std::string_view name);
  core::Value set_scale(const ResourceId& r, std::string_view ns, std::string_view name,
                        std::int64_t replicas);

  // ---- watch ----
  std::unique_ptr<WatchStream> watch(const ResourceId& r, std::string_view ns,
                                     const WatchOptions& options, const ObjectShape& shape = {});

  // ---- discovery ----
  // The resource serving `kind` in `api_version` ("apps/v1", "Deployment"), CRDs included.
  // Cached; a miss refreshes that group version once before failing with NotFound.
  ResourceId resource_for(std::string_view api_version, std::string_view kind);
  // Every group version the server offers ("v1", "apps/v1", ...), preferred first per group.
  std::vector<std::string> server_group_versions();
  void invalidate_discovery();

  // A raw GET of a path ("/version", "/readyz"), returning the body.
  std::string get_raw(std::string_view path);

  // Connection use so far: with HTTP/2 every request and watch shares one connection (streamed
  // lists excepted, below).
  struct TransportStats {
    std::uint64_t requests = 0;  // finished requests and watches
    std::uint64_t connections = 0;
    std::uint64_t http2_requests = 0;
    std::uint64_t stream_pauses = 0;       // streamed lists paused for a slower reader
    std::uint64_t max_stream_backlog = 0;  // bytes: the largest unread backlog of a stream
    std::uint64_t in_flight = 0;           // requests and watches running now
    std::uint64_t slow_requests = 0;       // requests that went unanswered past 10 s
    std::uint64_t oldest_request_ms = 0;   // age of the oldest request (not watch) running
  };
  // A streamed list (list_page_streamed*) runs on its own HTTP/1.1 connection and pauses while
  // this many bytes wait unread: the bound on what a list holds besides the decoded objects.
  static constexpr std::size_t kListBacklogBytes = std::size_t{1} << 20;
  [[nodiscard]] TransportStats transport_stats() const;

 private:
  ListResult list_streamed(const ResourceId& r, std::string_view ns, const ListOptions& options,
                           std::string_view accept,
                           const std::function<void(std::string_view)>& on_json_item,
                           const std::function<void(std::string_view)>* on_protobuf_item);

  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufleet::kube
