// gzip compression of whole documents in memory (zlib): certify's run state in its
// ConfigMaps, Helm release records read from a cluster. Inflating is bounded, because the
// input comes from objects anyone with write access to them may have shaped.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::core {

// A gzip stream (with header, so `gunzip` reads it) at the best compression.
std::string gzip(std::string_view data);

// Inflates a gzip stream. Throws core::InvalidInput "<what>: ..." when it is corrupt or would
// inflate past core::input_limits().max_inflated_bytes; the fixes, when given, are appended in
// parentheses. Memory never exceeds the limit by more than one 16 KiB buffer.
std::string gunzip(std::string_view data, std::string_view what,
                   std::string_view fix_when_too_large = {},
                   std::string_view fix_when_corrupt = {});

}  // namespace gpufleet::core
