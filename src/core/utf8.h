// UTF-8 validation and repair for text that must reach logs, metrics or JSON intact.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::core {

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF).
bool is_valid_utf8(std::string_view s) noexcept;

// Appends `s` with every ill-formed byte sequence replaced by U+FFFD, so the output is
// always valid UTF-8.
void append_valid_utf8(std::string& out, std::string_view s);

}  // namespace gpufleet::core
