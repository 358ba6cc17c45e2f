// Strict field readers for hostpkg documents: unknown keys and wrong kinds are errors that
// name the field path, the value and the fix. (A project-wide strict reader is planned; these
// stay small so they can be swapped for it.)
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::hostpkg {

// `v` must be a map whose keys are all in `allowed` (an empty list allows any key).
const core::Map& strict_map(const core::Value& v, const std::string& field,
                            std::initializer_list<std::string_view> allowed);
std::string required_string(const core::Map& m, const std::string& field, std::string_view key);
std::optional<std::string> optional_string(const core::Map& m, const std::string& field,
                                           std::string_view key);
bool optional_bool(const core::Map& m, const std::string& field, std::string_view key,
                   bool fallback);
// An integer within [min, max]; doubles with no fraction are accepted (YAML/JSON numbers).
std::int64_t optional_int(const core::Map& m, const std::string& field, std::string_view key,
                          std::int64_t fallback, std::int64_t min, std::int64_t max);
double optional_number(const core::Map& m, const std::string& field, std::string_view key,
                       double fallback, double min, double max);
// A Go duration string ("10m", "90s") within (0, max].
std::chrono::seconds optional_duration(const core::Map& m, const std::string& field,
                                       std::string_view key, std::chrono::seconds fallback,
                                       std::chrono::seconds max);
// A list of strings (null is an empty list).
std::vector<std::string> string_list(const core::Value* v, const std::string& field);
// Quoted for messages: "\"abc\"" or "<map>".
std::string describe(const core::Value& v);

}  // namespace gpufleet::hostpkg
