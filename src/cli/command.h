// How a subcommand plugs into the single `gpufleet` binary: each command file defines a
// static CommandRegistration whose setup function adds a CLI11 subcommand to the root.
#pragma once

namespace CLI {
class App;
}

namespace gpufleet::cli {

// Exit codes shared by every command (documented in the README).
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,     // the command failed (cluster unreachable, I/O error, ...)
  kExitBadInput = 2,  // bad flags or bad input documents; nothing was changed
  kExitDrift = 3,     // `diff --fail-on-drift` found drift
  kExitInvalid = 4,   // `validate` found failed constraints or health checks
  kExitNotFound = 5,  // the object the command names does not exist
};

using CommandSetup = void (*)(CLI::App& root);

struct CommandRegistration {
  explicit CommandRegistration(CommandSetup setup);
};

// The exit code a command's callback wants the process to end with (defaults to kExitOk).
void set_exit_code(int code);

}  // namespace gpufleet::cli
