// Credentials attached to each request (internal to kube): a static or file-backed bearer
// token, client certificates, or an exec credential plugin whose answer is cached until its
// expirationTimestamp. Tokens and keys are never logged or put in error messages.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "kube/config.h"

namespace gpufleet::kube {

struct CurrentCredentials {
  std::string bearer_token;  // empty: none
  std::string client_cert_pem;
  std::string client_key_pem;
};

class Credentials {
 public:
  explicit Credentials(const ClientConfig& config);

  // Thread-safe. Re-reads a token file when its modification time changed (rotation), runs the
  // exec plugin when its credential expired or was invalidated.
  CurrentCredentials current();
  // After a 401: the next current() re-reads the token file or re-runs the plugin.
  // Returns false when nothing could change (a static token), so retrying is pointless.
  bool invalidate();

 private:
  CurrentCredentials run_exec();

  ClientConfig config_;
  std::mutex mu_;
  std::string file_token_;
  std::chrono::system_clock::time_point file_mtime_{};
  bool file_loaded_ = false;
  std::optional<CurrentCredentials> exec_cache_;
  std::optional<std::chrono::system_clock::time_point> exec_expiry_;
};

// Parses an RFC 3339 time ("2026-11-30T05:00:00Z", fractions and offsets allowed) with
// core::Timestamp; times beyond what system_clock holds clamp to its ends.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s);
// Formats a time as Kubernetes MicroTime ("2026-11-30T05:00:00.123456Z").
std::string format_micro_time(std::chrono::system_clock::time_point t);

}  // namespace gpufleet::kube
