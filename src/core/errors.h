// Error types shared by every module. Messages name the field, the value and the fix.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace gpufleet::core {

// Input that cannot be accepted: a bad flag, a bad document, a bad field value.
class InvalidInput : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A named object (a policy, a set, a run) that does not exist.
class NotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value of the wrong kind was accessed (for example a string read as a map).
class TypeError : public InvalidInput {
 public:
  using InvalidInput::InvalidInput;
};

// A document that does not parse. `line` and `column` are 1-based; 0 when unknown.
class ParseError : public InvalidInput {
 public:
  ParseError(std::string source, std::size_t line, std::size_t column, const std::string& what);
  const std::string& source() const noexcept { return source_; }
  std::size_t line() const noexcept { return line_; }
  std::size_t column() const noexcept { return column_; }
  // The message without the "source:line:column: " prefix.
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string source_;
  std::size_t line_;
  std::size_t column_;
  std::string reason_;
};

}  // namespace gpufleet::core
