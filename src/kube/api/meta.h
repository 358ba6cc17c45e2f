// Object metadata accessors and object keys, shared by the client, caches and controllers.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::kube {

// metadata.* accessors used everywhere.
std::string_view name_of(const core::Value& obj) noexcept;
std::string_view namespace_of(const core::Value& obj) noexcept;
std::string_view resource_version_of(const core::Value& obj) noexcept;
std::string_view uid_of(const core::Value& obj) noexcept;
// "ns/name" or "name": the key stores and work queues use.
std::string object_key(const core::Value& obj);
std::string object_key(std::string_view ns, std::string_view name);

// The (namespace, name) of a key made by object_key(); namespace "" for cluster-scoped keys.
std::pair<std::string_view, std::string_view> split_object_key(std::string_view key) noexcept;

// An RFC 3339 timestamp as the API server writes it ("2026-01-02T03:04:05Z", fractions and
// offsets accepted); nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s);

}  // namespace gpufleet::kube
