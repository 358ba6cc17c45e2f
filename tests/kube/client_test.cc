// Client behaviour that needs no API server; everything else is in tests/integration/kube.
#include "kube/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
