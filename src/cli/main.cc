#include <CLI/CLI.hpp>

#include <iostream>
#include <vector>

#include "cli/command.h"
#include "cli/suggest.h"
#include "core/errors.h"
#include "kube/errors.h"

namespace gpufleet::cli {

namespace {
std::vector<CommandSetup>& registry() {
  static std::vector<CommandSetup> setups;
  return setups;
}
int g_exit_code = kExitOk;
}  // namespace

CommandRegistration::CommandRegistration(CommandSetup setup) { registry().push_back(setup); }

void set_exit_code(int code) { g_exit_code = code; }

int run(int argc, char** argv) {
  CLI::App app{"gpufleet: configure, certify and operate GPU Kubernetes clusters", "gpufleet"};
  app.require_subcommand(1);
  app.set_version_flag("--version", GPUFLEET_VERSION);
  for (CommandSetup setup : registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A typo of a flag or subcommand: name the nearest one before CLI11's own message.
    if (e.get_exit_code() != 0) std::cerr << did_you_mean(app);
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  } catch (const core::InvalidInput& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const core::NotFound& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitNotFound;
  } catch (const kube::ApiError& e) {
    // Every command's NotFound ends the same way, whichever call found it missing.
    std::cerr << "error: " << e.what() << "\n";
    return e.is(kube::Reason::NotFound) ? kExitNotFound : kExitError;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitError;
  }
  return g_exit_code;
}

}  // namespace gpufleet::cli

int main(int argc, char** argv) { return gpufleet::cli::run(argc, argv); }
