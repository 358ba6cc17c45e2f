// Standard base64 (RFC 4648, with padding), as Kubernetes uses for Secret data and bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpufleet::core {

std::string base64_encode(std::string_view data);
// nullopt when `text` is not valid padded base64 (whitespace is not allowed).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace gpufleet::core
