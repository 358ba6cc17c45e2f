// Decoding JSON text straight into the compact cached form (kube/api/compact.h), pruning and
// projecting while decoding: no core::Value tree is built on the way.
//
// Why: an informer's sync and every watch event used to parse JSON into a core::Value (a heap
// block per map, per entry's key and per long string), then encode that tree into the tape and
// free it. Reading the parser's output into the tape directly skips the tree, its allocations
// and its frees; the tape is the same, byte for byte, as CompactObject::encode of
// Projection(paths).apply(parse_json(text, prune)) (tests/kube/compact_json_test.cc checks it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/input_limits.h"
#include "core/json.h"
#include "kube/api/compact.h"

namespace gpufleet::kube {

// What to keep of each decoded object. Both trees are optional and are read, never copied:
// they must outlive the call.
struct CompactDecodeShape {
  // Paths dropped while decoding ("status.images"), as ObjectShape::prune.
  const core::JsonPrune* prune = nullptr;
  // Only these paths are kept (a Projection's paths, built with projection_tree()); null keeps
  // everything. Same rules as Projection::apply: a path ends at a whole subtree, lists apply the
  // rest of the path to each element, a scalar where a map was expected is dropped.
  const core::JsonPrune* keep = nullptr;
};

// The tree decode_compact_json takes as `keep` for these dotted paths (Projection's paths).
core::JsonPrune projection_tree(const std::vector<std::string>& paths);

// Decodes one JSON document (an object, as served) into its compact form. Throws
// core::ParseError naming `source` and the line:column for malformed JSON, duplicate keys and
// input over `limits` (text size, nesting depth, string size), as core::parse_json does.
CompactPtr decode_compact_json(std::string_view text, const CompactDecodeShape& shape = {},
                               std::string_view source = "object",
                               StringInterner& interner = StringInterner::shared(),
                               const core::InputLimits& limits = core::input_limits());

// A watch event line ({"type":"MODIFIED","object":{...}}) decoded the same way: `type` gets the
// event's type string and the result is the object ("" and null when the line has none; the
// caller reports that). The object of an ERROR event is a Status: the caller decodes the line
// again the ordinary way to build its error.
CompactPtr decode_compact_watch_event(std::string_view line, const CompactDecodeShape& shape,
                                      std::string& type,
                                      StringInterner& interner = StringInterner::shared(),
                                      const core::InputLimits& limits = core::input_limits());

// Appends the tape of one JSON value to `out`, as decode_compact_json writes a value found at a
// place with these trees (`keep` null keeps it whole); false, and nothing appended, when the
// projection drops it. For the protobuf decoder: metav1.FieldsV1 carries JSON text.
bool append_compact_json(std::string_view text, const core::JsonPrune* prune,
                         const core::JsonPrune* keep, bool intern_strings, std::size_t depth,
                         std::string& out, std::string_view source, StringInterner& interner,
                         const core::InputLimits& limits);

}  // namespace gpufleet::kube
