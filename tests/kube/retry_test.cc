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

#include "kube/client.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;

std::string response(int code, const std::string& reason, const std::string& body,
                     const std::string& extra_headers = {}) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

std::string status(int code, const std::string& reason) {
  return R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"scripted","reason":")" +
         reason + R"(","code":)" + std::to_string(code) + "}";
}

const std::string kConfigMap =
    R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"x","resourceVersion":"7"}})";

// Answers each request with the next scripted response (500 once they run out) and records the
// request line and headers.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(listen_fd_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    {
      std::lock_guard lock(mu_);
      if (conn_fd_ >= 0) ::shutdown(conn_fd_, SHUT_RDWR);
    }
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve() {
    for (;;) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      {
        std::lock_guard lock(mu_);
        conn_fd_ = fd;
      }
      std::string buf;
      char chunk[4096];
      for (;;) {
        std::size_t end = buf.find("\r\n\r\n");
        if (end == std::string::npos) {
          ssize_t n = ::read(fd, chunk, sizeof chunk);
          if (n <= 0) break;
          buf.append(chunk, static_cast<std::size_t>(n));
          continue;
        }
        std::string head = buf.substr(0, end);
        std::size_t body_len = 0;
        if (auto cl = head.find("Content-Length: "); cl != std::string::npos) {
          body_len = std::stoul(head.substr(cl + 16));
        }
        while (buf.size() < end + 4 + body_len) {
          ssize_t n = ::read(fd, chunk, sizeof chunk);
          if (n <= 0) break;
          buf.append(chunk, static_cast<std::size_t>(n));
        }
        buf.erase(0, end + 4 + body_len);
        std::string reply;
        {
          std::lock_guard lock(mu_);
          requests_.push_back(head);
          reply = next_ < script_.size() ? script_[next_++] : response(500, "Oops", "");
        }
        if (::write(fd, reply.data(), reply.size()) < 0) break;
      }
      std::lock_guard lock(mu_);
      ::close(fd);
      conn_fd_ = -1;
    }
  }

  std::vector<std::string> script_;
  std::size_t next_ = 0;
  int listen_fd_ = -1;
  int conn_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

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
