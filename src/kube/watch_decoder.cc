#include "kube/watch_decoder.h"

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

}  // namespace gpufleet::kube
