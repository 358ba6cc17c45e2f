// A minimal libcurl client for testing core::HttpServer over real loopback sockets.
#pragma once

#include <curl/curl.h>

#include <string>

namespace gpufleet::core::testing {

struct HttpResult {
  long status = 0;
  std::string body;
  std::string headers;
  std::string error;  // curl's message when the request failed
};

// `post_body` is sent with POST; `ca_pem` (PEM text) is the only CA trusted for https URLs;
// `client_cert_pem` and `client_key_pem`, when given, are presented as the client certificate.
inline HttpResult http_request(const std::string& url, const char* method = "GET",
                               const std::string* post_body = nullptr,
                               const std::string& ca_pem = {},
                               const std::string& client_cert_pem = {},
                               const std::string& client_key_pem = {}) {
  // Global initialisation is not thread-safe everywhere; a function-local static is.
  static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  HttpResult r;
  if (!initialised) {
    r.error = "curl_global_init failed";
    return r;
  }
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    r.error = "curl_easy_init failed";
    return r;
  }
  const auto append = +[](char* data, size_t size, size_t n, void* out) -> size_t {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
  };
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_PROXY, "");  // never route loopback through a proxy
  if (std::string(method) == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (std::string(method) != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (std::string(method) == "POST") {
      if (post_body != nullptr) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(post_body->size()));
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post_body->data());
      } else {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "x=1");
      }
    }
  }
  curl_blob ca{const_cast<char*>(ca_pem.data()), ca_pem.size(), CURL_BLOB_COPY};
  if (!ca_pem.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  curl_blob cert{const_cast<char*>(client_cert_pem.data()), client_cert_pem.size(), CURL_BLOB_COPY};
  curl_blob key{const_cast<char*>(client_key_pem.data()), client_key_pem.size(), CURL_BLOB_COPY};
  if (!client_cert_pem.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, append);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
  const CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  } else {
    r.error = curl_easy_strerror(rc);
  }
  curl_easy_cleanup(curl);
  return r;
}

}  // namespace gpufleet::core::testing
