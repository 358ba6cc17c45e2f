// HTTP transport of the client (internal to kube; curl stays inside http.cc).
//
// Why libcurl: it is the most widely deployed, audited HTTP/TLS stack in Debian
// (libcurl4-openssl-dev), speaks HTTP/2 through nghttp2, verifies certificates with OpenSSL,
// takes CA/client certificates from memory (blobs, so kubeconfig data never touches disk), and
// its multi interface drives many transfers from one thread. All requests of a Client go
// through one multi handle with multiplexing on, so one TLS connection carries every request and
// every long-running watch (HTTP/2 streams), as client-go does; HTTP/1.1 servers get a small
// connection pool instead.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kube/errors.h"

namespace gpufleet::kube {

struct TlsSettings {
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string server_name;
  bool allow_plain_http = false;  // checked by the client: loopback only
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  std::chrono::milliseconds timeout{0};  // whole transfer; 0: none
  TlsSettings tls;                       // per request: exec plugins may rotate certificates
  // Streams only. Non-zero: the transfer gets its own HTTP/1.1 connection and is paused while
  // the consumer has this many bytes unread, so TCP flow control holds the server back and the
  // backlog stays near this bound (a large list read by a slower decoder). Zero: the stream
  // shares the HTTP/2 connection and is bounded only by HttpStream::kBufferLimit.
  std::size_t pause_above = 0;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_type;
  std::string retry_after;
  std::string http_version;  // "2" or "1.1", for tests and diagnostics
};

// Body of a streaming request (a watch, a streamed list), filled by the transport thread and
// drained by the consumer. Thread-safe. Bounded: a consumer more than kBufferLimit unread bytes
// behind ends the transfer with a TransportError that says so (an informer then resumes its
// watch or relists). A stream made with a pause threshold (HttpRequest::pause_above) instead
// stops taking bytes at that backlog and resumes once the consumer has read half of it: only
// on its own HTTP/1.1 connection, because libcurl 7.88 keeps filling a paused HTTP/2 stream's
// 32 MiB window (docs/kube-client.md, "Bounded buffers").
class HttpStream {
 public:
  static constexpr std::size_t kBufferLimit = std::size_t{64} << 20;

  explicit HttpStream(std::size_t pause_above = 0) : pause_above_(pause_above) {}

  // Waits for the response status; 0 when the transfer failed before one arrived.
  long wait_status();
  // Appends available body bytes to `out` (up to about one block of kBlockBytes per call);
  // blocks until there are some or the transfer ended.
  // Returns false once the body is exhausted and the transfer is over.
  bool read(std::string& out);
  // The failure that ended the transfer, if it did not end cleanly.
  std::optional<TransportError> error();
  void cancel();
  [[nodiscard]] bool cancelled();

  // Called by the transport.
  void on_status(long status);
  // False when the bytes would pass kBufferLimit: the transport then aborts the transfer.
  bool on_data(const char* p, std::size_t n);
  // True when the transport must pause before offering more bytes (the backlog reached the
  // pause threshold); read() later calls the resumer once half of it has been read.
  bool pause_now();
  void on_done(std::optional<TransportError> error);
  // The largest unread backlog this stream held, and how often it paused.
  [[nodiscard]] std::size_t peak_buffered();
  [[nodiscard]] std::size_t pauses();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  long status_ = 0;
  bool status_known_ = false;
  bool done_ = false;
  bool cancelled_ = false;
  // Unread bytes in blocks of about kBlockBytes: read() hands out one block at a time, so a
  // consumer behind a fast sender holds one block besides the backlog, not a second copy of it.
  static constexpr std::size_t kBlockBytes = 64 * 1024;
  std::deque<std::string> blocks_;
  std::size_t buffered_ = 0;
  std::size_t peak_buffered_ = 0;
  const std::size_t pause_above_;
  bool paused_ = false;
  std::size_t pauses_ = 0;
  std::optional<TransportError> error_;
  std::function<void()> canceller_;
  std::function<void()> resumer_;  // asks the transport thread to unpause the transfer
  friend class HttpTransport;
};

class HttpTransport {
 public:
  // A plain (non-streaming) answer larger than this fails with a TransportError that says so,
  // instead of taking the process's memory (a full list of 10,000 Nodes is ~150 MB).
  static constexpr std::size_t kMaxResponseBytes = std::size_t{512} << 20;

  // A plain request unanswered for `slow_request` is logged once (stats().slow_requests).
  explicit HttpTransport(std::chrono::milliseconds slow_request = std::chrono::seconds(10));
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Blocks until the answer; throws TransportError when there is none.
  HttpResponse perform(HttpRequest request);
  // Starts a streaming transfer; the body arrives in the returned stream.
  std::shared_ptr<HttpStream> stream(HttpRequest request);

  struct Stats {
    std::uint64_t transfers = 0;           // finished requests and streams
    std::uint64_t new_connections = 0;     // TCP+TLS connections opened for them
    std::uint64_t http2 = 0;               // transfers that used HTTP/2
    std::uint64_t stream_pauses = 0;       // times a stream with a pause threshold paused
    std::uint64_t max_stream_backlog = 0;  // the largest unread backlog of any finished stream
    std::uint64_t in_flight = 0;           // requests and streams submitted, not finished
    std::uint64_t slow_requests = 0;       // plain requests that ran past 10 s (each logged)
    std::uint64_t oldest_request_ms = 0;   // age of the oldest plain request now running
  };
  [[nodiscard]] Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a query parameter value.
std::string url_encode(std::string_view s);

}  // namespace gpufleet::kube
