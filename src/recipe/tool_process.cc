#include "recipe/tool_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/text.h"

extern char** environ;

namespace gpufleet::recipe {

namespace {

std::string tail_of(const std::string& file) {
  std::string text;
  try {
    text = core::read_file(file);
  } catch (const std::exception&) {
    return {};
  }
  std::string_view t = core::trim(text);
  return std::string(t.size() > 2000 ? t.substr(t.size() - 2000) : t);
}

}  // namespace

std::string ToolTempDir::make(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("cannot create a temporary directory: " +
                             std::string(std::strerror(errno)));
  return tmpl;
}

ToolTempDir::ToolTempDir(std::string_view prefix) : path(make(prefix)) {}

ToolTempDir::~ToolTempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string run_tool(const std::vector<std::string>& args, const std::string& err_file,
                     const std::string& what, std::string_view install_hint,
                     const ToolLimits& limits) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(what + ": pipe: " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error(what + ": cannot start '" + args[0] + "': " + std::strerror(rc) +
                             "; " + std::string(install_hint));
  }
  auto stop = [&](const std::string& why) {
    close(fds[0]);
    ::kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw std::runtime_error(what + ": " + why);
  };
  std::string out;
  char buf[65536];
  auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      stop("'" + args[0] + "' ran longer than " + std::to_string(limits.timeout.count()) +
           " s; stopped");
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;  // the deadline check above stops it
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (out.size() + static_cast<std::size_t>(got) > limits.max_output)
      stop("'" + args[0] + "' wrote more than " + std::to_string(limits.max_output >> 20) +
           " MiB; stopped");
    out.append(buf, static_cast<std::size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string err = tail_of(err_file);
    throw core::InvalidInput(what + ": '" + core::join(args, " ") + "' failed (exit status " +
                             std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")" +
                             (err.empty() ? "" : ": " + err));
  }
  return out;
}

}  // namespace gpufleet::recipe
