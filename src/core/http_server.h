// A small HTTP server for /metrics, /healthz and /readyz (libmicrohttpd underneath).
//
//   core::HttpServerOptions opts;            // 127.0.0.1, ephemeral port
//   opts.readyz = [&] { return synced ? core::HealthStatus::healthy()
//                                     : core::HealthStatus::unhealthy("informers not synced"); };
//   core::HttpServer server(std::move(opts));
//   log::info("serving", {{"url", server.url()}});
//
// GET (and HEAD, which is GET without the body), plus POST on the paths given post handlers
// (admission webhooks); other methods get 405 with "Allow". With a certificate and key it
// serves HTTPS only (GnuTLS inside libmicrohttpd); with a client CA too, every request must
// carry a client certificate that CA signed (else 401), as a kubelet demands of the API server.
// /metrics renders the registry (text format 0.0.4); /healthz and /readyz answer 200 "ok" or 503
// with the reason; any other path gets 404. Checks run on the server thread, so they must be quick
// and thread-safe; an exception from a check is a 503 naming it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/metrics.h"

namespace gpufleet::core {

struct HealthStatus {
  bool ok = true;
  std::string reason;  // why not ok; the 503 body

  static HealthStatus healthy() { return {}; }
  static HealthStatus unhealthy(std::string why) { return {false, std::move(why)}; }
};
using HealthCheck = std::function<HealthStatus()>;

// An extra GET endpoint's answer.
struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
using HttpHandler = std::function<HttpResponse()>;
// A POST endpoint: the whole request body in (bounded by max_body_bytes), the answer out.
using HttpPostHandler = std::function<HttpResponse(std::string_view body)>;

// A GET request under a path prefix: the decoded path and query (a repeated key keeps its
// first value).
struct HttpRequest {
  std::string path;
  std::map<std::string, std::string, std::less<>> query;
};
using HttpPrefixHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // An IPv4 or IPv6 literal, or "localhost". Loopback by default: exposing metrics beyond the
  // node is a deliberate choice ("0.0.0.0" or "::").
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0 picks a free port; see HttpServer::port()
  metrics::Registry* registry = &metrics::default_registry();  // nullptr: no /metrics (404)
  HealthCheck healthz;                                         // empty: always healthy
  HealthCheck readyz;                                          // empty: always ready
  // More GET endpoints by exact path (for example "/debug/queues"); they may not replace
  // /metrics, /healthz or /readyz.
  std::map<std::string, HttpHandler> handlers;
  // POST endpoints by exact path. A body over max_body_bytes is read and dropped, then
  // answered 413 (the handler never sees it).
  std::map<std::string, HttpPostHandler> post_handlers;
  // GET endpoints by path prefix ("/containerLogs/"), tried after the exact paths; the
  // longest matching prefix wins.
  std::map<std::string, HttpPrefixHandler> prefix_handlers;
  std::size_t max_body_bytes = 4 << 20;
  // PEM certificate (chain) and private key: both set serves HTTPS only; neither, HTTP.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // PEM CA certificate(s): with TLS, clients must present a certificate signed by one of them.
  std::string tls_client_ca_pem;
  std::chrono::seconds connection_timeout{10};  // idle connections are closed after this
  unsigned connection_limit = 64;
};

// "host:port" as controllers take it on the command line: "127.0.0.1:8080", "[::1]:9090",
// "localhost:0", ":8080" (every interface, as in controller-runtime). Throws InvalidInput
// naming the text and the accepted forms.
struct BindAddress {
  std::string address;
  std::uint16_t port = 0;
};
BindAddress parse_bind_address(std::string_view text);

class HttpServer {
 public:
  // Binds and starts serving on a background thread. Throws InvalidInput for a bad address
  // and when the address cannot be bound (in use, not local), naming address and reason.
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound (useful with port 0).
  [[nodiscard]] std::uint16_t port() const noexcept;
  // "http://127.0.0.1:41234" ("http://[::1]:41234" for IPv6; "https://" with TLS).
  [[nodiscard]] std::string url() const;
  // Stops accepting and waits for the server thread; idempotent.
  void stop() noexcept;

  struct Impl;  // public only so the C callback in the .cc file can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufleet::core
