// Structured logging: one line per event, logfmt or JSON, thread-safe, stderr by default.
//
//   log::info("node quarantined", {{"node", name}, {"xid", 79}, {"after", 1500ms}});
//   -> time=2024-05-01T12:00:00.123456Z level=info msg="node quarantined" node=gpu-7 xid=79
//   after=1.5s
//
// Field values may be text (string, string_view, const char*), integers, bool, double,
// std::chrono durations (written as Go durations) or a core::Value (maps and lists are written
// as JSON). Field values are borrowed for the call only. Invalid UTF-8 is replaced by U+FFFD;
// nothing a caller passes can make logging throw or crash.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/time.h"
#include "core/value.h"

namespace gpufleet::core::log {

enum class Level : std::uint8_t { Debug, Info, Warn, Error, Off };
enum class Format : std::uint8_t { Logfmt, Json };

// "debug", "info", "warn" (or "warning"), "error", "off"; case-insensitive. Throws
// InvalidInput naming the value and the accepted names.
Level parse_level(std::string_view name);
std::string_view level_name(Level level) noexcept;
// "logfmt" or "json"; throws InvalidInput otherwise.
Format parse_format(std::string_view name);

// A borrowed field value.
class FieldValue {
 public:
  FieldValue(std::string_view s) noexcept : v_(s) {}
  FieldValue(const char* s) noexcept : v_(std::string_view(s == nullptr ? "" : s)) {}
  FieldValue(const std::string& s) noexcept : v_(std::string_view(s)) {}
  FieldValue(bool b) noexcept : v_(b) {}
  template <typename T>
  requires(std::is_integral_v<T>&& std::is_signed_v<T> && !std::is_same_v<T, bool> &&
           !std::is_same_v<T, char>) FieldValue(T i)
  noexcept : v_(static_cast<std::int64_t>(i)) {}
  template <typename T>
  requires(std::is_integral_v<T>&& std::is_unsigned_v<T> && !std::is_same_v<T, bool>)
      FieldValue(T u)
  noexcept : v_(static_cast<std::uint64_t>(u)) {}
  FieldValue(double d) noexcept : v_(d) {}
  template <typename Rep, typename Period>
  FieldValue(std::chrono::duration<Rep, Period> d) noexcept
      : v_(std::chrono::duration_cast<std::chrono::nanoseconds>(d)) {}
  FieldValue(const Timestamp& t) noexcept : v_(t) {}
  FieldValue(const Value& v) noexcept : v_(&v) {}

  using Storage = std::variant<std::string_view, bool, std::int64_t, std::uint64_t, double,
                               std::chrono::nanoseconds, Timestamp, const Value*>;
  [[nodiscard]] const Storage& storage() const noexcept { return v_; }

 private:
  Storage v_;
};

struct Field {
  std::string_view key;
  FieldValue value;
};
using Fields = std::initializer_list<Field>;

// Process-wide settings; safe to change while other threads log.
void set_level(Level level) noexcept;
[[nodiscard]] Level level() noexcept;
[[nodiscard]] bool enabled(Level level) noexcept;
void set_format(Format format) noexcept;
[[nodiscard]] Format format() noexcept;
// Whether lines start with time=... (on by default; off makes output reproducible).
void set_timestamps(bool on) noexcept;
// Where finished lines go (each ends with '\n'); an empty function restores stderr. The sink
// is called under a lock, one line at a time; exceptions from it are swallowed.
using Sink = std::function<void(std::string_view line)>;
void set_sink(Sink sink);

void write(Level level, std::string_view msg, std::span<const Field> fields);
inline void write(Level level, std::string_view msg, Fields fields = {}) {
  write(level, msg, std::span<const Field>(fields.begin(), fields.size()));
}
inline void debug(std::string_view msg, Fields fields = {}) { write(Level::Debug, msg, fields); }
inline void info(std::string_view msg, Fields fields = {}) { write(Level::Info, msg, fields); }
inline void warn(std::string_view msg, Fields fields = {}) { write(Level::Warn, msg, fields); }
inline void error(std::string_view msg, Fields fields = {}) { write(Level::Error, msg, fields); }

// One formatted line with its trailing '\n' (what write() sends to the sink).
std::string format_line(Level level, std::string_view msg, std::span<const Field> fields,
                        Format format, std::optional<Timestamp> time);

// A logger that adds fixed fields (component, controller, node...) before each call's own.
class Logger {
 public:
  Logger() = default;
  explicit Logger(Fields fields) { add(fields); }
  // A copy with more fixed fields.
  [[nodiscard]] Logger with(Fields fields) const {
    Logger copy = *this;
    copy.add(fields);
    return copy;
  }

  void write(Level level, std::string_view msg, Fields fields = {}) const;
  void debug(std::string_view msg, Fields fields = {}) const { write(Level::Debug, msg, fields); }
  void info(std::string_view msg, Fields fields = {}) const { write(Level::Info, msg, fields); }
  void warn(std::string_view msg, Fields fields = {}) const { write(Level::Warn, msg, fields); }
  void error(std::string_view msg, Fields fields = {}) const { write(Level::Error, msg, fields); }

 private:
  void add(Fields fields);
  struct Owned {
    std::string key;
    Value value;
  };
  std::vector<Owned> fields_;
};

}  // namespace gpufleet::core::log
