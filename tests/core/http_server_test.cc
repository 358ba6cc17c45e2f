#include "core/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/errors.h"
#include "http_test_client.h"
#include "support/self_signed.h"

namespace gpufleet::core {
namespace {

using testing::http_request;

TEST(HttpServer, ServesMetricsHealthAndReadiness) {
  metrics::Registry registry;
  registry.counter("requests_total", "Requests.").inc(3);
  std::atomic<bool> ready{false};
  HttpServerOptions options;
  options.registry = &registry;
  options.readyz = [&] {
    return ready.load() ? HealthStatus::healthy() : HealthStatus::unhealthy("informers not synced");
  };
  HttpServer server(std::move(options));
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(server.port()));

  const auto m = http_request(server.url() + "/metrics");
  ASSERT_EQ(m.error, "");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.body, registry.render());
  EXPECT_NE(m.body.find("requests_total 3\n"), std::string::npos);
  EXPECT_NE(m.headers.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
            std::string::npos)
      << m.headers;

  const auto h = http_request(server.url() + "/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, "ok");

  auto r = http_request(server.url() + "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "informers not synced");
  ready = true;
  r = http_request(server.url() + "/readyz?verbose=1");  // the query string is ignored
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");

  // Metrics update live.
  registry.counter("requests_total", "Requests.").inc();
  EXPECT_NE(http_request(server.url() + "/metrics").body.find("requests_total 4\n"),
            std::string::npos);
}

TEST(HttpServer, NotFoundAndMethodNotAllowed) {
  HttpServer server(HttpServerOptions{});
  const auto nf = http_request(server.url() + "/nope");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(http_request(server.url() + "/").status, 404);
  EXPECT_EQ(http_request(server.url() + "/metrics/extra").status, 404);
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    const auto r = http_request(server.url() + "/metrics", method);
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_NE(r.headers.find("Allow: GET, HEAD"), std::string::npos) << r.headers;
  }
  const auto head = http_request(server.url() + "/healthz", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
}

TEST(HttpServer, FailingChecksAndExtraHandlers) {
  HttpServerOptions options;
  options.registry = nullptr;
  options.healthz = []() -> HealthStatus { throw std::runtime_error("watchdog stuck"); };
  options.readyz = [] { return HealthStatus::unhealthy(""); };
  options.handlers["/debug/queues"] = [] { return HttpResponse{200, "application/json", "{}"}; };
  HttpServer server(std::move(options));
  const auto h = http_request(server.url() + "/healthz");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.body, "healthz check failed: watchdog stuck");
  EXPECT_EQ(http_request(server.url() + "/readyz").body, "readyz failed");
  EXPECT_EQ(http_request(server.url() + "/metrics").status, 404);  // no registry
  const auto d = http_request(server.url() + "/debug/queues");
  EXPECT_EQ(d.status, 200);
  EXPECT_EQ(d.body, "{}");

  HttpServerOptions bad;
  bad.handlers["/metrics"] = [] { return HttpResponse{}; };
  EXPECT_THROW(HttpServer{std::move(bad)}, InvalidInput);
}

TEST(HttpServer, PostHandlersGetTheWholeBody) {
  HttpServerOptions options;
  options.max_body_bytes = 1 << 20;
  options.post_handlers["/validate"] = [](std::string_view body) {
    return HttpResponse{
        200, "application/json",
        "got " + std::to_string(body.size()) + ":" + std::string(body.substr(0, 8))};
  };
  HttpServer server(std::move(options));
  // Large enough that libmicrohttpd hands it over in several pieces.
  std::string big(600 * 1000, 'x');
  big.replace(0, 8, "{\"a\":12}");
  const auto r = http_request(server.url() + "/validate", "POST", &big);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "got 600000:{\"a\":12}");
  const std::string empty;
  EXPECT_EQ(http_request(server.url() + "/validate", "POST", &empty).body, "got 0:");
  // Over the limit: read and dropped, 413, the handler never called.
  const std::string huge(1 << 21, 'y');
  const auto t = http_request(server.url() + "/validate", "POST", &huge);
  EXPECT_EQ(t.status, 413) << t.error;
  EXPECT_NE(t.body.find("over 1048576 bytes"), std::string::npos) << t.body;
  // GET of a POST path, POST of a GET path.
  EXPECT_EQ(http_request(server.url() + "/validate").status, 404);
  EXPECT_EQ(http_request(server.url() + "/healthz", "POST", &empty).status, 405);
}

TEST(HttpServer, ServesHttpsWithTheGivenCertificate) {
  const auto cert = gpufleet::testing::make_self_signed_cert();
  HttpServerOptions options;
  options.tls_cert_pem = cert.cert_pem;
  options.tls_key_pem = cert.key_pem;
  options.post_handlers["/validate"] = [](std::string_view body) {
    return HttpResponse{200, "text/plain", std::string(body)};
  };
  HttpServer server(std::move(options));
  EXPECT_EQ(server.url(), "https://127.0.0.1:" + std::to_string(server.port()));
  const std::string body = "hello";
  const auto r = http_request(server.url() + "/validate", "POST", &body, cert.cert_pem);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(http_request(server.url() + "/healthz", "GET", nullptr, cert.cert_pem).status, 200);
  // Not trusted without the CA; plain HTTP is not answered.
  const auto other = gpufleet::testing::make_self_signed_cert("someone-else");
  EXPECT_NE(http_request(server.url() + "/healthz", "GET", nullptr, other.cert_pem).error, "");
  EXPECT_NE(http_request("http://127.0.0.1:" + std::to_string(server.port()) + "/healthz").status,
            200);

  // Half a configuration, or PEM that is not a key, is refused by name.
  HttpServerOptions half;
  half.tls_cert_pem = cert.cert_pem;
  try {
    HttpServer s(std::move(half));
    FAIL() << "started HTTPS without a key";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("the key is empty"), std::string::npos) << e.what();
  }
  HttpServerOptions junk;
  junk.tls_cert_pem = cert.cert_pem;
  junk.tls_key_pem = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
  try {
    HttpServer s(std::move(junk));
    FAIL() << "started HTTPS with a broken key";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("certificate or key malformed"), std::string::npos)
        << e.what();
  }
}

TEST(HttpServer, PrefixHandlersSeeThePathAndTheQuery) {
  HttpServerOptions options;
  options.registry = nullptr;
  options.handlers["/logs/exact"] = [] { return HttpResponse{200, "text/plain", "exact"}; };
  options.prefix_handlers["/logs/"] = [](const HttpRequest& r) {
    std::string body = "short " + r.path;
    for (const auto& [k, v] : r.query) body += " " + k + "=" + v;
    return HttpResponse{200, "text/plain", body};
  };
  options.prefix_handlers["/logs/ns/"] = [](const HttpRequest& r) {
    return HttpResponse{404, "text/plain", "long " + r.path};
  };
  HttpServer server(std::move(options));
  // Exact paths first, then the longest prefix; the query is decoded, a repeated key keeps
  // its first value.
  EXPECT_EQ(http_request(server.url() + "/logs/exact").body, "exact");
  EXPECT_EQ(http_request(server.url() + "/logs/a/b?tailLines=5&x=a%20b&x=2").body,
            "short /logs/a/b tailLines=5 x=a b");
  const auto r = http_request(server.url() + "/logs/ns/p/c");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "long /logs/ns/p/c");
  EXPECT_EQ(http_request(server.url() + "/other").status, 404);
}

TEST(HttpServer, AClientCaAdmitsOnlyClientsItSigned) {
  const auto serving = gpufleet::testing::make_self_signed_cert("server");
  const auto client = gpufleet::testing::make_self_signed_cert("api-server");
  const auto stranger = gpufleet::testing::make_self_signed_cert("stranger");
  HttpServerOptions options;
  options.tls_cert_pem = serving.cert_pem;
  options.tls_key_pem = serving.key_pem;
  options.tls_client_ca_pem = client.cert_pem;  // self-signed: its own CA
  HttpServer server(std::move(options));
  const std::string url = server.url() + "/healthz";
  const auto ok =
      http_request(url, "GET", nullptr, serving.cert_pem, client.cert_pem, client.key_pem);
  ASSERT_EQ(ok.error, "");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok");
  const auto none = http_request(url, "GET", nullptr, serving.cert_pem);
  ASSERT_EQ(none.error, "");
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.body.find("client certificate"), std::string::npos) << none.body;
  const auto other =
      http_request(url, "GET", nullptr, serving.cert_pem, stranger.cert_pem, stranger.key_pem);
  EXPECT_TRUE(other.status == 401 || !other.error.empty()) << other.status;
  EXPECT_NE(other.status, 200);

  // A client CA without TLS is a mistake, named.
  HttpServerOptions plain;
  plain.tls_client_ca_pem = client.cert_pem;
  try {
    HttpServer s(std::move(plain));
    FAIL() << "started plain HTTP with a client CA";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("a client CA needs HTTPS"), std::string::npos) << e.what();
  }
}

TEST(HttpServer, BindErrorsNameTheAddress) {
  HttpServer first(HttpServerOptions{});
  HttpServerOptions same;
  same.port = first.port();
  try {
    HttpServer second(std::move(same));
    FAIL() << "bound the same port twice";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << msg;
    EXPECT_NE(msg.find("choose another port"), std::string::npos) << msg;
  }
  HttpServerOptions junk;
  junk.address = "not-an-ip";
  EXPECT_THROW(HttpServer{std::move(junk)}, InvalidInput);
}

TEST(HttpServer, StopsAndRefusesConnections) {
  HttpServer server(HttpServerOptions{});
  const std::string url = server.url() + "/healthz";
  EXPECT_EQ(http_request(url).status, 200);
  server.stop();
  server.stop();  // idempotent
  const auto r = http_request(url);
  EXPECT_NE(r.error, "");
}

TEST(HttpServer, Ipv6Loopback) {
  HttpServerOptions options;
  options.address = "::1";
  std::optional<HttpServer> server;
  try {
    server.emplace(std::move(options));
  } catch (const InvalidInput& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  EXPECT_EQ(server->url(), "http://[::1]:" + std::to_string(server->port()));
  EXPECT_EQ(http_request(server->url() + "/healthz").body, "ok");
}

TEST(BindAddress, Parses) {
  auto a = parse_bind_address("127.0.0.1:8080");
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.port, 8080);
  a = parse_bind_address(":9090");
  EXPECT_EQ(a.address, "0.0.0.0");
  EXPECT_EQ(a.port, 9090);
  a = parse_bind_address("[::1]:0");
  EXPECT_EQ(a.address, "::1");
  EXPECT_EQ(a.port, 0);
  EXPECT_EQ(parse_bind_address("localhost:1").address, "localhost");
  for (const char* bad :
       {"", "8080", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x",
        "::1:80", "[::1:80", "[]:80", "example.com:80", "[127.0.0.1]:80"}) {
    EXPECT_THROW(parse_bind_address(bad), InvalidInput) << bad;
  }
  try {
    parse_bind_address("host:80");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("\"host:80\""), std::string::npos);
  }
}

}  // namespace
}  // namespace gpufleet::core
