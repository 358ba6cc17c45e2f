// A scripted loopback HTTP/1.1 server for unit tests of the client's transport behaviour
// (retries, watch resumption). API semantics are tested against kube-apiserver instead.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpufleet::kube::testing {

// A complete response with Content-Length.
inline std::string response(int code, const std::string& reason, const std::string& body,
                            const std::string& extra_headers = {}) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

inline std::string status(int code, const std::string& reason) {
  return R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"scripted","reason":")" +
         reason + R"(","code":)" + std::to_string(code) + "}";
}

inline const std::string kConfigMap =
    R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"x","resourceVersion":"7"}})";

// Answers each request with the next scripted response (500 once they run out) and records the
// request line and headers. Connections are served side by side, each on its own thread, as a
// real server does: the client may hold one open (keep-alive) while it opens another (a
// streamed list takes a connection of its own); the script is consumed in request order.
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
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~ScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
    std::vector<std::thread> connections;
    {
      std::lock_guard lock(mu_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
      connections.swap(connections_);
    }
    for (auto& t : connections) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard lock(mu_);
      open_fds_.push_back(fd);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
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
      // A response without Content-Length ends with the connection (a watch stream).
      bool close_after = reply.find("Content-Length") == std::string::npos;
      // MSG_NOSIGNAL: a client that hung up (an informer stopped while its retry was being
      // answered) must end this connection, not the test process with SIGPIPE.
      if (::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) < 0 || close_after) break;
    }
    std::lock_guard lock(mu_);
    ::close(fd);
    std::erase(open_fds_, fd);
  }

  std::vector<std::string> script_;
  std::size_t next_ = 0;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::vector<int> open_fds_;
  std::vector<std::thread> connections_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

// A watch answer: the events, then the connection closes (as when a server goes away).
inline std::string stream(const std::vector<std::string>& lines) {
  std::string r = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
  for (const auto& l : lines) r += l + "\n";
  return r;
}

}  // namespace gpufleet::kube::testing
