// How a run's state documents (the target set, each category's state.json) are stored in
// their ConfigMaps. At 5,000 nodes a perNode category's state is over a megabyte of JSON,
// past what a ConfigMap holds (1 MiB), while its node names and result keys repeat so much
// that gzip shrinks it ~10x: a document above kCompressAbove bytes is stored gzip'd under
// binaryData "<key>.gz"; smaller ones stay readable as data "<key>" (kubectl shows them).
// Reading accepts both forms, so objects written before compression existed still load.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::certify {

inline constexpr std::size_t kCompressAbove = 16 * 1024;

// The `data` / `binaryData` maps of a ConfigMap holding `json` under `key`: exactly one of
// data[key] (plain) and binaryData[key + ".gz"] (base64 of gzip) is set.
struct EncodedState {
  core::Value data = core::Value::map();
  core::Value binary_data = core::Value::map();
};
EncodedState encode_state(std::string_view key, const std::string& json);

// The JSON stored under `key` in ConfigMap `cm` (either form), nullopt when neither is
// present. Throws core::InvalidInput naming the ConfigMap for bad base64, corrupt gzip or
// a document inflating past core::input_limits().max_inflated_bytes.
std::optional<std::string> decode_state(const core::Value& cm, std::string_view key);

}  // namespace gpufleet::certify
