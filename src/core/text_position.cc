#include "core/text_position.h"

namespace gpufleet::core {

TextPosition position_of(std::string_view text, std::size_t offset) noexcept {
  if (offset > text.size()) offset = text.size();
  TextPosition pos{1, 1};
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return pos;
}

std::string caret_excerpt(std::string_view text, TextPosition pos) {
  if (pos.line == 0) return {};
  std::size_t start = 0;
  for (std::size_t line = 1; line < pos.line; ++line) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  std::size_t end = text.find('\n', start);
  std::string_view line = text.substr(start, end == std::string_view::npos ? end : end - start);
  std::string out(line);
  out += '\n';
  std::size_t col = pos.column == 0 ? 1 : pos.column;
  for (std::size_t i = 1; i < col && i <= line.size(); ++i) out += line[i - 1] == '\t' ? '\t' : ' ';
  out += '^';
  return out;
}

}  // namespace gpufleet::core
