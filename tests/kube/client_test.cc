// Client behaviour that needs no API server; everything else is in tests/integration/kube.
#include "kube/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/errors.h"
#include "kube/http.h"

namespace gpufleet::kube {
namespace {

using ::testing::HasSubstr;

TEST(Client, RefusesPlainHttpExceptForLoopbackTests) {
  ClientConfig c;
  c.server = "http://10.0.0.1:8080";
  EXPECT_THROW(Client{c}, core::InvalidInput);
  c.allow_plain_http_loopback = true;
  EXPECT_THROW(Client{c}, core::InvalidInput);  // not loopback
  c.server = "http://127.0.0.1:8080";
  EXPECT_NO_THROW(Client{c});
  c.server = "ftp://x";
  EXPECT_THROW(Client{c}, core::InvalidInput);
}

// A port nobody listens on: bind, read the port, close.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(Client, ConnectionRefusedIsATransportErrorBeforeSending) {
  ClientConfig c;
  c.server = "https://127.0.0.1:" + std::to_string(free_port());
  c.max_retries = 1;
  Client client(c);
  try {
    (void)client.get(resources::pods(), "default", "x");
    FAIL() << "expected a TransportError";
  } catch (const TransportError& e) {
    EXPECT_FALSE(e.request_sent());
    EXPECT_THAT(e.what(), HasSubstr("/api/v1/namespaces/default/pods/x"));
  }
  // A write that never reached the server may be retried as well; it fails the same way.
  core::Value cm;
  cm["metadata"]["name"] = "x";
  EXPECT_THROW(client.create(resources::config_maps(), cm), TransportError);
}

// A request the server sits on is reported while it waits (once), not only at its timeout:
// the transport's in-flight count and oldest age say so too.
TEST(HttpTransport, ReportsARequestThatGoesUnansweredPastItsThreshold) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(listener, 1);
  std::thread server([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    char buf[4096];
    (void)::read(fd, buf, sizeof buf);
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // sits on it
    const std::string r = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    (void)::send(fd, r.data(), r.size(), MSG_NOSIGNAL);  // the client may have gone
    ::close(fd);
  });
  HttpTransport transport(std::chrono::milliseconds(300));
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/slow";
  req.tls.allow_plain_http = true;
  std::thread probe([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    HttpTransport::Stats s = transport.stats();
    EXPECT_EQ(s.in_flight, 1u);
    EXPECT_GE(s.oldest_request_ms, 300u);
    EXPECT_EQ(s.slow_requests, 1u);
  });
  HttpResponse r = transport.perform(req);
  probe.join();
  server.join();
  ::close(listener);
  EXPECT_EQ(r.status, 200);
  HttpTransport::Stats s = transport.stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.slow_requests, 1u);  // once, however long it waited
}

TEST(Client, ArgumentsAreChecked) {
  ClientConfig c;
  c.server = "https://127.0.0.1:1";
  Client client(c);
  EXPECT_THROW(client.get(resources::pods(), "", "x"), core::InvalidInput);  // no namespace
  core::Value nameless;
  nameless["kind"] = "ConfigMap";
  EXPECT_THROW(client.update(resources::config_maps(), nameless), core::InvalidInput);
  core::Value cm;
  cm["metadata"]["name"] = "x";
  EXPECT_THROW(client.apply(resources::config_maps(), cm, ApplyOptions{}), core::InvalidInput);
  try {
    client.apply(resources::config_maps(), cm, ApplyOptions{"me"});
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("apiVersion and kind must be set"));
  }
  EXPECT_THROW(client.patch(resources::config_maps(), "d", "x", PatchType::Json, cm),
               core::InvalidInput);
}

TEST(ResourceId, Names) {
  EXPECT_EQ(resources::pods().qualified_name(), "pods");
  EXPECT_EQ(resources::leases().qualified_name(), "leases.coordination.k8s.io");
  EXPECT_EQ(resources::leases().api_version(), "coordination.k8s.io/v1");
  EXPECT_EQ(resources::nodes().api_version(), "v1");
  EXPECT_FALSE(resources::nodes().namespaced);
}

TEST(ObjectKey, NamespaceSlashName) {
  core::Value pod;
  pod["metadata"]["name"] = "p";
  EXPECT_EQ(object_key(pod), "p");
  pod["metadata"]["namespace"] = "ns";
  EXPECT_EQ(object_key(pod), "ns/p");
}

TEST(UrlEncode, SelectorsAreEscaped) {
  EXPECT_EQ(url_encode("app=web,tier!=db"), "app%3Dweb%2Ctier%21%3Ddb");
  EXPECT_EQ(url_encode("a.b-c_d~"), "a.b-c_d~");
}

}  // namespace
}  // namespace gpufleet::kube
