// Bounds on what one input document may cost to read. Every reader of outside input (files,
// API responses, tool output) applies them, so that no input, careless or hostile, can make
// a gpufleet process use unbounded memory or time. The defaults are far above what any real
// document reaches; docs/security.md lists each limit and how to change it.
#pragma once

#include <cstddef>
#include <string>

namespace gpufleet::core {

struct InputLimits {
  // Bytes of one input file or document text. The GPUFLEET_MAX_INPUT_BYTES environment
  // variable changes the default (see input_limits()).
  std::size_t max_bytes = std::size_t{64} << 20;
  // Nesting depth of lists and maps (YAML and JSON).
  std::size_t max_depth = 512;
  // Bytes of one string scalar (YAML scalar, JSON string).
  std::size_t max_string_bytes = std::size_t{16} << 20;
  // YAML aliases: nodes and scalar bytes that expanding aliases may add to one stream.
  // Expansion copies the anchored node, so without a budget ten nested anchors of ten
  // aliases each (the "billion laughs" document, 1 KB) grow to 10^10 nodes.
  std::size_t max_alias_nodes = 1'000'000;
  std::size_t max_alias_bytes = std::size_t{64} << 20;
  // Bytes a compressed payload (gzip: Helm release records) may inflate to.
  std::size_t max_inflated_bytes = std::size_t{64} << 20;
};

// The process-wide defaults: InputLimits{} with max_bytes (and max_inflated_bytes) taken from
// GPUFLEET_MAX_INPUT_BYTES when it holds a positive byte count (suffixes Ki, Mi, Gi allowed),
// read once. A bad value is ignored with a warning on stderr rather than failing commands
// that read no files.
const InputLimits& input_limits();

// A byte count for error messages: "67108864 bytes (64 MiB)".
std::string describe_bytes(std::size_t n);

}  // namespace gpufleet::core
