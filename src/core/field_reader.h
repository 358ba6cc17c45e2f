// Strict reading of the documents gpufleet reads (recipes, snapshots, library files, fleets,
// scenarios, custom resources): every error names the field path, the offending value and
// the fix; unknown keys are rejected, with "did you mean" for near misses, so that a typo never
// silently falls back to a default. Inside a DocumentScope, errors also carry the line:column
// of the field in the source text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::core {

// While alive, errors from this thread that name a field of document `source` locate it in
// `text` (document number `document` of a multi-document stream) and print
// "<source>:<line>:<column>: <field>: ...". Scopes nest (a scenario that reads a fleet file);
// `source` and `text` must outlive the scope. The position is looked up only on error.
class DocumentScope {
 public:
  DocumentScope(std::string_view source, std::string_view text, std::size_t document = 0);
  ~DocumentScope();
  DocumentScope(const DocumentScope&) = delete;
  DocumentScope& operator=(const DocumentScope&) = delete;
};

// "<source>:<line>:<column>" when a DocumentScope for `source` finds `field`, else `source`.
std::string located(std::string_view source, std::string_view field);

// A short rendering of a value for error messages ("-3", "\"h1000\"", "a map").
std::string describe_value(const Value& v);

// Throws InvalidInput "<source>: <field>: <problem> (<fix>)".
[[noreturn]] void fail_field(std::string_view source, std::string_view field,
                             std::string_view problem, std::string_view fix);

// Throws for the first key of `m` outside `allowed`: "<source>:<line>:<column>: <path.key>: is
// not a known field (did you mean "<near miss>"? fields here: ...)". `path` is the field path
// of `m` ("" for the document).
void check_keys(const Map& m, std::initializer_list<std::string_view> allowed,
                std::string_view source, std::string_view path);

// Seconds from a YAML value: a number, or a Go duration string ("90s", "1m30s").
// Throws InvalidInput naming `field`.
double seconds_from(const Value& v, std::string_view source, std::string_view field);

class FieldReader {
 public:
  // `v` must be a map (null reads as an empty map); `path` is its field path ("spec").
  FieldReader(const Value& v, std::string source, std::string path);

  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // The path of a member: "spec.pools[0]" + "gpu" -> "spec.pools[0].gpu".
  [[nodiscard]] std::string field(std::string_view key) const;

  // Raw member (nullptr when absent); marks the key as known.
  const Value* get(std::string_view key);
  [[nodiscard]] bool has(std::string_view key) const;

  std::string required_string(std::string_view key, std::string_view fix);
  std::string string(std::string_view key, std::string_view fallback);
  std::int64_t integer(std::string_view key, std::optional<std::int64_t> fallback, std::int64_t min,
                       std::int64_t max, std::string_view fix);
  double number(std::string_view key, std::optional<double> fallback, double min, double max,
                std::string_view fix);
  bool boolean(std::string_view key, bool fallback);
  // A string that must be one of `allowed`.
  std::string one_of(std::string_view key, std::optional<std::string_view> fallback,
                     std::initializer_list<std::string_view> allowed);
  // A map of string to string (labels, annotations, sysctls).
  Map string_map(std::string_view key);

  // Throws on the first key never read, naming the keys this map accepts.
  void done() const;

  [[noreturn]] void fail(std::string_view key, const Value& value, std::string_view problem,
                         std::string_view fix) const;

 private:
  // "is required", or the unknown key that misspells it.
  [[noreturn]] void fail_required(std::string_view key, std::string_view fix) const;

  const Map* map_ = nullptr;
  std::string source_;
  std::string path_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace gpufleet::core
