#include "kube/api/compact_json.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "core/errors.h"
#include "kube/api/compact_tape.h"
#include "kube/api/compact_tape_writer.h"

namespace gpufleet::kube {

namespace dom = simdjson::dom;
using namespace tape;

core::JsonPrune projection_tree(const std::vector<std::string>& paths) {
  core::JsonPrune tree;
  for (const auto& p : paths) tree.add(p);
  return tree;
}

namespace {

// One parser per thread: it keeps its buffers between documents. A document much larger than
// any object (a huge watch line) would leave them that large, so the parser is dropped after one.
constexpr std::size_t kKeepParserBelow = std::size_t{1} << 20;

dom::parser& thread_parser() {
  thread_local dom::parser parser;
  return parser;
}

void release_parser_if_large(std::size_t text_size) {
  if (text_size >= kKeepParserBelow) thread_parser() = dom::parser();
}

// Walks simdjson's DOM of one document and writes the tape. Map entries are written in the
// document's order, then put into key order in place (Kubernetes serialises struct fields in
// declaration order, so most maps need it).
class TapeWriter : public TapeWriterBase<TapeWriter> {
 public:
  TapeWriter(StringInterner& interner, const core::InputLimits& limits, std::string_view source,
             std::string& out)
      : TapeWriterBase(interner, limits, source, out) {}

  // Writes `e`; `keep` null means the whole value is kept. Returns false (and writes nothing)
  // when projection drops the value: a scalar where the projection expected a map.
  bool value(dom::element e, const core::JsonPrune* prune, const core::JsonPrune* keep,
             bool intern_strings, std::size_t depth) {
    if (depth > limits_.max_depth) {
      fail("document nested too deeply (limit " + std::to_string(limits_.max_depth) + ")");
    }
    switch (e.type()) {
      case dom::element_type::OBJECT:
        map(e.get_object().value_unsafe(), prune, keep, depth);
        return true;
      case dom::element_type::ARRAY: {
        dom::array arr = e.get_array().value_unsafe();
        out_.push_back(static_cast<char>(kList));
        std::size_t count = 0;
        std::size_t body = out_.size();
        for (dom::element item : arr) {
          if (!value(item, prune, keep, intern_strings, depth + 1)) {
            out_.push_back(static_cast<char>(kNull));  // as Projection: a scalar becomes null
          }
          ++count;
        }
        insert_header(body, count);
        return true;
      }
      case dom::element_type::NULL_VALUE: out_.push_back(static_cast<char>(kNull)); return true;
      default: break;
    }
    if (keep != nullptr) return false;
    switch (e.type()) {
      case dom::element_type::STRING: {
        std::string_view s = e.get_string().value_unsafe();
        if (s.size() > limits_.max_string_bytes) {
          fail("a string of " + core::describe_bytes(s.size()) + " is over the limit of " +
               core::describe_bytes(limits_.max_string_bytes) + " for one value");
        }
        string(s, intern_strings);
        break;
      }
      case dom::element_type::INT64:
        out_.push_back(static_cast<char>(kInt));
        put_varint(out_, zigzag(e.get_int64().value_unsafe()));
        break;
      case dom::element_type::UINT64:
        out_.push_back(static_cast<char>(kUint));
        put_varint(out_, e.get_uint64().value_unsafe());
        break;
      case dom::element_type::DOUBLE: {
        double d = e.get_double().value_unsafe();
        char b[9];
        b[0] = static_cast<char>(kDouble);
        std::memcpy(b + 1, &d, 8);
        out_.append(b, 9);
        break;
      }
      case dom::element_type::BOOL:
        out_.push_back(static_cast<char>(e.get_bool().value_unsafe() ? kTrue : kFalse));
        break;
      default: break;
    }
    return true;
  }

 private:
  void map(dom::object obj, const core::JsonPrune* prune, const core::JsonPrune* keep,
           std::size_t depth) {
    out_.push_back(static_cast<char>(kMap));
    std::size_t body = out_.size();
    std::size_t first = entries_.size();  // this map's entries sit at the top of entries_
    bool sorted = true;
    for (dom::key_value_pair kv : obj) {
      const core::JsonPrune* child_prune = prune != nullptr ? prune->child(kv.key) : nullptr;
      if (child_prune != nullptr && child_prune->drops_all()) continue;
      const core::JsonPrune* child_keep = nullptr;
      if (keep != nullptr) {
        child_keep = keep->child(kv.key);
        if (child_keep == nullptr) continue;
        if (child_keep->drops_all()) child_keep = nullptr;  // the path ends here: keep it all
      }
      if (kv.key.size() > limits_.max_string_bytes) {
        fail("a key of " + core::describe_bytes(kv.key.size()) + " is over the limit of " +
             core::describe_bytes(limits_.max_string_bytes) + " for one value");
      }
      std::size_t begin = out_.size();
      key(kv.key);
      if (!value(kv.value, child_prune, child_keep, !unique_valued_key(kv.key), depth + 1)) {
        out_.resize(begin);
        continue;
      }
      if (out_.size() - body > 0xffffffffU) fail("object too large for the compact cache form");
      if (entries_.size() > first && !(entries_.back().key < kv.key)) sorted = false;
      entries_.push_back({kv.key, static_cast<std::uint32_t>(begin - body),
                          static_cast<std::uint32_t>(out_.size() - body)});
    }
    std::size_t count = entries_.size() - first;
    if (!sorted) sort_entries(body, first);
    entries_.resize(first);
    insert_header(body, count);
  }
};

dom::element parse(std::string_view text, std::string_view source,
                   const core::InputLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw core::ParseError(std::string(source), 0, 0,
                           "document is " + core::describe_bytes(text.size()) +
                               ", over the input limit of " +
                               core::describe_bytes(limits.max_bytes));
  }
  dom::element root;
  if (thread_parser().parse(text.data(), text.size(), true).get(root) != simdjson::SUCCESS) {
    release_parser_if_large(text.size());
    // The cold path: core::parse_json walks the text again and says where and what is wrong.
    (void)core::parse_json(text, source, nullptr, limits);
    throw core::ParseError(std::string(source), 0, 0, "malformed JSON");
  }
  return root;
}

CompactPtr finish(std::string& out, StringInterner& interner) {
  auto size = static_cast<std::uint32_t>(out.size());
  auto bytes = std::make_unique<std::uint8_t[]>(out.size());
  std::memcpy(bytes.get(), out.data(), out.size());
  return std::make_shared<const CompactObject>(&interner, std::move(bytes), size);
}

std::string& thread_out() {
  thread_local std::string out;
  out.clear();
  return out;
}

void release_out(std::string& out) {
  if (out.capacity() > kKeepParserBelow) std::string().swap(out);  // bounded between objects
}

CompactPtr write_object(dom::element root, const CompactDecodeShape& shape, std::string_view source,
                        StringInterner& interner, const core::InputLimits& limits) {
  std::string& out = thread_out();
  TapeWriter w(interner, limits, source, out);
  if (shape.prune != nullptr && shape.prune->drops_all()) {
    out.push_back(static_cast<char>(kNull));
  } else if (shape.keep != nullptr && shape.keep->drops_all()) {
    w.value(root, shape.prune, nullptr, true, 0);
  } else if (!w.value(root, shape.prune, shape.keep, true, 0)) {
    out.push_back(static_cast<char>(kNull));
  }
  CompactPtr obj = finish(out, interner);
  release_out(out);
  return obj;
}

}  // namespace

CompactPtr decode_compact_json(std::string_view text, const CompactDecodeShape& shape,
                               std::string_view source, StringInterner& interner,
                               const core::InputLimits& limits) {
  dom::element root = parse(text, source, limits);
  CompactPtr obj;
  try {
    obj = write_object(root, shape, source, interner, limits);
  } catch (...) {
    release_parser_if_large(text.size());
    throw;
  }
  release_parser_if_large(text.size());
  return obj;
}

bool append_compact_json(std::string_view text, const core::JsonPrune* prune,
                         const core::JsonPrune* keep, bool intern_strings, std::size_t depth,
                         std::string& out, std::string_view source, StringInterner& interner,
                         const core::InputLimits& limits) {
  dom::element root = parse(text, source, limits);
  std::size_t begin = out.size();
  bool kept = false;
  try {
    TapeWriter w(interner, limits, source, out);
    kept = w.value(root, prune, keep, intern_strings, depth);
  } catch (...) {
    release_parser_if_large(text.size());
    out.resize(begin);
    throw;
  }
  release_parser_if_large(text.size());
  return kept;
}

CompactPtr decode_compact_watch_event(std::string_view line, const CompactDecodeShape& shape,
                                      std::string& type, StringInterner& interner,
                                      const core::InputLimits& limits) {
  dom::element root = parse(line, "watch event", limits);
  type.clear();
  CompactPtr obj;
  try {
    dom::object ev;
    if (root.get_object().get(ev) != simdjson::SUCCESS) {
      throw core::ParseError("watch event", 1, 1, "a watch event must be a JSON object");
    }
    std::string_view t;
    if (ev["type"].get_string().get(t) == simdjson::SUCCESS) type.assign(t);
    dom::element object;
    if (ev["object"].get(object) == simdjson::SUCCESS) {
      obj = write_object(object, shape, "watch event", interner, limits);
    }
  } catch (...) {
    release_parser_if_large(line.size());
    throw;
  }
  release_parser_if_large(line.size());
  return obj;
}

}  // namespace gpufleet::kube
