// "Did you mean": the nearest known flag or subcommand to a mistyped one, for parse errors.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gpufleet::cli {

// The candidate closest to `word` by edit distance (insertions, deletions, substitutions and
// swaps of neighbours), if it is close enough to be a typo: at most 2 edits and fewer than
// half the word's length. Empty when none is.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// For the arguments the parser did not expect in the deepest subcommand that was parsed
// under `root`: lines "unknown flag --nodez; did you mean --nodes?" (or a subcommand's
// name), one per argument that has a near candidate. Empty when none has.
std::string did_you_mean(const CLI::App& root);

}  // namespace gpufleet::cli
