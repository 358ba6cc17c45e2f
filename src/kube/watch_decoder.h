// Decoding of a watch response body: newline-delimited JSON events
// ({"type":"ADDED","object":{...}}), arriving in arbitrary chunks.
#pragma once

#include <functional>
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

// Splits a streamed List body ({"kind":...,"metadata":{...},"items":[{...},...]}) into its
// items as the bytes arrive, so that a list is decoded one item at a time and never held whole
// (neither its text nor its tree). feed() hands each complete item's JSON text to `on_item`;
// envelope() is the document without its items ("items":[]), for metadata. Bounded: an item
// longer than kMaxItem or an envelope longer than kMaxEnvelope throws core::ParseError.
class ListItemSplitter {
 public:
  static constexpr std::size_t kMaxItem = std::size_t{64} << 20;
  static constexpr std::size_t kMaxEnvelope = std::size_t{1} << 20;

  explicit ListItemSplitter(std::function<void(std::string_view item)> on_item)
      : on_item_(std::move(on_item)) {}
  void feed(std::string_view chunk);
  // Throws core::ParseError when the body ended inside a value or had no top-level object.
  void finish() const;
  [[nodiscard]] const std::string& envelope() const noexcept { return envelope_; }
  [[nodiscard]] std::size_t items() const noexcept { return count_; }

 private:
  void append_envelope(std::string_view s);
  void append_item(std::string_view s);

  std::function<void(std::string_view)> on_item_;
  std::string envelope_;
  std::string item_;
  std::string last_string_;   // the last string closed at depth 1 (a key candidate)
  bool key_ready_ = false;    // ':' followed last_string_
  bool capture_key_ = false;  // inside a string at depth 1
  bool in_string_ = false;
  bool escape_ = false;
  bool in_items_ = false;  // inside the top-level "items" array
  bool in_item_ = false;   // inside one item (an object at depth 2 of the items array)
  int depth_ = 0;
  std::size_t count_ = 0;
  bool seen_root_ = false;
};

}  // namespace gpufleet::kube
