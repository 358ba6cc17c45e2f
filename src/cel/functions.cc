#include "cel/functions.h"

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace gpufleet::cel {
namespace {

// Splits "(a, list(b))->c" into its parts, respecting nested parentheses.
Overload parse_signature(std::string_view sig) {
  Overload o;
  std::size_t at = 0;
  bool both = false;
  if (sig[0] == '.') {
    o.receiver = true;
    at = 1;
  } else if (sig[0] == '*') {
    both = true;
    at = 1;
  }
  (void)both;
  std::size_t arrow = sig.rfind("->");
  std::string_view params = sig.substr(at + 1, arrow - at - 2);  // inside the parentheses
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= params.size(); ++i) {
    if (i == params.size() || (params[i] == ',' && depth == 0)) {
      std::string_view part = params.substr(start, i - start);
      while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
      if (!part.empty()) o.params.push_back(parse_type(part));
      start = i + 1;
    } else if (params[i] == '(') {
      ++depth;
    } else if (params[i] == ')') {
      --depth;
    }
  }
  o.result = parse_type(sig.substr(arrow + 2));
  return o;
}

std::vector<FunctionDecl> build_table() {
  std::vector<FunctionDecl> all;
  register_core_functions(all);
  register_time_functions(all);
  register_string_functions(all);
  register_list_functions(all);
  register_regex_functions(all);
  register_kubernetes_functions(all);
  for (auto& f : all) {
    for (std::string_view sig : f.signatures) {
      Overload o = parse_signature(sig);
      if (sig[0] == '*') {
        Overload r = o;
        r.receiver = true;
        f.overloads.push_back(std::move(r));
      }
      f.overloads.push_back(std::move(o));
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return all;
}

}  // namespace

const FunctionDecl* find_function(std::string_view name) {
  static const std::vector<FunctionDecl> table = build_table();
  auto it = std::lower_bound(table.begin(), table.end(), name,
                             [](const FunctionDecl& f, std::string_view n) { return f.name < n; });
  if (it == table.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace gpufleet::cel
