#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"

namespace gpufleet::cli {
namespace {

void setup_version(CLI::App& root) {
  auto* cmd = root.add_subcommand("version", "Print the gpufleet version");
  cmd->callback([] { std::cout << "gpufleet " << GPUFLEET_VERSION << "\n"; });
}

const CommandRegistration kVersion(setup_version);

}  // namespace
}  // namespace gpufleet::cli
