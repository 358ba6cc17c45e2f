#include "kube/http.h"
#include "core/text.h"

#include "core/log.h"

#include <algorithm>

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace gpufleet::kube {

// ---- HttpStream -------------------------------------------------------------------------

long HttpStream::wait_status() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return status_known_ || done_; });
  return status_;
}

bool HttpStream::read(std::string& out) {
  std::function<void()> resume;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !blocks_.empty() || done_; });
    if (blocks_.empty()) return false;
    buffered_ -= blocks_.front().size();
    if (out.empty()) {
      out.swap(blocks_.front());  // no copy
    } else {
      out.append(blocks_.front());
    }
    blocks_.pop_front();
    // Resume at half the threshold, not just below it: one pause per half-threshold of bytes
    // rather than one per block.
    if (paused_ && buffered_ <= pause_above_ / 2 && !done_) {
      paused_ = false;
      resume = resumer_;
    }
  }
  if (resume) resume();
  return true;
}

bool HttpStream::pause_now() {
  std::lock_guard lock(mu_);
  if (pause_above_ == 0 || buffered_ < pause_above_) return false;
  if (!paused_) ++pauses_;
  paused_ = true;
  return true;
}

std::size_t HttpStream::peak_buffered() {
  std::lock_guard lock(mu_);
  return peak_buffered_;
}

std::size_t HttpStream::pauses() {
  std::lock_guard lock(mu_);
  return pauses_;
}

std::optional<TransportError> HttpStream::error() {
  std::lock_guard lock(mu_);
  return error_;
}

void HttpStream::cancel() {
  std::function<void()> canceller;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    canceller = canceller_;
  }
  cv_.notify_all();
  if (canceller) canceller();
}

bool HttpStream::cancelled() {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void HttpStream::on_status(long status) {
  {
    std::lock_guard lock(mu_);
    status_ = status;
    status_known_ = true;
  }
  cv_.notify_all();
}

bool HttpStream::on_data(const char* p, std::size_t n) {
  {
    std::lock_guard lock(mu_);
    if (buffered_ + n > kBufferLimit) return false;
    if (blocks_.empty() || blocks_.back().size() + n > kBlockBytes) {
      blocks_.emplace_back().reserve(std::max(kBlockBytes, n));
    }
    blocks_.back().append(p, n);
    buffered_ += n;
    peak_buffered_ = std::max(peak_buffered_, buffered_);
  }
  cv_.notify_all();
  return true;
}

void HttpStream::on_done(std::optional<TransportError> error) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    if (!cancelled_) error_ = std::move(error);
    canceller_ = nullptr;
    resumer_ = nullptr;
  }
  cv_.notify_all();
}

// ---- transport ---------------------------------------------------------------------------

namespace {

std::once_flag g_curl_init;

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char a = line[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != name[i]) return false;
  }
  return true;
}

std::string trim(std::string_view s) { return std::string(core::trim(s)); }

// Errors that happen before any request byte leaves: the server cannot have acted on it.
bool before_send(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM: return true;
    default: return false;
  }
}

}  // namespace

struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  HttpRequest request;
  HttpResponse response;
  std::shared_ptr<HttpStream> stream;  // set for streaming transfers
  std::promise<HttpResponse> promise;  // set for plain transfers
  bool status_reported = false;
  bool too_large = false;        // the body passed HttpTransport::kMaxResponseBytes
  bool stream_overflow = false;  // the consumer fell HttpStream::kBufferLimit behind
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool reported_slow = false;  // a plain request past kSlowRequest was logged once
  char error_buffer[CURL_ERROR_SIZE] = {};

  ~Transfer() {
    if (headers) curl_slist_free_all(headers);
    if (easy) curl_easy_cleanup(easy);
  }

  void report_status() {
    if (status_reported) return;
    status_reported = true;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response.status);
    if (stream) stream->on_status(response.status);
  }
};

struct HttpTransport::Impl {
  CURLM* multi = nullptr;
  std::thread thread;
  std::mutex mu;
  std::deque<std::unique_ptr<Transfer>> pending;
  std::vector<std::shared_ptr<HttpStream>> to_cancel;
  std::vector<std::shared_ptr<HttpStream>> to_resume;
  bool stopping = false;
  std::map<CURL*, std::unique_ptr<Transfer>> running;
  std::atomic<std::uint64_t> transfers{0}, new_connections{0}, http2{0};
  std::atomic<std::uint64_t> stream_pauses{0}, max_stream_backlog{0};
  std::atomic<std::uint64_t> in_flight{0}, slow_requests{0}, oldest_request_ms{0};

  explicit Impl(std::chrono::milliseconds slow) : slow_request(slow) {
    std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    multi = curl_multi_init();
    // One connection, many streams: HTTP/2 multiplexing for every request and watch.
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 16L);
    thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    curl_multi_wakeup(multi);
    thread.join();
    for (auto& [easy, t] : running) {
      curl_multi_remove_handle(multi, easy);
      finish(*t, CURLE_ABORTED_BY_CALLBACK, "client closed");
    }
    running.clear();
    for (auto& t : pending) finish(*t, CURLE_ABORTED_BY_CALLBACK, "client closed");
    pending.clear();
    curl_multi_cleanup(multi);
  }

  static size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    std::string_view line(data, size * n);
    if (iequals_prefix(line, "http/")) {
      // A new status line (after a 100 Continue, say): reset what belongs to a response.
      t->response.content_type.clear();
      t->response.retry_after.clear();
    } else if (iequals_prefix(line, "content-type:")) {
      t->response.content_type = trim(line.substr(13));
    } else if (iequals_prefix(line, "retry-after:")) {
      t->response.retry_after = trim(line.substr(12));
    }
    return size * n;
  }

  static size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    if (t->stream) {
      t->report_status();
      if (t->stream->cancelled()) return 0;  // aborts the transfer
      // libcurl offers these same bytes again after curl_easy_pause(CURLPAUSE_CONT).
      if (t->stream->pause_now()) return CURL_WRITEFUNC_PAUSE;
      if (!t->stream->on_data(data, size * n)) {
        t->stream_overflow = true;
        return 0;  // aborts the transfer
      }
    } else {
      if (t->response.body.size() + size * n > HttpTransport::kMaxResponseBytes) {
        t->too_large = true;
        return 0;  // aborts the transfer
      }
      t->response.body.append(data, size * n);
    }
    return size * n;
  }

  void setup(Transfer& t) {
    CURL* e = curl_easy_init();
    t.easy = e;
    const HttpRequest& r = t.request;
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error_buffer);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (r.pause_above > 0) {
      // Pausing works per connection on HTTP/1.1 (libcurl stops reading the socket); a fresh
      // connection, closed afterwards, so no other request waits behind a paused one.
      curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
      curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
      curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    } else {
      curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
      curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);  // prefer multiplexing over a new connection
    }
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, r.tls.allow_plain_http ? "http,https" : "https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    if (r.timeout.count() > 0)
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.count()));
    // TLS verification is never turned off.
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!r.tls.ca_pem.empty()) {
      curl_blob ca{const_cast<char*>(r.tls.ca_pem.data()), r.tls.ca_pem.size(), CURL_BLOB_COPY};
      curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
    }
    if (!r.tls.client_cert_pem.empty()) {
      curl_blob cert{const_cast<char*>(r.tls.client_cert_pem.data()), r.tls.client_cert_pem.size(),
                     CURL_BLOB_COPY};
      curl_blob key{const_cast<char*>(r.tls.client_key_pem.data()), r.tls.client_key_pem.size(),
                    CURL_BLOB_COPY};
      curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
      curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    }
    for (const std::string& h : r.headers) t.headers = curl_slist_append(t.headers, h.c_str());
    // libcurl would otherwise add "Expect: 100-continue" to large bodies and wait for it.
    t.headers = curl_slist_append(t.headers, "Expect:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    if (r.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
      if (r.method != "DELETE" || !r.body.empty()) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
      }
    }
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  }

  // Completes a transfer: fulfils the promise or closes the stream.
  void finish(Transfer& t, CURLcode code, const char* override_message = nullptr) {
    --in_flight;
    std::optional<TransportError> error;
    if (t.easy) {
      long connects = 0;
      curl_easy_getinfo(t.easy, CURLINFO_NUM_CONNECTS, &connects);
      new_connections += static_cast<std::uint64_t>(connects);
      ++transfers;
    }
    if (code != CURLE_OK) {
      long sent = 0;
      if (t.easy) curl_easy_getinfo(t.easy, CURLINFO_REQUEST_SIZE, &sent);
      bool request_sent = sent > 0 && !before_send(code);
      std::string what = override_message ? override_message
                         : t.too_large
                             ? "response body exceeds " +
                                   std::to_string(HttpTransport::kMaxResponseBytes >> 20) +
                                   " MiB; list with a page size (limit) or narrower selectors"
                         : t.error_buffer[0] ? t.error_buffer
                                             : curl_easy_strerror(code);
      error = TransportError(t.request.method + " " + t.request.url + ": " + what, request_sent,
                             code == CURLE_OPERATION_TIMEDOUT);
    } else {
      t.report_status();
      long version = 0;
      curl_easy_getinfo(t.easy, CURLINFO_HTTP_VERSION, &version);
      t.response.http_version = version == CURL_HTTP_VERSION_2_0 ? "2" : "1.1";
      if (version == CURL_HTTP_VERSION_2_0) ++http2;
    }
    if (t.stream) {
      stream_pauses += t.stream->pauses();
      std::uint64_t peak = t.stream->peak_buffered();
      std::uint64_t seen = max_stream_backlog.load();
      while (peak > seen && !max_stream_backlog.compare_exchange_weak(seen, peak)) {
      }
      if (!t.status_reported) t.stream->on_status(0);
      t.stream->on_done(std::move(error));
    } else if (error) {
      t.promise.set_exception(std::make_exception_ptr(*error));
    } else {
      t.promise.set_value(std::move(t.response));
    }
  }

  void loop() {
    for (;;) {
      std::deque<std::unique_ptr<Transfer>> starting;
      std::vector<std::shared_ptr<HttpStream>> cancelling;
      std::vector<std::shared_ptr<HttpStream>> resuming;
      {
        std::lock_guard lock(mu);
        if (stopping) return;
        starting.swap(pending);
        cancelling.swap(to_cancel);
        resuming.swap(to_resume);
      }
      for (auto& t : starting) {
        setup(*t);
        CURL* easy = t->easy;
        curl_multi_add_handle(multi, easy);
        running.emplace(easy, std::move(t));
      }
      for (auto& s : cancelling) {
        for (auto it = running.begin(); it != running.end(); ++it) {
          if (it->second->stream == s) {
            curl_multi_remove_handle(multi, it->first);
            finish(*it->second, CURLE_ABORTED_BY_CALLBACK, "cancelled");
            running.erase(it);
            break;
          }
        }
      }
      for (auto& s : resuming) {
        for (auto& [easy, t] : running) {
          // May deliver the held bytes at once, through on_body, on this thread.
          if (t->stream == s) curl_easy_pause(easy, CURLPAUSE_CONT);
        }
      }
      int still_running = 0;
      curl_multi_perform(multi, &still_running);
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL* easy = msg->easy_handle;
        CURLcode code = msg->data.result;
        curl_multi_remove_handle(multi, easy);
        auto it = running.find(easy);
        if (it == running.end()) continue;
        finish(*it->second, code);
        running.erase(it);
      }
      watch_for_slow_requests();
      // Wakes at least twice per slow-request threshold (every second by default) to look.
      const long wait_ms = std::clamp<long>(static_cast<long>(slow_request.count() / 2), 10, 1000);
      curl_multi_poll(multi, nullptr, 0, static_cast<int>(wait_ms), nullptr);
    }
  }

  void submit(std::unique_ptr<Transfer> t) {
    {
      std::lock_guard lock(mu);
      if (stopping) throw TransportError("HTTP transport is shut down", false);
      pending.push_back(std::move(t));
      ++in_flight;
    }
    curl_multi_wakeup(multi);
  }

  // A plain request (not a watch or streamed list) that has run this long is logged once:
  // a stalled transfer is otherwise silent until its timeout.
  const std::chrono::milliseconds slow_request;  // set before the thread starts

  void watch_for_slow_requests() {
    const auto now = std::chrono::steady_clock::now();
    std::chrono::milliseconds oldest{0};
    for (auto& [easy, t] : running) {
      if (t->stream) continue;
      const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - t->started);
      oldest = std::max(oldest, age);
      if (age >= slow_request && !t->reported_slow) {
        t->reported_slow = true;
        ++slow_requests;
        core::log::warn("HTTP request still unanswered",
                        {{"method", t->request.method},
                         {"url", t->request.url},
                         {"seconds", static_cast<std::int64_t>(age.count() / 1000)},
                         {"in_flight", static_cast<std::int64_t>(in_flight.load())}});
      }
    }
    oldest_request_ms = static_cast<std::uint64_t>(oldest.count());
  }
};

HttpTransport::HttpTransport(std::chrono::milliseconds slow_request)
    : impl_(std::make_unique<Impl>(slow_request)) {}
HttpTransport::~HttpTransport() = default;

HttpResponse HttpTransport::perform(HttpRequest request) {
  auto t = std::make_unique<Transfer>();
  t->request = std::move(request);
  std::future<HttpResponse> result = t->promise.get_future();
  impl_->submit(std::move(t));
  return result.get();
}

std::shared_ptr<HttpStream> HttpTransport::stream(HttpRequest request) {
  auto t = std::make_unique<Transfer>();
  auto s = std::make_shared<HttpStream>(request.pause_above);
  t->request = std::move(request);
  t->stream = s;
  Impl* impl = impl_.get();
  std::weak_ptr<HttpStream> weak = s;
  s->resumer_ = [impl, weak] {
    if (auto strong = weak.lock()) {
      {
        std::lock_guard lock(impl->mu);
        impl->to_resume.push_back(strong);
      }
      curl_multi_wakeup(impl->multi);
    }
  };
  s->canceller_ = [impl, weak] {
    if (auto strong = weak.lock()) {
      {
        std::lock_guard lock(impl->mu);
        impl->to_cancel.push_back(strong);
      }
      curl_multi_wakeup(impl->multi);
    }
  };
  impl_->submit(std::move(t));
  return s;
}

HttpTransport::Stats HttpTransport::stats() const {
  return {impl_->transfers.load(),     impl_->new_connections.load(),    impl_->http2.load(),
          impl_->stream_pauses.load(), impl_->max_stream_backlog.load(), impl_->in_flight.load(),
          impl_->slow_requests.load(), impl_->oldest_request_ms.load()};
}

std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace gpufleet::kube
