// Helpers for recipe tests: small in-memory libraries and the repository's real library.
#pragma once

#include <string>
#include <vector>

#include "recipe/library.h"

namespace gpufleet::recipe::testing {

// The repository's data/recipes, read from disk (the same files the binary embeds).
std::vector<LibraryFile> repo_library_files();
const Library& repo_library();

// A minimal valid criteria.yaml and registry.yaml plus the given overlays/mixins.
std::vector<LibraryFile> small_library(std::vector<LibraryFile> extra);
LibraryFile file(std::string path, std::string content);

}  // namespace gpufleet::recipe::testing
