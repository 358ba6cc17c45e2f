#include "sentinel/maintenance_http.h"

#include <curl/curl.h>

#include <memory>
#include <stdexcept>

namespace gpufleet::sentinel {

namespace {

struct Body {
  std::string data;
  std::size_t max = 0;
  bool too_large = false;
};

std::size_t on_data(char* p, std::size_t size, std::size_t n, void* user) {
  auto* body = static_cast<Body*>(user);
  const std::size_t len = size * n;
  if (body->data.size() + len > body->max) {
    body->too_large = true;
    return 0;  // aborts the transfer
  }
  body->data.append(p, len);
  return len;
}

}  // namespace

std::string metadata_request(const MetadataRequest& r) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw std::runtime_error(r.url + ": cannot create an HTTP handle");
  CURL* h = curl.get();
  Body body;
  body.max = r.max_bytes;
  curl_slist* headers = nullptr;
  for (const auto& line : r.headers) headers = curl_slist_append(headers, line.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers,
                                                                           curl_slist_free_all);
  curl_easy_setopt(h, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  if (r.method == "PUT") curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(r.timeout.count()));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");  // link-local: never through a proxy
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  const CURLcode rc = curl_easy_perform(h);
  if (body.too_large)
    throw std::runtime_error(r.url + ": the answer is larger than " + std::to_string(r.max_bytes) +
                             " bytes");
  if (rc != CURLE_OK) throw std::runtime_error(r.url + ": " + curl_easy_strerror(rc));
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (status == 404 && r.not_found_is_empty) return "";
  if (status < 200 || status > 299)
    throw std::runtime_error(r.url + ": HTTP status " + std::to_string(status));
  return std::move(body.data);
}

}  // namespace gpufleet::sentinel
