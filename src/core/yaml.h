// YAML reading and writing (libyaml) for core::Value, with the YAML 1.2 core schema:
// plain scalars resolve to null, bool, int or float; quoted scalars are always strings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/input_limits.h"
#include "core/value.h"

namespace gpufleet::core {

// Parses a stream that must hold exactly one document (an empty stream gives null).
// Throws ParseError with line:column on bad input, including duplicate mapping keys, and on
// input over `limits`: text size, nesting depth, scalar size, and the alias budget (nodes
// and bytes that expanding aliases may add; the error names the alias and the limit).
Value parse_yaml(std::string_view text, std::string_view source = {},
                 const InputLimits& limits = input_limits());

// Parses every document of a multi-document stream ("---" separated); empty documents are
// kept as null so that positions match the input.
// The limits apply to the whole stream (one alias budget for all documents).
std::vector<Value> parse_yaml_documents(std::string_view text, std::string_view source = {},
                                        const InputLimits& limits = input_limits());

// Block-style YAML with sorted keys; strings that would read back as another type are
// quoted, multi-line strings use literal blocks. Ends with a newline.
std::string to_yaml(const Value& v);
// Several documents separated by "---".
std::string to_yaml_documents(const std::vector<Value>& docs);

}  // namespace gpufleet::core
