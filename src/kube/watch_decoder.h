// Decoding of a watch response body: newline-delimited JSON events
// ({"type":"ADDED","object":{...}}), arriving in arbitrary chunks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "kube/client.h"

namespace gpufleet::kube {

// Builds the prune tree for watch event lines from paths inside the object
// ("status.images" drops object.status.images).
core::JsonPrune watch_event_prune(const std::vector<std::string>& object_paths);
// The same for list answers (items[].status.images).
core::JsonPrune list_prune(const std::vector<std::string>& object_paths);

// Decodes one event line. ERROR events throw ApiError built from their Status (410 Gone when
// the resourceVersion was compacted); unknown types and malformed lines throw core::ParseError.
WatchEvent decode_watch_event(std::string_view line, const core::JsonPrune* prune,
                              const RequestInfo& request);

// Splits a byte stream into complete lines. feed() appends a chunk; next_line() yields each
// complete line (without the newline) once. Bounded: an incomplete line longer than kMaxLine
// (no Kubernetes object comes near it; etcd's limit is 1.5 MiB) throws core::ParseError.
class LineSplitter {
 public:
  static constexpr std::size_t kMaxLine = std::size_t{64} << 20;

  void feed(std::string_view chunk) { buffer_.append(chunk); }
  std::optional<std::string_view> next_line();
  // Bytes of an incomplete trailing line.
  [[nodiscard]] std::size_t pending() const noexcept { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  std::size_t start_ = 0;
};

}  // namespace gpufleet::kube
