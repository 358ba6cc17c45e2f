// SHA-256 digests (OpenSSL): recipe input digests, bundle checksums, content hashes.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::core {

// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace gpufleet::core
