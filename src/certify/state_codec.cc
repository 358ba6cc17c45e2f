#include "certify/state_codec.h"

#include "core/base64.h"
#include "core/errors.h"
#include "core/gzip.h"
#include "core/input_limits.h"

namespace gpufleet::certify {

EncodedState encode_state(std::string_view key, const std::string& json) {
  EncodedState e;
  if (json.size() > kCompressAbove) {
    std::string z = core::gzip(json);
    if (z.size() < json.size()) {
      e.binary_data[std::string(key) + ".gz"] = core::base64_encode(z);
      return e;
    }
  }
  e.data[std::string(key)] = json;
  return e;
}

std::optional<std::string> decode_state(const core::Value& cm, std::string_view key) {
  const std::string gz = std::string(key) + ".gz";
  if (const core::Value* b = cm.get({"binaryData", gz}); b != nullptr && b->is_string()) {
    std::string what =
        "ConfigMap " + std::string(cm.get_string({"metadata", "name"})) + " binaryData." + gz;
    auto bytes = core::base64_decode(b->as_string());
    if (!bytes) throw core::InvalidInput(what + ": is not valid base64");
    return core::gunzip(*bytes, what,
                        "raise it with GPUFLEET_MAX_INPUT_BYTES if this state is real",
                        "delete the ConfigMap to restart the category, or restore it");
  }
  if (const core::Value* d = cm.get({"data", std::string(key)}); d != nullptr && d->is_string())
    return d->as_string();
  return std::nullopt;
}

}  // namespace gpufleet::certify
