// One small HTTP request to a cloud's instance metadata service (link-local, plain HTTP by
// design of those services), for the cloud-maintenance providers. libcurl stays in the .cc.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gpufleet::sentinel {

struct MetadataRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::chrono::milliseconds timeout{2000};
  std::size_t max_bytes = 1 << 20;
  bool not_found_is_empty = false;  // a 404 means "nothing there" (EC2: no events)
};

// The response body of a 2xx answer. Throws std::runtime_error naming the URL and what went
// wrong (unreachable, timeout, status, too large).
std::string metadata_request(const MetadataRequest& request);

}  // namespace gpufleet::sentinel
