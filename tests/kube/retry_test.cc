// The client's retry policy, against a scripted loopback HTTP/1.1 server (a test double for
// the transport only; API semantics are tested against kube-apiserver in tests/integration).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/metrics.h"
#include "kube/client.h"
#include "scripted_server.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using testing::kConfigMap;
using testing::response;
using testing::ScriptedServer;
using testing::status;

ClientConfig config_for(const ScriptedServer& s) {
  ClientConfig c;
  c.server = s.url();
  c.allow_plain_http_loopback = true;
  c.max_retries = 3;
  return c;
}

TEST(RetryPolicy, ReadsRetryServerErrorsWithBackoff) {
  ScriptedServer s({response(503, "Unavailable", status(503, "ServiceUnavailable")),
                    response(504, "Timeout", status(504, "Timeout")),
                    response(200, "OK", kConfigMap)});
  Client client(config_for(s));
  EXPECT_EQ(resource_version_of(client.get(resources::config_maps(), "x", "a")), "7");
  EXPECT_EQ(s.requests().size(), 3u);
}

// Each answer counts once under its verb, resource and code, retries included, so a
// controller's /metrics shows its own writes and conflicts.
TEST(RetryPolicy, EveryAnswerIsCountedByVerbResourceAndCode) {
  core::metrics::Counter& answers = core::metrics::default_registry().counter(
      "gpufleet_kube_requests_total", "", {"verb", "resource", "code"});
  auto count = [&](std::string_view verb, std::string_view code) {
    return answers.with({verb, "configmaps", code}).value();
  };
  const double get503 = count("get", "503"), get200 = count("get", "200"),
               create409 = count("create", "409");
  ScriptedServer s({response(503, "Unavailable", status(503, "ServiceUnavailable")),
                    response(200, "OK", kConfigMap),
                    response(409, "Conflict", status(409, "AlreadyExists"))});
  Client client(config_for(s));
  client.get(resources::config_maps(), "x", "a");
  EXPECT_THROW(client.create(resources::config_maps(), core::parse_json(kConfigMap)), ApiError);
  EXPECT_EQ(count("get", "503") - get503, 1);
  EXPECT_EQ(count("get", "200") - get200, 1);
  EXPECT_EQ(count("create", "409") - create409, 1);
  const std::string text = core::metrics::default_registry().render();
  EXPECT_THAT(
      text, ::testing::HasSubstr(
                R"(gpufleet_kube_requests_total{verb="create",resource="configmaps",code="409"})"));
}

TEST(RetryPolicy, WritesAreNotRetriedOnServerErrors) {
  ScriptedServer s({response(503, "Unavailable", status(503, "ServiceUnavailable")),
                    response(201, "Created", kConfigMap)});
  Client client(config_for(s));
  core::Value cm = core::parse_json(kConfigMap);
  try {
    client.create(resources::config_maps(), cm);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::ServiceUnavailable));
  }
  EXPECT_EQ(s.requests().size(), 1u);  // the server may have acted on it: no blind retry
}

TEST(RetryPolicy, PriorityAndFairnessRetryAfterIsHonouredForAnyVerb) {
  ScriptedServer s(
      {response(429, "Too Many Requests", status(429, "TooManyRequests"), "Retry-After: 1\r\n"),
       response(201, "Created", kConfigMap)});
  Client client(config_for(s));
  auto start = std::chrono::steady_clock::now();
  client.create(resources::config_maps(), core::parse_json(kConfigMap));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1s);
  ASSERT_EQ(s.requests().size(), 2u);
  EXPECT_THAT(s.requests()[1], ::testing::StartsWith("POST /api/v1/namespaces/x/configmaps"));
}

TEST(RetryPolicy, ConflictsAndNotFoundGoStraightToTheCaller) {
  ScriptedServer s({response(404, "Not Found", status(404, "NotFound")),
                    response(409, "Conflict", status(409, "Conflict"))});
  Client client(config_for(s));
  EXPECT_THROW(client.get(resources::config_maps(), "x", "a"), ApiError);
  EXPECT_THROW(client.update(resources::config_maps(), core::parse_json(kConfigMap)), ApiError);
  EXPECT_EQ(s.requests().size(), 2u);
}

TEST(RetryPolicy, UnauthorizedReReadsTheTokenFileOnce) {
  auto dir = std::filesystem::temp_directory_path() / ("kube-retry-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "old-token";
  ScriptedServer s({response(401, "Unauthorized", status(401, "Unauthorized")),
                    response(200, "OK", kConfigMap),
                    response(401, "Unauthorized", status(401, "Unauthorized")),
                    response(401, "Unauthorized", status(401, "Unauthorized"))});
  ClientConfig c = config_for(s);
  c.token_file = (dir / "token").string();
  Client client(c);
  EXPECT_NO_THROW(client.get(resources::config_maps(), "x", "a"));
  auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_THAT(reqs[0], ::testing::HasSubstr("Authorization: Bearer old-token"));
  // A second 401 after the refresh is final.
  try {
    client.get(resources::config_maps(), "x", "a");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.is(Reason::Unauthorized));
    EXPECT_THAT(e.what(), ::testing::Not(::testing::HasSubstr("old-token")));
  }
  EXPECT_EQ(s.requests().size(), 4u);
  std::filesystem::remove_all(dir);
}

TEST(RetryPolicy, ClientSideTokenBucketPacesRequests) {
  std::vector<std::string> oks(6, response(200, "OK", kConfigMap));
  ScriptedServer s(oks);
  ClientConfig c = config_for(s);
  c.qps = 10;
  c.burst = 1;
  Client client(c);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) client.get(resources::config_maps(), "x", "a");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);  // 5 waits of 100 ms
}

}  // namespace
}  // namespace gpufleet::kube
