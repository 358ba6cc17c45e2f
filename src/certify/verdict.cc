#include "certify/verdict.h"

#include "certify/text_lines.h"

namespace gpufleet::certify {
namespace {

constexpr std::string_view kReasonNames[] = {"HardwareFailure", "ThresholdViolated",
                                             "WorkloadFailed", "MeasurementTimeout",
                                             "Infrastructure"};

std::string quote(std::string_view line) {
  constexpr std::size_t kMax = 200;
  std::string out(line.substr(0, kMax));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = '?';
  }
  if (line.size() > kMax) out += "...";
  return out;
}

}  // namespace

std::string_view reason_name(Reason r) noexcept { return kReasonNames[static_cast<int>(r)]; }

std::optional<Reason> reason_from_name(std::string_view name) noexcept {
  for (int i = 0; i < 5; ++i) {
    if (kReasonNames[i] == name) return static_cast<Reason>(i);
  }
  return std::nullopt;
}

bool retryable(std::string_view reason) noexcept {
  return reason == reason_name(Reason::WorkloadFailed) ||
         reason == reason_name(Reason::MeasurementTimeout) ||
         reason == reason_name(Reason::Infrastructure);
}

bool should_retry(std::string_view reason, int attempt, int retries) noexcept {
  return retryable(reason) && attempt >= 1 && attempt <= retries;
}

OutputError::OutputError(std::string_view format, std::size_t line_number, std::string_view line,
                         const std::string& reason)
    : core::InvalidInput(std::string(format) + " output line " + std::to_string(line_number) +
                         ": " + reason + (line.empty() ? "" : ": \"" + quote(line) + "\"")),
      line_number_(line_number),
      line_(quote(line)) {}

OutputError json_output_error(std::string_view format, std::string_view text,
                              const core::ParseError& e, std::size_t line_offset) {
  std::string_view line, last;
  std::size_t last_number = 0;
  detail::for_each_line(text, [&](std::size_t n, std::string_view l) {
    if (n == e.line()) line = l;
    if (!detail::trim(l).empty()) {
      last = l;
      last_number = n;
    }
  });
  if (e.line() == 0)
    return OutputError(format, last_number + line_offset, last,
                       e.reason() + " (the document ends early)");
  return OutputError(format, e.line() + line_offset, line, e.reason());
}

void check_output_size(std::string_view format, std::string_view text) {
  if (text.size() > kMaxOutputBytes) {
    throw OutputError(format, 0, {},
                      "output of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                          std::to_string(kMaxOutputBytes) +
                          " (write the result file only, not the whole log)");
  }
}

}  // namespace gpufleet::certify
