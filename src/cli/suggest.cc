#include "cli/suggest.h"

#include <CLI/CLI.hpp>

#include <algorithm>

namespace gpufleet::cli {

namespace {

// Optimal string alignment distance (Damerau–Levenshtein without repeated edits of one part).
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The subcommand the user reached: the last parsed one at each level.
const CLI::App* deepest(const CLI::App& app) {
  const CLI::App* at = &app;
  for (;;) {
    std::vector<const CLI::App*> parsed =
        at->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (parsed.empty()) return at;
    at = parsed.back();
  }
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = 3;
  for (const std::string& c : candidates) {
    std::size_t d = distance(word, c);
    if (d < best_d || (d == best_d && !best.empty() && c < best)) {
      best_d = d;
      best = c;
    }
  }
  if (best.empty() || best_d * 2 >= word.size()) return {};
  return best;
}

std::string did_you_mean(const CLI::App& root) {
  const CLI::App* at = deepest(root);
  // CLI11 keeps what no option took on the subcommand that met it.
  std::vector<std::string> extras = at->remaining();
  std::vector<std::string> flags, commands;
  for (const CLI::Option* o : at->get_options()) {
    for (const std::string& l : o->get_lnames()) flags.push_back("--" + l);
  }
  for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(s->get_name());
  std::string out;
  for (const std::string& e : extras) {
    std::string word = e.substr(0, e.find('='));
    bool flag = word.starts_with("--");
    std::string hit = nearest(word, flag ? flags : commands);
    if (!hit.empty())
      out += std::string(flag ? "unknown flag " : "unknown command ") + word + "; did you mean " +
             hit + "?\n";
  }
  return out;
}

}  // namespace gpufleet::cli
