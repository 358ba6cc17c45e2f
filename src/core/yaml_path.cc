#include "core/yaml_path.h"

#include <yaml.h>

#include <charconv>
#include <optional>
#include <string>
#include <vector>

namespace gpufleet::core {
namespace {

struct Segment {
  std::string key;                   // a map key, or
  std::optional<std::size_t> index;  // a list index
};

std::optional<std::vector<Segment>> split_path(std::string_view path) {
  std::vector<Segment> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      if (close == std::string_view::npos) return std::nullopt;
      std::size_t n = 0;
      const char* first = path.data() + i + 1;
      const char* last = path.data() + close;
      auto [end, ec] = std::from_chars(first, last, n);
      if (ec != std::errc() || end != last) return std::nullopt;  // "[name]": not an index
      out.push_back({{}, n});
      i = close + 1;
      if (i < path.size() && path[i] == '.') ++i;
      continue;
    }
    const std::size_t stop = path.find_first_of(".[", i);
    const std::size_t end = stop == std::string_view::npos ? path.size() : stop;
    out.push_back({std::string(path.substr(i, end - i)), std::nullopt});
    i = end;
    if (i < path.size() && path[i] == '.') ++i;
  }
  return out;
}

// libyaml's event parser, one event at a time, released on every path out.
class Events {
 public:
  explicit Events(std::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~Events() {
    if (has_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  // False on a parse error or at the end of the stream.
  bool next() {
    if (has_) yaml_event_delete(&event_);
    has_ = yaml_parser_parse(&parser_, &event_) != 0;
    return has_ && event_.type != YAML_STREAM_END_EVENT;
  }
  [[nodiscard]] const yaml_event_t& event() const { return event_; }
  [[nodiscard]] TextPosition position() const {
    return {event_.start_mark.line + 1, event_.start_mark.column + 1};
  }

  // Skips the node whose first event is current; leaves its last event current.
  bool skip_node() {
    int depth = 0;
    do {
      const auto t = event_.type;
      if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT) ++depth;
      if (t == YAML_MAPPING_END_EVENT || t == YAML_SEQUENCE_END_EVENT) --depth;
      if (depth == 0) return true;
    } while (next());
    return false;
  }

 private:
  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool has_ = false;
};

// The current event starts a node; finds segments[at..] below it.
TextPosition find(Events& ev, const std::vector<Segment>& segments, std::size_t at) {
  if (at == segments.size()) return ev.position();
  const Segment& seg = segments[at];
  const bool last = at + 1 == segments.size();
  if (ev.event().type == YAML_MAPPING_START_EVENT && !seg.index) {
    while (ev.next()) {
      if (ev.event().type == YAML_MAPPING_END_EVENT) return {};
      const yaml_event_t& k = ev.event();
      const bool match = k.type == YAML_SCALAR_EVENT &&
                         std::string_view(reinterpret_cast<const char*>(k.data.scalar.value),
                                          k.data.scalar.length) == seg.key;
      const TextPosition key_at = ev.position();
      if (!ev.skip_node() || !ev.next()) return {};  // to the value
      if (match) return last ? key_at : find(ev, segments, at + 1);
      if (!ev.skip_node()) return {};
    }
    return {};
  }
  if (ev.event().type == YAML_SEQUENCE_START_EVENT && seg.index) {
    for (std::size_t i = 0; ev.next(); ++i) {
      if (ev.event().type == YAML_SEQUENCE_END_EVENT) return {};
      if (i == *seg.index) return find(ev, segments, at + 1);
      if (!ev.skip_node()) return {};
    }
  }
  return {};
}

}  // namespace

TextPosition locate_field(std::string_view text, std::string_view path, std::size_t document) {
  auto segments = split_path(path);
  if (!segments) return {};
  Events ev(text);
  std::size_t seen = 0;
  while (ev.next()) {
    if (ev.event().type != YAML_DOCUMENT_START_EVENT) continue;
    if (seen++ != document) continue;
    if (!ev.next()) return {};
    return find(ev, *segments, 0);
  }
  return {};
}

}  // namespace gpufleet::core
