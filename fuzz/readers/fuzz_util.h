// Shared rules of the document-reader fuzzers: a reader may accept its input or refuse it
// with core::InvalidInput (which every ParseError and TypeError is); any other exception,
// a crash, a sanitizer report, a leak or a hang is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include "core/errors.h"

namespace gpufleet::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `f`; InvalidInput is the expected refusal, anything else traps.
template <typename F>
void refuse_or_accept(F&& f) {
  try {
    f();
  } catch (const core::InvalidInput&) {
  } catch (const std::exception&) {
    __builtin_trap();  // a reader must refuse bad input with InvalidInput, never other errors
  }
}

}  // namespace gpufleet::fuzz
