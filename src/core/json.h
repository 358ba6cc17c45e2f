// JSON reading (simdjson) and writing for core::Value.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_limits.h"
#include "core/value.h"

namespace gpufleet::core {

// Member paths to drop while decoding, so that large fields never reach memory (for example
// a Node's status.images). A path walks object keys; lists apply the same node to each
// element. Build with add("status.images").
class JsonPrune {
 public:
  JsonPrune& add(std::string_view dotted_path);
  [[nodiscard]] const JsonPrune* child(std::string_view key) const noexcept;
  [[nodiscard]] bool drops_all() const noexcept { return drop_; }
  // The keys that have a child, in order.
  [[nodiscard]] std::vector<std::string_view> child_keys() const;

 private:
  bool drop_ = false;
  std::map<std::string, std::unique_ptr<JsonPrune>, std::less<>> children_;
};

// Parses one JSON document. Throws ParseError with line:column on bad input. Integers
// become Int (or Uint beyond int64), other numbers Double. Duplicate keys are an error, and
// so is input over `limits` (text size, nesting depth, string size).
Value parse_json(std::string_view text, std::string_view source = {},
                 const JsonPrune* prune = nullptr, const InputLimits& limits = input_limits());

enum class JsonStyle { Compact, Pretty };

// Serializes deterministically (map keys sorted). Bytes become base64 strings. Throws
// InvalidInput for NaN or infinite doubles, which JSON cannot carry.
std::string to_json(const Value& v, JsonStyle style = JsonStyle::Compact);
void append_json(std::string& out, const Value& v, JsonStyle style = JsonStyle::Compact);
// Appends `s` as a quoted JSON string with the required escapes.
void append_json_string(std::string& out, std::string_view s);

}  // namespace gpufleet::core
