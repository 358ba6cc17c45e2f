#include "kube/watch_decoder.h"

#include <cstring>

#include "core/errors.h"

namespace gpufleet::kube {

core::JsonPrune watch_event_prune(const std::vector<std::string>& object_paths) {
  core::JsonPrune p;
  for (const auto& path : object_paths) p.add("object." + path);
  return p;
}

core::JsonPrune list_prune(const std::vector<std::string>& object_paths) {
  core::JsonPrune p;
  for (const auto& path : object_paths) p.add("items." + path);
  return p;
}

std::string_view watch_event_type_name(WatchEvent::Type t) noexcept {
  switch (t) {
    case WatchEvent::Type::Added: return "ADDED";
    case WatchEvent::Type::Modified: return "MODIFIED";
    case WatchEvent::Type::Deleted: return "DELETED";
    case WatchEvent::Type::Bookmark: return "BOOKMARK";
  }
  return "?";
}

WatchEvent decode_watch_event(std::string_view line, const core::JsonPrune* prune,
                              const RequestInfo& request) {
  core::Value ev = core::parse_json(line, "watch event", prune);
  core::Value* type = ev.find("type");
  core::Value* object = ev.find("object");
  if (type == nullptr || !type->is_string() || object == nullptr) {
    throw core::ParseError("watch event", 1, 1,
                           "a watch event needs a string \"type\" and an \"object\"");
  }
  const std::string& t = type->as_string();
  WatchEvent out{WatchEvent::Type::Added, std::move(*object)};
  if (t == "ADDED") {
    out.type = WatchEvent::Type::Added;
  } else if (t == "MODIFIED") {
    out.type = WatchEvent::Type::Modified;
  } else if (t == "DELETED") {
    out.type = WatchEvent::Type::Deleted;
  } else if (t == "BOOKMARK") {
    out.type = WatchEvent::Type::Bookmark;
  } else if (t == "ERROR") {
    int code = 500;
    if (const core::Value* c = out.object.find("code"); c && c->is_int()) {
      code = static_cast<int>(c->as_int());
    }
    throw decode_status_error(code, core::to_json(out.object), request);
  } else {
    throw core::ParseError("watch event", 1, 1,
                           "unknown watch event type \"" + t +
                               "\" (expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR)");
  }
  return out;
}

std::optional<std::string_view> LineSplitter::next_line() {
  for (;;) {
    std::size_t nl = buffer_.find('\n', start_);
    if (nl == std::string::npos) {
      // Compact: keep only the partial line, so the buffer never grows without bound.
      if (start_ > 0) {
        buffer_.erase(0, start_);
        start_ = 0;
      }
      if (buffer_.size() > kMaxLine) {
        throw core::ParseError(
            "watch stream", 1, 1,
            "a watch event is longer than " + std::to_string(kMaxLine >> 20) +
                " MiB without a newline; the stream is not a watch or is corrupt");
      }
      return std::nullopt;
    }
    std::string_view line(buffer_.data() + start_, nl - start_);
    start_ = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    return line;
  }
}

// ---- ListItemSplitter ----
//
// A byte-level scanner: it tracks strings (with escapes) and nesting depth only. Depth 1 is the
// list object; its "items" array's elements sit at depth 2 and are cut out whole.

void ListItemSplitter::append_envelope(std::string_view s) {
  if (envelope_.size() + s.size() > kMaxEnvelope) {
    throw core::ParseError("list", 1, 1,
                           "the list's members besides items exceed " +
                               std::to_string(kMaxEnvelope >> 20) + " MiB; not a Kubernetes list");
  }
  envelope_.append(s);
}

void ListItemSplitter::append_item(std::string_view s) {
  if (item_.size() + s.size() > kMaxItem) {
    throw core::ParseError("list", 1, 1,
                           "list item " + std::to_string(count_ + 1) + " is longer than " +
                               std::to_string(kMaxItem >> 20) + " MiB");
  }
  item_.append(s);
}

void ListItemSplitter::feed(std::string_view chunk) {
  std::size_t mark = 0;  // start of the bytes not yet copied to envelope_ or item_
  auto flush = [&](std::size_t end) {
    if (end <= mark) return;
    std::string_view part = chunk.substr(mark, end - mark);
    if (in_item_) {
      append_item(part);
    } else if (!in_items_) {
      append_envelope(part);
    }
    mark = end;
  };
  const char* data = chunk.data();
  const std::size_t size = chunk.size();
  for (std::size_t i = 0; i < size; ++i) {
    char c = data[i];
    if (in_string_) {
      if (!escape_ && !capture_key_) {
        // The fast path for the bulk of a list's bytes: jump to the string's closing quote,
        // stopping at a backslash (the next byte is escaped, whatever it is).
        const void* q = std::memchr(data + i, '"', size - i);
        std::size_t end =
            q != nullptr ? static_cast<std::size_t>(static_cast<const char*>(q) - data) : size;
        const void* b = std::memchr(data + i, '\\', end - i);
        if (b != nullptr) {
          i = static_cast<std::size_t>(static_cast<const char*>(b) - data);
          escape_ = true;
        } else if (q != nullptr) {
          i = end;
          in_string_ = false;
        } else {
          i = size - 1;
        }
        continue;
      }
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      if (capture_key_) {
        if (in_string_) {
          if (last_string_.size() < 64) last_string_.push_back(c);
        } else {
          capture_key_ = false;
        }
      }
      continue;
    }
    switch (c) {
      case '"':
        if (depth_ == 2 && in_items_ && !in_item_) {
          throw core::ParseError("list", 1, 1,
                                 "list item " + std::to_string(count_ + 1) + " is not an object");
        }
        in_string_ = true;
        if (depth_ == 1) {
          capture_key_ = true;
          last_string_.clear();
          key_ready_ = false;
        }
        break;
      case ':':
        if (depth_ == 1) key_ready_ = true;
        break;
      case '{':
      case '[':
        if (depth_ == 0) {
          if (c != '{' || seen_root_) {
            throw core::ParseError("list", 1, 1, "a list answer must be one JSON object");
          }
          seen_root_ = true;
        }
        if (depth_ == 1 && c == '[' && key_ready_ && last_string_ == "items") {
          flush(i + 1);  // the envelope keeps "items":[ ... and gets ] back at the end
          in_items_ = true;
        } else if (depth_ == 2 && in_items_ && !in_item_) {
          if (c != '{') {
            throw core::ParseError("list", 1, 1,
                                   "list item " + std::to_string(count_ + 1) + " is not an object");
          }
          mark = i;
          in_item_ = true;
        }
        if (depth_ == 1) key_ready_ = false;
        ++depth_;
        break;
      case '}':
      case ']':
        --depth_;
        if (depth_ < 0) throw core::ParseError("list", 1, 1, "unbalanced brackets in a list");
        if (in_item_ && depth_ == 2) {
          in_item_ = false;
          ++count_;
          if (item_.empty()) {
            // The whole item lies in this chunk (the common case): no copy.
            if (i + 1 - mark > kMaxItem) append_item(chunk.substr(mark, i + 1 - mark));  // throws
            std::string_view whole = chunk.substr(mark, i + 1 - mark);
            mark = i + 1;
            on_item_(whole);
          } else {
            in_item_ = true;
            flush(i + 1);
            in_item_ = false;
            on_item_(item_);
            item_.clear();
          }
        } else if (in_items_ && depth_ == 1) {
          in_items_ = false;
          mark = i;  // the closing ] goes to the envelope
        }
        break;
      default:
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r' && c != ',') {
          if (depth_ == 1) key_ready_ = false;  // a scalar value
          if (depth_ == 2 && in_items_ && !in_item_) {
            throw core::ParseError("list", 1, 1,
                                   "list item " + std::to_string(count_ + 1) + " is not an object");
          }
        }
        break;
    }
  }
  flush(chunk.size());
}

void ListItemSplitter::finish() const {
  if (!seen_root_ || depth_ != 0 || in_string_) {
    throw core::ParseError("list", 1, 1, "the list answer ended early (truncated body)");
  }
}

}  // namespace gpufleet::kube
