#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <mutex>

#include "core/base64.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/utf8.h"

namespace gpufleet::core::log {
namespace {

struct State {
  std::atomic<Level> level{Level::Info};
  std::atomic<Format> format{Format::Logfmt};
  std::atomic<bool> timestamps{true};
  std::mutex mu;  // guards sink and serializes output lines
  Sink sink;
};

// Never destroyed, so that logging from static destructors at exit stays safe.
State& state() {
  static State* s = new State;
  return *s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

void append_double(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "NaN";
  } else if (std::isinf(d)) {
    out += d > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    out.append(buf, static_cast<std::size_t>(r.ptr - buf));
  }
}

// A JSON string of `s` with invalid UTF-8 repaired.
void append_json_text(std::string& out, std::string_view s) {
  if (is_valid_utf8(s)) {
    append_json_string(out, s);
  } else {
    std::string repaired;
    append_valid_utf8(repaired, s);
    append_json_string(out, repaired);
  }
}

// JSON for a Value that never throws on content: bad UTF-8 repaired, non-finite doubles
// written as strings, very deep nesting cut off.
void append_value_json(std::string& out, const Value& v, int depth) {
  if (depth > 64) {
    out += "\"...\"";
    return;
  }
  switch (v.kind()) {
    case Kind::Null: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.as_int()); return;
    case Kind::Uint: out += std::to_string(v.as_uint()); return;
    case Kind::Double: {
      const double d = v.as_double();
      if (std::isfinite(d)) {
        append_double(out, d);
      } else {
        out += '"';
        append_double(out, d);
        out += '"';
      }
      return;
    }
    case Kind::String: append_json_text(out, v.as_string()); return;
    case Kind::Bytes: append_json_string(out, base64_encode(v.as_bytes().data)); return;
    case Kind::List: {
      out += '[';
      bool first = true;
      for (const Value& e : v.as_list()) {
        if (!first) out += ',';
        first = false;
        append_value_json(out, e, depth + 1);
      }
      out += ']';
      return;
    }
    case Kind::Map: {
      out += '{';
      bool first = true;
      for (const MapEntry& e : v.as_map()) {
        if (!first) out += ',';
        first = false;
        append_json_text(out, e.key);
        out += ':';
        append_value_json(out, e.value, depth + 1);
      }
      out += '}';
      return;
    }
  }
}

// How a field value is written: as text (quoted in JSON, quoted in logfmt when needed) or
// as a bare token (numbers, booleans, null, JSON structures in JSON mode).
struct Rendered {
  std::string text;
  bool bare = false;
};

Rendered render(const FieldValue& fv, Format format) {
  Rendered r;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string_view>) {
          r.text = std::string(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          r.text = x ? "true" : "false";
          r.bare = true;
        } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>) {
          r.text = std::to_string(x);
          r.bare = true;
        } else if constexpr (std::is_same_v<T, double>) {
          append_double(r.text, x);
          r.bare = std::isfinite(x);
        } else if constexpr (std::is_same_v<T, std::chrono::nanoseconds>) {
          r.text = format_duration(x);
        } else if constexpr (std::is_same_v<T, Timestamp>) {
          r.text = x.to_rfc3339();
        } else {  // const Value*
          const Value& v = *x;
          if (const std::string* s = v.if_string()) {
            r.text = *s;
          } else if (v.is_double()) {
            append_double(r.text, v.as_double());
            r.bare = std::isfinite(v.as_double());
          } else if (v.is_bytes()) {
            r.text = base64_encode(v.as_bytes().data);
          } else if ((v.is_list() || v.is_map()) && format == Format::Logfmt) {
            append_value_json(r.text, v, 0);  // a JSON structure, quoted as logfmt text
          } else {
            append_value_json(r.text, v, 0);
            r.bare = true;
          }
        }
      },
      fv.storage());
  return r;
}

bool logfmt_needs_quotes(std::string_view s) {
  if (s.empty()) return true;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= ' ' || c == '=' || c == '"' || c == 0x7f) return true;
  }
  return !is_valid_utf8(s);
}

void append_logfmt_value(std::string& out, std::string_view s, bool bare) {
  if (bare || !logfmt_needs_quotes(s)) {
    out += s;
    return;
  }
  std::string valid;
  append_valid_utf8(valid, s);
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : valid) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// logfmt keys are bare words: anything that would break the line becomes '_'.
void append_logfmt_key(std::string& out, std::string_view key) {
  if (key.empty()) {
    out += '_';
    return;
  }
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    out += (c <= ' ' || c == '=' || c == '"' || c >= 0x7f) ? '_' : ch;
  }
}

void emit(std::string_view line) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sink) {
    try {
      s.sink(line);
    } catch (...) {
      // A failing sink must not take the caller down; the line is lost.
    }
    return;
  }
  // One write(2) per line (retried on partial writes) keeps lines whole across processes.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

Level parse_level(std::string_view name) {
  const std::string n = lower(name);
  if (n == "debug") return Level::Debug;
  if (n == "info") return Level::Info;
  if (n == "warn" || n == "warning") return Level::Warn;
  if (n == "error") return Level::Error;
  if (n == "off") return Level::Off;
  throw InvalidInput("invalid log level \"" + std::string(name) +
                     "\": expected debug, info, warn, error or off");
}

std::string_view level_name(Level level) noexcept {
  switch (level) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warn";
    case Level::Error: return "error";
    case Level::Off: return "off";
  }
  return "unknown";
}

Format parse_format(std::string_view name) {
  const std::string n = lower(name);
  if (n == "logfmt" || n == "text") return Format::Logfmt;
  if (n == "json") return Format::Json;
  throw InvalidInput("invalid log format \"" + std::string(name) + "\": expected logfmt or json");
}

void set_level(Level level) noexcept { state().level.store(level, std::memory_order_relaxed); }
Level level() noexcept { return state().level.load(std::memory_order_relaxed); }
bool enabled(Level l) noexcept {
  const Level current = level();
  return l != Level::Off && current != Level::Off && l >= current;
}
void set_format(Format f) noexcept { state().format.store(f, std::memory_order_relaxed); }
Format format() noexcept { return state().format.load(std::memory_order_relaxed); }
void set_timestamps(bool on) noexcept { state().timestamps.store(on, std::memory_order_relaxed); }

void set_sink(Sink sink) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sink = std::move(sink);
}

std::string format_line(Level level, std::string_view msg, std::span<const Field> fields,
                        Format format, std::optional<Timestamp> time) {
  std::string out;
  out.reserve(64 + msg.size() + fields.size() * 24);
  if (format == Format::Json) {
    out += '{';
    if (time) {
      out += "\"time\":\"";
      out += time->to_rfc3339(TimestampPrecision::Micros);
      out += "\",";
    }
    out += "\"level\":\"";
    out += level_name(level);
    out += "\",\"msg\":";
    append_json_text(out, msg);
    for (const Field& f : fields) {
      out += ',';
      append_json_text(out, f.key);
      out += ':';
      const Rendered r = render(f.value, format);
      if (r.bare) {
        out += r.text;
      } else {
        append_json_text(out, r.text);
      }
    }
    out += "}\n";
    return out;
  }
  if (time) {
    out += "time=";
    out += time->to_rfc3339(TimestampPrecision::Micros);
    out += ' ';
  }
  out += "level=";
  out += level_name(level);
  out += " msg=";
  append_logfmt_value(out, msg, false);
  for (const Field& f : fields) {
    out += ' ';
    append_logfmt_key(out, f.key);
    out += '=';
    const Rendered r = render(f.value, format);
    append_logfmt_value(out, r.text, r.bare);
  }
  out += '\n';
  return out;
}

void write(Level level, std::string_view msg, std::span<const Field> fields) {
  if (!enabled(level)) return;
  try {
    const State& s = state();
    std::optional<Timestamp> time;
    if (s.timestamps.load(std::memory_order_relaxed)) time = Timestamp::now();
    emit(format_line(level, msg, fields, s.format.load(std::memory_order_relaxed), time));
  } catch (...) {
    // Out of memory while formatting: dropping one log line beats crashing.
  }
}

void Logger::add(Fields fields) {
  for (const Field& f : fields) {
    Value v = std::visit(
        [](const auto& x) -> Value {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::chrono::nanoseconds>) {
            return Value(format_duration(x));
          } else if constexpr (std::is_same_v<T, Timestamp>) {
            return Value(x.to_rfc3339());
          } else if constexpr (std::is_same_v<T, const Value*>) {
            return *x;
          } else {
            return Value(x);
          }
        },
        f.value.storage());
    fields_.push_back({std::string(f.key), std::move(v)});
  }
}

void Logger::write(Level level, std::string_view msg, Fields fields) const {
  if (!enabled(level)) return;
  try {
    std::vector<Field> all;
    all.reserve(fields_.size() + fields.size());
    for (const Owned& o : fields_) all.push_back({o.key, FieldValue(o.value)});
    all.insert(all.end(), fields.begin(), fields.end());
    log::write(level, msg, std::span<const Field>(all));
  } catch (...) {
    // See log::write.
  }
}

}  // namespace gpufleet::core::log
