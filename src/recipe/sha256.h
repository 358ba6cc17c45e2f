// SHA-256 digests (OpenSSL) for recipe input digests and bundle checksums.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::recipe {

// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace gpufleet::recipe
