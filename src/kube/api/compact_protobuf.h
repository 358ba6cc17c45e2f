// Decoding the Kubernetes protobuf wire format (application/vnd.kubernetes.protobuf) straight
// into the compact cached form, for the built-in kinds whose schema is compiled in (Node, Pod;
// api/k8s_wire.proto). Pruning and projection work on JSON paths as in compact_json.h, and the
// tape is the one the JSON path writes for the same content, byte for byte: Quantity, Time
// and IntOrString become their JSON scalars, fields Go's encoding/json leaves out when empty
// are left out, and a watch event's object gets the kind and apiVersion the JSON event has.
//
// Why: the API server encodes a Node list as protobuf in about half the time it takes for JSON
// and sends a fifth fewer bytes (docs/performance.md); the cache form stays the same.
//
// Framing: a protobuf body is the magic "k8s\0" + a runtime.Unknown whose `raw` is the object
// (or List); a watch body is a stream of frames, each a 4-byte big-endian length + a
// metav1.WatchEvent whose object's raw is magic + Unknown again.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/errors.h"
#include "kube/api/compact_json.h"

namespace gpufleet::kube {

// The media type to ask for; servers answer JSON for kinds they cannot encode (CRDs).
inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";
// The 4 bytes every protobuf body starts with.
inline constexpr std::string_view kProtobufMagic{"k8s\0", 4};

// Content the compiled-in schema cannot represent where the cache keeps it (a field this
// build does not know, or of an unexpected shape). Not malformed input: the caller should go
// back to JSON for this resource.
class UnsupportedProtobuf : public core::ParseError {
 public:
  using core::ParseError::ParseError;
};

// A kind's compiled schema. Cheap to copy; null kinds decode nothing.
class ProtobufKind {
 public:
  // The schema for a built-in kind ("Node", "Pod", "Status"); nullopt for other kinds.
  static std::optional<ProtobufKind> find(std::string_view kind);
  // The schema for a resource ("", "v1", "nodes"); nullopt for resources served only as JSON
  // here (every other kind, CRDs included).
  static std::optional<ProtobufKind> for_resource(std::string_view group, std::string_view version,
                                                  std::string_view resource);
  [[nodiscard]] std::string_view name() const noexcept;

 private:
  friend struct ProtobufAccess;
  explicit ProtobufKind(const void* plan) : plan_(plan) {}
  const void* plan_;
};

// The runtime.Unknown inside a protobuf body (views into it).
struct ProtobufEnvelope {
  std::string_view api_version;
  std::string_view kind;
  std::string_view raw;
};

// True when `body` starts with the magic (a protobuf answer rather than JSON).
[[nodiscard]] bool is_protobuf_body(std::string_view body) noexcept;

// Unwraps magic + Unknown. Throws core::ParseError for a wrong magic, malformed bytes or a
// contentEncoding (the server never compresses the inner object).
ProtobufEnvelope unwrap_protobuf(std::string_view body, std::string_view source);

// Decodes one object's message bytes (a List item, an envelope's raw) into its compact form.
// `type_meta`, when given, adds "apiVersion" and "kind" as the JSON form of a single object has
// them. Throws core::ParseError for malformed bytes or input over `limits`,
// UnsupportedProtobuf for content the schema does not cover where `shape` keeps it.
CompactPtr decode_compact_protobuf(std::string_view message, const ProtobufKind& kind,
                                   const CompactDecodeShape& shape = {},
                                   const ProtobufEnvelope* type_meta = nullptr,
                                   std::string_view source = "object",
                                   StringInterner& interner = StringInterner::shared(),
                                   const core::InputLimits& limits = core::input_limits());

// One watch frame (a WatchEvent, without the length prefix). `type` gets the event type. The
// object must be of `kind`; an ERROR event's object is a Status: its JSON text goes to
// `status_json` and the result is null.
CompactPtr decode_compact_protobuf_watch_event(
    std::string_view frame, const ProtobufKind& kind, const CompactDecodeShape& shape,
    std::string& type, std::string& status_json,
    StringInterner& interner = StringInterner::shared(),
    const core::InputLimits& limits = core::input_limits());

// The JSON text of a Status in a protobuf error answer (magic + Unknown{Status}); "" when
// `body` is not one.
std::string protobuf_status_json(std::string_view body);

// Splits a streamed protobuf List body into its items as the bytes arrive (the protobuf twin
// of ListItemSplitter): each item's message bytes go to `on_item` once complete, so a list is
// never held whole. Bounded: an item over kMaxItem or list metadata over kMaxMeta throws
// core::ParseError.
class ProtobufListSplitter {
 public:
  static constexpr std::size_t kMaxItem = std::size_t{64} << 20;
  static constexpr std::size_t kMaxMeta = std::size_t{1} << 20;

  explicit ProtobufListSplitter(std::function<void(std::string_view item)> on_item)
      : on_item_(std::move(on_item)) {}
  void feed(std::string_view chunk);
  // Throws core::ParseError when the body ended early or held no list.
  void finish() const;
  [[nodiscard]] const std::string& resource_version() const noexcept { return rv_; }
  [[nodiscard]] const std::string& continue_token() const noexcept { return continue_; }
  [[nodiscard]] std::size_t items() const noexcept { return count_; }

 private:
  bool step();
  void list_meta(std::string_view bytes);

  std::function<void(std::string_view)> on_item_;
  std::string buf_;
  std::size_t pos_ = 0;
  bool magic_ = false;
  bool in_list_ = false;
  bool seen_list_ = false;
  std::uint64_t list_left_ = 0;  // bytes of the List message not yet consumed
  std::uint64_t skip_ = 0;       // bytes of an ignored field still to drop
  bool skip_in_list_ = false;
  std::string rv_;
  std::string continue_;
  std::size_t count_ = 0;
};

// Splits a protobuf watch body into frames (4-byte big-endian length + message). Bounded: a
// frame over kMaxFrame throws core::ParseError.
class ProtobufFrameSplitter {
 public:
  static constexpr std::size_t kMaxFrame = std::size_t{64} << 20;

  void feed(std::string_view chunk) { buffer_.append(chunk); }
  // The next complete frame's message (valid until the next call), or nullopt.
  std::optional<std::string_view> next_frame();
  [[nodiscard]] std::size_t pending() const noexcept { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  std::size_t start_ = 0;
};

}  // namespace gpufleet::kube
