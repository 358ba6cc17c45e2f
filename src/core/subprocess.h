// Running another program: argv only (no shell), a deadline after which it (and, by default,
// its whole process group) is stopped, stdout captured up to a bound. The one place gpufleet
// execs: the agent's remediation commands, hostpkg's package steps and the recipe engine's
// external tools (helm, kubectl kustomize, ssh-keygen) all run through it. (`gpufleet sim
// --detach` forks without exec to daemonize; that is not running a program.)
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::core {

// Where the child's stderr goes.
enum class StderrTo {
  Output,   // into the captured output, interleaved with stdout
  File,     // into SubprocessOptions::stderr_file (created or truncated)
  Inherit,  // this process's stderr
};

struct SubprocessOptions {
  std::chrono::milliseconds timeout{60'000};
  // At the deadline: SIGTERM, then SIGKILL after this grace; zero sends SIGKILL at once.
  std::chrono::milliseconds kill_grace{0};
  // Captured output beyond this: keep the last max_output bytes (keep_tail), or stop the
  // child and report output_overflow.
  std::size_t max_output = 64u << 10;
  bool keep_tail = true;
  bool capture_stdout = true;  // false: stdout inherited
  StderrTo stderr_to = StderrTo::Output;
  std::string stderr_file;
  // The child's environment; nullptr: this process's.
  const std::vector<std::string>* env = nullptr;
  std::string chroot_dir;   // chroot (and chdir /) before exec when set
  bool search_path = true;  // argv[0] without a '/' is looked up in PATH
  // A group of its own, so that the timeout takes the command's children too. Off for a tool
  // that may ask at the terminal (a background group cannot read it).
  bool own_process_group = true;
  // After the command exits, kill what it left running in its group.
  bool kill_group_on_exit = false;
  // Bytes fed to the child's stdin, which is then closed (the credential-helper protocol
  // reads its request there); unset: stdin is /dev/null. Written as the child reads, so input
  // larger than a pipe buffer neither blocks the output nor outlives the deadline; a child
  // that exits (or closes stdin) without reading it all is not an error.
  std::optional<std::string_view> stdin_data;
};

struct SubprocessResult {
  bool started = false;           // false: it could not be started (see `error`)
  bool timed_out = false;         // stopped at the deadline
  bool output_overflow = false;   // stopped for writing more than max_output (keep_tail off)
  int exit_code = -1;             // when it exited; -1 otherwise
  int signal = 0;                 // when a signal ended it
  std::size_t stdin_written = 0;  // bytes of stdin_data the child's stdin pipe took
  std::string output;             // the captured output (the tail when keep_tail)
  std::string error;              // why it did not start: "cannot run X: <reason>"
  [[nodiscard]] bool ok() const {
    return started && !timed_out && !output_overflow && exit_code == 0;
  }
  // "exit status 1; output: <tail>", "timed out (...)", "killed by signal 9", or `error`.
  [[nodiscard]] std::string describe() const;
};

// Runs argv to completion (or the deadline). stdin is stdin_data, else /dev/null. Never throws for
// anything the child does; the result says what happened.
SubprocessResult run_subprocess(const std::vector<std::string>& argv,
                                const SubprocessOptions& options);

}  // namespace gpufleet::core
