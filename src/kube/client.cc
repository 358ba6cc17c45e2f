#include "kube/client.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "core/errors.h"
#include "core/metrics.h"
#include "kube/api/compact_json.h"
#include "kube/credentials.h"
#include "kube/http.h"
#include "kube/rate_limit.h"
#include "kube/watch_decoder.h"

namespace gpufleet::kube {

using core::InvalidInput;
using core::Value;

namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kMetaObject =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
constexpr std::string_view kMetaList =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
// Protobuf first, JSON for whatever the server cannot encode so (it serves CRDs as JSON only).
constexpr std::string_view kProtobufOrJson =
    "application/vnd.kubernetes.protobuf, application/json";

bool is_loopback_url(std::string_view url) {
  std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = url.substr(scheme + 3);
  return rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]");
}

class Query {
 public:
  Query& add(std::string_view key, std::string_view value) {
    if (value.empty()) return *this;
    text_ += text_.empty() ? '?' : '&';
    text_.append(key).append("=").append(url_encode(value));
    return *this;
  }
  [[nodiscard]] const std::string& str() const { return text_; }

 private:
  std::string text_;
};

struct DiscoveredResource {
  std::string kind;
  ResourceId id;
};

// Every answer the client got, by verb, resource and HTTP code (each attempt of a retried
// request; "error" when the transport failed): client-go's rest_client_requests_total, so a
// controller's own /metrics shows its write rate, its conflicts and its throttling without
// the API server's. Resources are a bounded set; raw paths and discovery are one label each.
void count_answer(const RequestInfo& info, long status) {
  static core::metrics::Counter& answers = core::metrics::default_registry().counter(
      "gpufleet_kube_requests_total",
      "Answers from the API server by verb, resource and HTTP code (\"error\": none came)",
      {"verb", "resource", "code"});
  std::string_view resource = info.resource;
  if (resource.starts_with('/')) resource = "raw";
  if (resource.starts_with("discovery")) resource = "discovery";
  const std::string code = status > 0 ? std::to_string(status) : "error";
  answers.with({info.verb, resource, code}).inc();
}

}  // namespace

class Client::Impl {
 public:
  // (c is copied, not moved: the limiter reads it among the same arguments.)
  explicit Impl(const ClientConfig& c)
      : Impl(c, std::make_shared<TokenBucket>(c.qps, c.burst), std::make_shared<HttpTransport>(),
             std::make_shared<HttpTransport>()) {}
  Impl(ClientConfig c, std::shared_ptr<TokenBucket> shared_limiter,
       std::shared_ptr<HttpTransport> shared_transport,
       std::shared_ptr<HttpTransport> shared_list_transport)
      : config(std::move(c)),
        credentials(config),
        limiter_owner(std::move(shared_limiter)),
        transport_owner(std::move(shared_transport)),
        list_transport_owner(std::move(shared_list_transport)),
        limiter(*limiter_owner),
        transport(*transport_owner),
        list_transport(*list_transport_owner) {
    if (config.server.starts_with("http://")) {
      if (!config.allow_plain_http_loopback || !is_loopback_url(config.server)) {
        throw InvalidInput("server \"" + config.server +
                           "\": plain http is refused; use https (plain http is only allowed for "
                           "loopback test servers with allow_plain_http_loopback)");
      }
    } else if (!config.server.starts_with("https://")) {
      throw InvalidInput("server \"" + config.server + "\": must be an https:// URL");
    }
  }

  ClientConfig config;
  Credentials credentials;
  // Shared by every Client made from this one for another identity (see the constructor).
  std::shared_ptr<TokenBucket> limiter_owner;
  std::shared_ptr<HttpTransport> transport_owner;
  // Streamed lists run on HTTP/1.1 connections of their own (paused for a slow reader) in a
  // transport of their own: one libcurl multi handle mixing them with the multiplexed HTTP/2
  // connection (and its PIPEWAIT transfers) stalled both, the sixth list of a controller's
  // start and four watches waiting forever for a connection (libcurl 7.88).
  std::shared_ptr<HttpTransport> list_transport_owner;
  TokenBucket& limiter;
  HttpTransport& transport;
  HttpTransport& list_transport;
  std::mutex discovery_mu;
  std::map<std::string, std::vector<DiscoveredResource>> discovery;  // by group version

  std::string path(const ResourceId& r, std::string_view ns, std::string_view name,
                   std::string_view sub) const {
    if (r.resource.empty() || r.version.empty()) {
      throw InvalidInput("resource id is incomplete: version and resource are required");
    }
    std::string p = r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version;
    if (r.namespaced && !ns.empty()) p.append("/namespaces/").append(url_encode(ns));
    if (r.namespaced && ns.empty() && !name.empty()) {
      throw InvalidInput(r.qualified_name() + " is namespaced: give the namespace of \"" +
                         std::string(name) + "\"");
    }
    p.append("/").append(r.resource);
    if (!name.empty()) p.append("/").append(url_encode(name));
    if (!sub.empty()) p.append("/").append(sub);
    return p;
  }

  HttpRequest make_request(std::string method, const std::string& path_and_query,
                           std::string_view accept, std::string_view content_type,
                           std::string body) {
    HttpRequest req;
    req.method = std::move(method);
    req.url = config.server + path_and_query;
    req.body = std::move(body);
    req.timeout = config.request_timeout;
    req.headers.push_back("Accept: " + std::string(accept));
    if (!content_type.empty()) req.headers.push_back("Content-Type: " + std::string(content_type));
    req.headers.push_back("User-Agent: " + config.user_agent);
    CurrentCredentials c = credentials.current();
    if (!c.bearer_token.empty()) req.headers.push_back("Authorization: Bearer " + c.bearer_token);
    req.tls.ca_pem = config.ca_pem;
    req.tls.client_cert_pem = std::move(c.client_cert_pem);
    req.tls.client_key_pem = std::move(c.client_key_pem);
    req.tls.server_name = config.tls_server_name;
    req.tls.allow_plain_http = config.allow_plain_http_loopback;
    return req;
  }

  // Sends a request with rate limiting and the retry policy:
  //  - 429 with Retry-After (API Priority and Fairness rejected it before running it): retried
  //    for any verb after the advised pause;
  //  - 5xx/timeouts and broken connections: retried only for reads (`safe`), with backoff and
  //    jitter, or for any verb when the connection failed before the request left;
  //  - 401 once after refreshing a rotating token or exec credential.
  HttpResponse execute(const std::string& method, const std::string& path_and_query,
                       std::string_view accept, std::string_view content_type,
                       const std::string& body, const RequestInfo& info, bool safe) {
    Backoff backoff(std::chrono::milliseconds(200), std::chrono::seconds(10));
    bool refreshed = false;
    const int kMaxAttempts = 1 + std::max(0, config.max_retries);
    for (int attempt = 1;; ++attempt) {
      limiter.acquire();
      HttpResponse resp;
      try {
        resp = transport.perform(make_request(method, path_and_query, accept, content_type, body));
      } catch (const TransportError& e) {
        count_answer(info, 0);
        if ((safe || !e.request_sent()) && attempt < kMaxAttempts) {
          std::this_thread::sleep_for(backoff.next());
          continue;
        }
        throw;
      }
      count_answer(info, resp.status);
      if (resp.status >= 200 && resp.status < 300) return resp;
      ApiError err =
          decode_status_error(static_cast<int>(resp.status), resp.body, info, resp.retry_after);
      if (err.reason() == Reason::Unauthorized && !refreshed && credentials.invalidate()) {
        refreshed = true;
        continue;
      }
      if (attempt < kMaxAttempts) {
        bool apf_throttled = err.reason() == Reason::TooManyRequests && err.retry_after_seconds();
        if (apf_throttled || (safe && is_retryable(err))) {
          auto pause = backoff.next();
          if (err.retry_after_seconds()) {
            pause = std::max<Clock::duration>(
                pause, std::chrono::seconds(std::min(*err.retry_after_seconds(), 60)));
          }
          std::this_thread::sleep_for(pause);
          continue;
        }
      }
      throw err;
    }
  }

  Value decode(const HttpResponse& resp, const RequestInfo& info, const core::JsonPrune* prune) {
    if (resp.body.empty()) return Value();
    return core::parse_json(resp.body, info.verb + " " + info.resource, prune);
  }

  std::vector<DiscoveredResource> fetch_group_version(const std::string& gv) {
    std::string p = gv.find('/') == std::string::npos ? "/api/" + gv : "/apis/" + gv;
    RequestInfo info{"get", "discovery " + gv, "", ""};
    HttpResponse resp = execute("GET", p, kJson, {}, {}, info, true);
    Value list = decode(resp, info, nullptr);
    std::string group;
    std::string version = gv;
    if (auto slash = gv.find('/'); slash != std::string::npos) {
      group = gv.substr(0, slash);
      version = gv.substr(slash + 1);
    }
    std::vector<DiscoveredResource> out;
    if (const Value* rs = list.find("resources"); rs && rs->is_list()) {
      for (const Value& r : rs->as_list()) {
        std::string name(r.get_string({"name"}));
        if (name.empty() || name.find('/') != std::string::npos) continue;  // subresource
        const Value* ns = r.find("namespaced");
        out.push_back({std::string(r.get_string({"kind"})),
                       ResourceId{group, version, name, ns && ns->is_bool() && ns->as_bool()}});
      }
    }
    return out;
  }
};

// ---- WatchStream ------------------------------------------------------------------------

struct WatchStream::State {
  std::shared_ptr<HttpStream> stream;
  RequestInfo info;
  core::JsonPrune prune;
  LineSplitter lines;
  bool checked_status = false;
  std::string chunk;
  // Set when protobuf was asked for; the first byte of the body says what came: a JSON event
  // starts with '{', a protobuf frame with its length (0x7b would mean a frame of ~2 GB).
  std::optional<ProtobufKind> kind;
  bool sniffed = false;
  std::atomic<bool> protobuf{false};
  ProtobufFrameSplitter frames;
};

WatchStream::WatchStream(std::shared_ptr<HttpStream> stream, RequestInfo info,
                         const std::vector<std::string>& prune, std::optional<ProtobufKind> kind)
    : state_(std::make_unique<State>()) {
  state_->stream = std::move(stream);
  state_->info = std::move(info);
  state_->prune = watch_event_prune(prune);
  state_->kind = kind;
  state_->sniffed = !kind.has_value();
}

bool WatchStream::protobuf() const noexcept { return state_->protobuf.load(); }

WatchStream::~WatchStream() { state_->stream->cancel(); }

void WatchStream::cancel() { state_->stream->cancel(); }

std::optional<std::string_view> WatchStream::next_line() {
  State& s = *state_;
  if (!s.checked_status) {
    long status = s.stream->wait_status();
    s.checked_status = true;
    if (!s.stream->cancelled() || status != 0) count_answer(s.info, status);
    if (status != 200) {
      std::string body;
      while (s.stream->read(body)) {
      }
      if (s.stream->cancelled()) return std::nullopt;
      if (status == 0) {
        if (auto e = s.stream->error()) throw *e;
        throw TransportError("watch " + s.info.resource + ": no response", false);
      }
      throw decode_status_error(static_cast<int>(status), body, s.info);
    }
  }
  for (;;) {
    if (s.protobuf) {
      if (auto frame = s.frames.next_frame()) return frame;
    } else if (auto line = s.lines.next_line()) {
      return line;
    }
    s.chunk.clear();
    if (!s.stream->read(s.chunk)) {
      if (s.stream->cancelled()) return std::nullopt;
      if (auto e = s.stream->error()) throw *e;
      if (s.lines.pending() > 0 || s.frames.pending() > 0) {
        throw TransportError("watch " + s.info.resource + ": stream ended inside an event", true);
      }
      return std::nullopt;  // the server closed the watch (timeoutSeconds)
    }
    if (!s.sniffed && !s.chunk.empty()) {
      s.sniffed = true;
      s.protobuf = s.chunk.front() != '{';
    }
    if (s.protobuf) {
      s.frames.feed(s.chunk);
    } else {
      s.lines.feed(s.chunk);
    }
  }
}

std::optional<WatchEvent> WatchStream::next() {
  std::optional<std::string_view> line = next_line();
  if (!line) return std::nullopt;
  if (state_->protobuf) {
    throw InvalidInput("watch " + state_->info.resource +
                       ": the server sent protobuf; read a protobuf watch with next_compact()");
  }
  return decode_watch_event(*line, &state_->prune, state_->info);
}

std::optional<CompactWatchEvent> WatchStream::next_compact(const CompactDecodeShape& shape) {
  std::optional<std::string_view> line = next_line();
  if (!line) return std::nullopt;
  std::string type;
  CompactPtr object;
  if (state_->protobuf) {
    std::string status;
    object = decode_compact_protobuf_watch_event(*line, *state_->kind, shape, type, status);
    if (!status.empty()) {
      // An ERROR event: its Status as the JSON event the ordinary decoder turns into ApiError.
      decode_watch_event("{\"type\":\"ERROR\",\"object\":" + status + "}", &state_->prune,
                         state_->info);
      throw core::ParseError("watch event", 1, 1, "an ERROR event that is not an error");
    }
  } else {
    object = decode_compact_watch_event(*line, shape, type);
  }
  CompactWatchEvent out{WatchEvent::Type::Added, std::move(object)};
  if (type == "ADDED") {
    out.type = WatchEvent::Type::Added;
  } else if (type == "MODIFIED") {
    out.type = WatchEvent::Type::Modified;
  } else if (type == "DELETED") {
    out.type = WatchEvent::Type::Deleted;
  } else if (type == "BOOKMARK") {
    out.type = WatchEvent::Type::Bookmark;
  } else {
    // ERROR (a Status: 410 Gone and friends), unknown types and events without an object:
    // the ordinary decoder builds the same error as next() would.
    if (!state_->protobuf) decode_watch_event(*line, &state_->prune, state_->info);
    throw core::ParseError("watch event", 1, 1, "unexpected watch event type \"" + type + "\"");
  }
  if (!out.object) {
    throw core::ParseError("watch event", 1, 1,
                           "a watch event needs a string \"type\" and an \"object\"");
  }
  return out;
}

// ---- Client -----------------------------------------------------------------------------

Client::Client(ClientConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

Client::Client(const Client& base, const ClientConfig& credentials) {
  ClientConfig c = base.impl_->config;
  if (!credentials.server.empty() && credentials.server != c.server)
    throw InvalidInput("server \"" + credentials.server + "\" differs from \"" + c.server +
                       "\": a Client sharing another's connections talks to the same server");
  c.client_cert_pem = credentials.client_cert_pem;
  c.client_key_pem = credentials.client_key_pem;
  c.token = credentials.token;
  c.token_file = credentials.token_file;
  c.exec = credentials.exec;
  c.source = credentials.source.empty() ? c.source : credentials.source;
  impl_ = std::make_unique<Impl>(std::move(c), base.impl_->limiter_owner,
                                 base.impl_->transport_owner, base.impl_->list_transport_owner);
}
Client::~Client() = default;

const ClientConfig& Client::config() const noexcept { return impl_->config; }
const std::string& Client::default_namespace() const noexcept { return impl_->config.namespace_; }

Value Client::get(const ResourceId& r, std::string_view ns, std::string_view name,
                  const ObjectShape& shape) {
  RequestInfo info{"get", r.qualified_name(), std::string(ns), std::string(name)};
  core::JsonPrune prune;
  for (const auto& p : shape.prune) prune.add(p);
  HttpResponse resp = impl_->execute("GET", impl_->path(r, ns, name, {}),
                                     shape.metadata_only ? kMetaObject : kJson, {}, {}, info, true);
  return impl_->decode(resp, info, &prune);
}

std::optional<Value> Client::try_get(const ResourceId& r, std::string_view ns,
                                     std::string_view name) {
  try {
    return get(r, ns, name);
  } catch (const ApiError& e) {
    if (e.is(Reason::NotFound)) return std::nullopt;
    throw;
  }
}

ListResult Client::list_page(const ResourceId& r, std::string_view ns, const ListOptions& o,
                             const ObjectShape& shape) {
  RequestInfo info{"list", r.qualified_name(), std::string(ns), ""};
  Query q;
  q.add("labelSelector", o.label_selector)
      .add("fieldSelector", o.field_selector)
      .add("limit", o.limit > 0 ? std::to_string(o.limit) : std::string())
      .add("continue", o.continue_token)
      .add("resourceVersion", o.resource_version)
      .add("resourceVersionMatch", o.resource_version_match);
  core::JsonPrune prune = list_prune(shape.prune);
  HttpResponse resp = impl_->execute("GET", impl_->path(r, ns, {}, {}) + q.str(),
                                     shape.metadata_only ? kMetaList : kJson, {}, {}, info, true);
  Value list = impl_->decode(resp, info, &prune);
  ListResult out;
  out.resource_version = std::string(list.get_string({"metadata", "resourceVersion"}));
  out.continue_token = std::string(list.get_string({"metadata", "continue"}));
  if (Value* items = list.find("items"); items && items->is_list()) {
    out.items = std::move(items->as_list());
  }
  // PartialObjectMetadataList items carry no kind; lists never do for built-ins. Nothing to add.
  return out;
}

ListResult Client::list_page_streamed(const ResourceId& r, std::string_view ns,
                                      const ListOptions& o, const ObjectShape& shape,
                                      const std::function<void(Value&&)>& on_item) {
  core::JsonPrune prune;
  for (const std::string& path : shape.prune) prune.add(path);
  return list_page_streamed_text(r, ns, o, shape.metadata_only, [&](std::string_view item) {
    on_item(core::parse_json(item, "list item", &prune));
  });
}

ListResult Client::list_page_streamed_text(
    const ResourceId& r, std::string_view ns, const ListOptions& o, bool metadata_only,
    const std::function<void(std::string_view item_json)>& on_item) {
  return list_streamed(r, ns, o, metadata_only ? kMetaList : kJson, on_item, nullptr);
}

ListResult Client::list_page_streamed_wire(
    const ResourceId& r, std::string_view ns, const ListOptions& o,
    const std::function<void(std::string_view item_json)>& on_json_item,
    const std::function<void(std::string_view item_message)>& on_protobuf_item) {
  return list_streamed(r, ns, o, kProtobufOrJson, on_json_item, &on_protobuf_item);
}

ListResult Client::list_streamed(const ResourceId& r, std::string_view ns, const ListOptions& o,
                                 std::string_view accept,
                                 const std::function<void(std::string_view)>& on_json_item,
                                 const std::function<void(std::string_view)>* on_protobuf_item) {
  RequestInfo info{"list", r.qualified_name(), std::string(ns), ""};
  Query q;
  q.add("labelSelector", o.label_selector)
      .add("fieldSelector", o.field_selector)
      .add("limit", o.limit > 0 ? std::to_string(o.limit) : std::string())
      .add("continue", o.continue_token)
      .add("resourceVersion", o.resource_version)
      .add("resourceVersionMatch", o.resource_version_match);
  impl_->limiter.acquire();
  HttpRequest req =
      impl_->make_request("GET", impl_->path(r, ns, {}, {}) + q.str(), accept, {}, {});
  // A whole unpaginated list (resourceVersion=0) of thousands of objects takes longer than one
  // request; bound it generously rather than by the per-request timeout.
  req.timeout = std::max<std::chrono::milliseconds>(req.timeout, std::chrono::minutes(5));
  // Backpressure: the server sends a list of thousands of objects faster than they are decoded,
  // and without it the unread rest piles up in this process (the peak memory of an informer's
  // sync). Paused at kListBacklogBytes, the list waits in the socket and the server instead.
  req.pause_above = kListBacklogBytes;
  std::shared_ptr<HttpStream> stream = impl_->list_transport.stream(std::move(req));
  struct Cancel {
    HttpStream& s;
    ~Cancel() { s.cancel(); }  // on an exception from on_item: stop the transfer
  } cancel{*stream};
  long status = stream->wait_status();
  count_answer(info, status);
  std::string chunk;
  if (status != 200) {
    std::string body;
    while (stream->read(body)) {
    }
    if (status == 0) {
      if (auto e = stream->error()) throw *e;
      throw TransportError("list " + info.resource + ": no response", false);
    }
    throw decode_status_error(static_cast<int>(status), body, info);
  }
  ListItemSplitter split(on_json_item);
  std::optional<ProtobufListSplitter> proto;
  // The body says what came: protobuf starts with its magic, JSON with '{'.
  std::string head;
  bool sniffed = on_protobuf_item == nullptr;
  auto feed = [&](std::string_view bytes) {
    if (proto) {
      proto->feed(bytes);
    } else {
      split.feed(bytes);
    }
  };
  while (stream->read(chunk)) {
    if (!sniffed) {
      head.append(chunk);
      chunk.clear();
      if (head.empty() || (head.size() < kProtobufMagic.size() && head.front() != '{')) continue;
      sniffed = true;
      if (is_protobuf_body(head)) proto.emplace(*on_protobuf_item);
      feed(head);
      std::string().swap(head);
      continue;
    }
    feed(chunk);
    chunk.clear();
  }
  if (auto e = stream->error()) throw *e;
  if (!sniffed && !head.empty()) feed(head);
  ListResult out;
  if (proto) {
    proto->finish();
    out.resource_version = proto->resource_version();
    out.continue_token = proto->continue_token();
    out.protobuf = true;
    return out;
  }
  split.finish();
  Value env = core::parse_json(split.envelope(), "list");
  out.resource_version = std::string(env.get_string({"metadata", "resourceVersion"}));
  out.continue_token = std::string(env.get_string({"metadata", "continue"}));
  return out;
}

ListResult Client::list(const ResourceId& r, std::string_view ns, ListOptions options,
                        const ObjectShape& shape) {
  ListResult all;
  bool restarted = false;
  options.continue_token.clear();
  for (;;) {
    ListResult page;
    try {
      page = list_page(r, ns, options, shape);
    } catch (const ApiError& e) {
      // The continue token's snapshot was compacted away: start over once, from now.
      if (e.is(Reason::Gone) && !options.continue_token.empty() && !restarted) {
        restarted = true;
        all = ListResult{};
        options.continue_token.clear();
        continue;
      }
      throw;
    }
    if (all.resource_version.empty()) all.resource_version = page.resource_version;
    if (all.items.empty()) {
      all.items = std::move(page.items);
    } else {
      all.items.insert(all.items.end(), std::make_move_iterator(page.items.begin()),
                       std::make_move_iterator(page.items.end()));
    }
    if (page.continue_token.empty()) return all;
    options.continue_token = page.continue_token;
    // Later pages come from the first page's snapshot; resourceVersion must not be set.
    options.resource_version.clear();
    options.resource_version_match.clear();
  }
}

namespace {
std::string require_name(const ResourceId& r, const Value& obj, std::string_view verb) {
  std::string_view name = name_of(obj);
  if (name.empty()) {
    throw InvalidInput("cannot " + std::string(verb) + " " + r.qualified_name() +
                       ": metadata.name is missing in the object");
  }
  return std::string(name);
}
}  // namespace

Value Client::create(const ResourceId& r, const Value& obj, std::string_view field_manager) {
  std::string ns(namespace_of(obj));
  if (r.namespaced && ns.empty()) ns = default_namespace();
  std::string name(name_of(obj));
  RequestInfo info{"create", r.qualified_name(), r.namespaced ? ns : "", name};
  Query q;
  q.add("fieldManager", field_manager);
  HttpResponse resp =
      impl_->execute("POST", impl_->path(r, r.namespaced ? ns : "", {}, {}) + q.str(), kJson, kJson,
                     core::to_json(obj), info, false);
  return impl_->decode(resp, info, nullptr);
}

Value Client::update(const ResourceId& r, const Value& obj, std::string_view field_manager) {
  std::string name = require_name(r, obj, "update");
  std::string ns(namespace_of(obj));
  if (r.namespaced && ns.empty()) ns = default_namespace();
  RequestInfo info{"update", r.qualified_name(), r.namespaced ? ns : "", name};
  Query q;
  q.add("fieldManager", field_manager);
  HttpResponse resp =
      impl_->execute("PUT", impl_->path(r, r.namespaced ? ns : "", name, {}) + q.str(), kJson,
                     kJson, core::to_json(obj), info, false);
  return impl_->decode(resp, info, nullptr);
}

Value Client::update_status(const ResourceId& r, const Value& obj) {
  std::string name = require_name(r, obj, "update status of");
  std::string ns(namespace_of(obj));
  if (r.namespaced && ns.empty()) ns = default_namespace();
  RequestInfo info{"update", r.qualified_name() + "/status", r.namespaced ? ns : "", name};
  HttpResponse resp = impl_->execute("PUT", impl_->path(r, r.namespaced ? ns : "", name, "status"),
                                     kJson, kJson, core::to_json(obj), info, false);
  return impl_->decode(resp, info, nullptr);
}

namespace {
Value delete_options_body(const DeleteOptions& o) {
  Value body;
  body["apiVersion"] = "v1";
  body["kind"] = "DeleteOptions";
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (!o.precondition_uid.empty()) body["preconditions"]["uid"] = o.precondition_uid;
  if (!o.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = o.precondition_resource_version;
  }
  if (o.dry_run) body["dryRun"].push_back("All");
  return body;
}
}  // namespace

Value Client::remove(const ResourceId& r, std::string_view ns, std::string_view name,
                     const DeleteOptions& options) {
  if (name.empty()) throw InvalidInput("cannot delete " + r.qualified_name() + ": name is empty");
  RequestInfo info{"delete", r.qualified_name(), std::string(ns), std::string(name)};
  HttpResponse resp = impl_->execute("DELETE", impl_->path(r, ns, name, {}), kJson, kJson,
                                     core::to_json(delete_options_body(options)), info, false);
  return impl_->decode(resp, info, nullptr);
}

Value Client::remove_collection(const ResourceId& r, std::string_view ns,
                                const ListOptions& selectors, const DeleteOptions& options) {
  if (selectors.label_selector.empty() && selectors.field_selector.empty()) {
    throw InvalidInput("cannot delete the collection " + r.qualified_name() +
                       ": no label or field selector (it would delete every object)");
  }
  RequestInfo info{"deletecollection", r.qualified_name(), std::string(ns), ""};
  Query q;
  q.add("labelSelector", selectors.label_selector).add("fieldSelector", selectors.field_selector);
  HttpResponse resp = impl_->execute("DELETE", impl_->path(r, ns, {}, {}) + q.str(), kJson, kJson,
                                     core::to_json(delete_options_body(options)), info, false);
  return impl_->decode(resp, info, nullptr);
}

Value Client::patch(const ResourceId& r, std::string_view ns, std::string_view name, PatchType type,
                    const Value& patch, std::string_view subresource,
                    std::string_view field_manager) {
  std::string_view content_type = type == PatchType::Merge ? "application/merge-patch+json"
                                  : type == PatchType::Json
                                      ? "application/json-patch+json"
                                      : "application/strategic-merge-patch+json";
  if (type == PatchType::Json && !patch.is_list()) {
    throw InvalidInput("JSON patch for " + r.qualified_name() + " " + std::string(name) +
                       ": must be a list of operations ({\"op\":...,\"path\":...})");
  }
  std::string resource = r.qualified_name();
  if (!subresource.empty()) resource.append("/").append(subresource);
  RequestInfo info{"patch", resource, std::string(ns), std::string(name)};
  Query q;
  q.add("fieldManager", field_manager);
  HttpResponse resp = impl_->execute("PATCH", impl_->path(r, ns, name, subresource) + q.str(),
                                     kJson, content_type, core::to_json(patch), info, false);
  return impl_->decode(resp, info, nullptr);
}

Value Client::apply(const ResourceId& r, const Value& obj, const ApplyOptions& options,
                    std::string_view subresource) {
  if (options.field_manager.empty()) {
    throw InvalidInput(
        "server-side apply needs a field manager (ApplyOptions::field_manager), "
        "e.g. the controller's name");
  }
  std::string name = require_name(r, obj, "apply");
  std::string ns(namespace_of(obj));
  if (r.namespaced && ns.empty()) ns = default_namespace();
  if (obj.get_string({"apiVersion"}).empty() || obj.get_string({"kind"}).empty()) {
    throw InvalidInput("cannot apply " + r.qualified_name() + " " + name +
                       ": apiVersion and kind must be set in the applied object");
  }
  std::string resource = r.qualified_name();
  if (!subresource.empty()) resource.append("/").append(subresource);
  RequestInfo info{"apply", resource, r.namespaced ? ns : "", name};
  Query q;
  q.add("fieldManager", options.field_manager)
      .add("force", options.force ? "true" : "")
      .add("dryRun", options.dry_run ? "All" : "");
  // JSON is YAML, and the apply content type takes either.
  HttpResponse resp =
      impl_->execute("PATCH", impl_->path(r, r.namespaced ? ns : "", name, subresource) + q.str(),
                     kJson, "application/apply-patch+yaml", core::to_json(obj), info, false);
  return impl_->decode(resp, info, nullptr);
}

void Client::evict(std::string_view ns, std::string_view pod, const DeleteOptions& options) {
  Value body;
  body["apiVersion"] = "policy/v1";
  body["kind"] = "Eviction";
  body["metadata"]["name"] = pod;
  body["metadata"]["namespace"] = ns;
  Value del = delete_options_body(options);
  if (del.as_map().size() > 2) body["deleteOptions"] = std::move(del);
  RequestInfo info{"evict", "pods/eviction", std::string(ns), std::string(pod)};
  // Not retried here on 429: that is a PodDisruptionBudget saying "not now"
  // (EvictionBlocked), and the caller decides when to try again.
  impl_->execute("POST", impl_->path(resources::pods(), ns, pod, "eviction"), kJson, kJson,
                 core::to_json(body), info, false);
}

Value Client::create_subresource(const ResourceId& r, std::string_view ns, std::string_view name,
                                 std::string_view subresource, const Value& body) {
  RequestInfo info{"create", r.qualified_name() + "/" + std::string(subresource), std::string(ns),
                   std::string(name)};
  HttpResponse resp = impl_->execute("POST", impl_->path(r, ns, name, subresource), kJson, kJson,
                                     core::to_json(body), info, false);
  return impl_->decode(resp, info, nullptr);
}

Value Client::get_scale(const ResourceId& r, std::string_view ns, std::string_view name) {
  RequestInfo info{"get", r.qualified_name() + "/scale", std::string(ns), std::string(name)};
  HttpResponse resp =
      impl_->execute("GET", impl_->path(r, ns, name, "scale"), kJson, {}, {}, info, true);
  return impl_->decode(resp, info, nullptr);
}

Value Client::set_scale(const ResourceId& r, std::string_view ns, std::string_view name,
                        std::int64_t replicas) {
  Value p;
  p["spec"]["replicas"] = replicas;
  return patch(r, ns, name, PatchType::Merge, p, "scale");
}

std::unique_ptr<WatchStream> Client::watch(const ResourceId& r, std::string_view ns,
                                           const WatchOptions& o, const ObjectShape& shape) {
  RequestInfo info{"watch", r.qualified_name(), std::string(ns), ""};
  Query q;
  q.add("watch", "1")
      .add("resourceVersion", o.resource_version)
      .add("labelSelector", o.label_selector)
      .add("fieldSelector", o.field_selector)
      .add("allowWatchBookmarks", o.allow_bookmarks ? "true" : "")
      .add("timeoutSeconds", o.timeout_seconds > 0 ? std::to_string(o.timeout_seconds) : "");
  impl_->limiter.acquire();
  std::optional<ProtobufKind> kind;
  if (o.protobuf && !shape.metadata_only)
    kind = ProtobufKind::for_resource(r.group, r.version, r.resource);
  HttpRequest req = impl_->make_request("GET", impl_->path(r, ns, {}, {}) + q.str(),
                                        shape.metadata_only ? kMetaObject
                                        : kind              ? kProtobufOrJson
                                                            : kJson,
                                        {}, {});
  // The server ends the watch after timeoutSeconds; a connection silent for much longer than
  // that is dead (the server went away without a FIN), so bound the transfer too.
  req.timeout = o.timeout_seconds > 0 ? std::chrono::seconds(o.timeout_seconds + 30)
                                      : std::chrono::milliseconds(0);
  return std::make_unique<WatchStream>(impl_->transport.stream(std::move(req)), std::move(info),
                                       shape.prune, kind);
}

ResourceId Client::resource_for(std::string_view api_version, std::string_view kind) {
  std::string gv(api_version);
  for (int round = 0; round < 2; ++round) {
    {
      std::lock_guard lock(impl_->discovery_mu);
      auto it = impl_->discovery.find(gv);
      if (it != impl_->discovery.end() && round == 0) {
        for (const auto& d : it->second) {
          if (d.kind == kind) return d.id;
        }
      }
    }
    // Miss: refresh this group version (a CRD may have been added since).
    std::vector<DiscoveredResource> fresh;
    try {
      fresh = impl_->fetch_group_version(gv);
    } catch (const ApiError& e) {
      if (!e.is(Reason::NotFound)) throw;
    }
    std::lock_guard lock(impl_->discovery_mu);
    impl_->discovery[gv] = fresh;
    for (const auto& d : fresh) {
      if (d.kind == kind) return d.id;
    }
    break;
  }
  throw ApiError(404, Reason::NotFound,
                 "the server has no resource for kind " + std::string(kind) + " in " + gv +
                     " (is the CRD installed? is the apiVersion right?)",
                 RequestInfo{"discover", gv, "", std::string(kind)});
}

std::vector<std::string> Client::server_group_versions() {
  std::vector<std::string> out;
  RequestInfo info{"get", "discovery", "", ""};
  Value core_api =
      impl_->decode(impl_->execute("GET", "/api", kJson, {}, {}, info, true), info, nullptr);
  if (const Value* vs = core_api.find("versions"); vs && vs->is_list()) {
    for (const Value& v : vs->as_list()) {
      if (v.is_string()) out.push_back(v.as_string());
    }
  }
  Value groups =
      impl_->decode(impl_->execute("GET", "/apis", kJson, {}, {}, info, true), info, nullptr);
  if (const Value* gs = groups.find("groups"); gs && gs->is_list()) {
    for (const Value& g : gs->as_list()) {
      std::string_view preferred = g.get_string({"preferredVersion", "groupVersion"});
      if (!preferred.empty()) out.emplace_back(preferred);
      if (const Value* vs = g.find("versions"); vs && vs->is_list()) {
        for (const Value& v : vs->as_list()) {
          std::string_view gv = v.get_string({"groupVersion"});
          if (!gv.empty() && gv != preferred) out.emplace_back(gv);
        }
      }
    }
  }
  return out;
}

void Client::invalidate_discovery() {
  std::lock_guard lock(impl_->discovery_mu);
  impl_->discovery.clear();
}

Client::TransportStats Client::transport_stats() const {
  HttpTransport::Stats s = impl_->transport.stats();
  const HttpTransport::Stats l = impl_->list_transport.stats();
  s.transfers += l.transfers;
  s.new_connections += l.new_connections;
  s.http2 += l.http2;
  s.stream_pauses += l.stream_pauses;
  s.max_stream_backlog = std::max(s.max_stream_backlog, l.max_stream_backlog);
  s.in_flight += l.in_flight;
  s.slow_requests += l.slow_requests;
  s.oldest_request_ms = std::max(s.oldest_request_ms, l.oldest_request_ms);
  return {s.transfers,          s.new_connections, s.http2,         s.stream_pauses,
          s.max_stream_backlog, s.in_flight,       s.slow_requests, s.oldest_request_ms};
}

std::string Client::get_raw(std::string_view path) {
  RequestInfo info{"get", std::string(path), "", ""};
  return impl_->execute("GET", std::string(path), "application/json, */*", {}, {}, info, true).body;
}

}  // namespace gpufleet::kube
