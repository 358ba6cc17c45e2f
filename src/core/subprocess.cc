#include "core/subprocess.h"
#include "core/text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

extern char** environ;

namespace gpufleet::core {

namespace {

using Clock = std::chrono::steady_clock;

// What the child reports through its close-on-exec pipe when it fails before exec.
enum class ChildStep : int { Exec = 0, Chroot = 1 };
struct ChildFailure {
  int step = 0;
  int err = 0;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reaps the child; true once it has exited (status filled).
bool reap(pid_t pid, int& status, bool block) {
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, block ? 0 : WNOHANG);
    if (w == pid) return true;
    if (w < 0 && errno == EINTR) continue;
    return false;
  }
}

// Writing to a pipe whose reader is gone raises SIGPIPE, which would end this process: while
// a child is fed, SIGPIPE is blocked in this thread (the signal is sent to the writing
// thread) and one it raised is taken off before the old mask comes back.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (::sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

}  // namespace

std::string SubprocessResult::describe() const {
  if (!started) return error;
  std::string s;
  if (timed_out) {
    s = "timed out (the command and its process group were killed)";
  } else if (output_overflow) {
    s = "wrote more output than allowed (stopped)";
  } else if (signal != 0) {
    s = "killed by signal " + std::to_string(signal);
  } else {
    s = "exit status " + std::to_string(exit_code);
  }
  const std::string_view tail = trim_end(output);
  if (!tail.empty()) s += "; output: " + std::string(tail);
  return s;
}

namespace {

// The pipes and files of one run. The parent closes the child's ends once it has forked, and
// everything on every way out.
struct ChildFds {
  int out[2] = {-1, -1};     // the child's stdout (and stderr when captured)
  int in[2] = {-1, -1};      // stdin_data
  int report[2] = {-1, -1};  // close-on-exec: the child's pre-exec failure, or EOF
  int devnull = -1;          // stdin when nothing is fed
  int errfile = -1;          // StderrTo::File

  ChildFds() = default;
  ChildFds(const ChildFds&) = delete;
  ChildFds& operator=(const ChildFds&) = delete;
  ~ChildFds() { close_all(); }

  void close_child_ends() {
    close_fd(out[1]);
    close_fd(in[0]);
    close_fd(report[1]);
    close_fd(devnull);
    close_fd(errfile);
  }
  void close_all() {
    close_child_ends();
    close_fd(out[0]);
    close_fd(in[1]);
    close_fd(report[0]);
  }
};

// Opens what the options ask for; on failure the reason ("pipe: ", errno) and nothing open.
std::optional<std::pair<std::string, int>> open_fds(ChildFds& fds, const SubprocessOptions& o) {
  // errno is read before the message is built (that may allocate).
  auto failed = [&](int err, std::string what) {
    fds.close_all();
    return std::make_optional(std::make_pair(std::move(what), err));
  };
  auto pipe_failed = [&] {
    const int err = errno;
    return failed(err, "pipe: ");
  };
  if (o.capture_stdout && ::pipe2(fds.out, O_CLOEXEC) != 0) return pipe_failed();
  if (::pipe2(fds.report, O_CLOEXEC) != 0) return pipe_failed();
  if (o.stdin_data.has_value() && ::pipe2(fds.in, O_CLOEXEC) != 0) return pipe_failed();
  if (!o.stdin_data.has_value()) fds.devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (o.stderr_to == StderrTo::File) {
    fds.errfile = ::open(o.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fds.errfile < 0) {
      const int err = errno;
      return failed(err, "cannot open " + o.stderr_file + " for its stderr: ");
    }
  }
  return std::nullopt;
}

// argv and the environment as exec takes them, built before fork(): after it only
// async-signal-safe calls (the parent may have other threads holding locks).
struct ExecArgs {
  std::vector<char*> args;
  std::vector<char*> envp;
  char* const* env = nullptr;
  bool search = false;

  ExecArgs(const std::vector<std::string>& argv, const SubprocessOptions& o) {
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (o.env != nullptr) {
      envp.reserve(o.env->size() + 1);
      for (const auto& e : *o.env) envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
    }
    env = o.env != nullptr ? envp.data() : environ;
    search = o.search_path && argv[0].find('/') == std::string::npos;
  }
};

// The child's side of fork(): wires its stdio, chroots when asked and execs; a failure before
// exec is reported through the report pipe.
[[noreturn]] void exec_child(const ExecArgs& x, const ChildFds& fds, const SubprocessOptions& o) {
  if (o.own_process_group) ::setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // an ignored SIGPIPE would be inherited through exec
  if (fds.devnull >= 0) ::dup2(fds.devnull, 0);
  if (fds.in[0] >= 0) ::dup2(fds.in[0], 0);
  if (o.capture_stdout) ::dup2(fds.out[1], 1);
  if (o.stderr_to == StderrTo::Output && o.capture_stdout) ::dup2(fds.out[1], 2);
  if (o.stderr_to == StderrTo::File) ::dup2(fds.errfile, 2);
  ChildFailure f;
  if (!o.chroot_dir.empty() && (::chroot(o.chroot_dir.c_str()) != 0 || ::chdir("/") != 0)) {
    f = {static_cast<int>(ChildStep::Chroot), errno};
  } else {
    if (x.search)
      ::execvpe(x.args[0], x.args.data(), x.env);
    else
      ::execve(x.args[0], x.args.data(), x.env);
    f = {static_cast<int>(ChildStep::Exec), errno};
  }
  (void)!::write(fds.report[1], &f, sizeof f);
  ::_exit(127);
}

// What the child wrote on the report pipe before exec; nullopt at EOF (exec succeeded, the
// pipe closed on exec).
std::optional<ChildFailure> read_exec_report(ChildFds& fds) {
  ChildFailure failure;
  ssize_t n;
  do {
    n = ::read(fds.report[0], &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  close_fd(fds.report[0]);
  if (n == static_cast<ssize_t>(sizeof failure)) return failure;
  return std::nullopt;
}

// The parent's side once the child runs: feeds its stdin, collects its output, and stops it
// at the deadline or when it writes too much.
class Supervisor {
 public:
  Supervisor(pid_t pid, ChildFds& fds, const SubprocessOptions& o, SubprocessResult& r)
      : pid_(pid),
        target_(o.own_process_group ? -pid : pid),
        fds_(fds),
        o_(o),
        r_(r),
        input_(o.stdin_data.value_or(std::string_view{})) {
    // The write end is non-blocking: a child that does not read must not stall the loop
    // past its deadline.
    int& in_w = fds_.in[1];
    if (in_w >= 0) ::fcntl(in_w, F_SETFL, ::fcntl(in_w, F_GETFL) | O_NONBLOCK);
    if (in_w >= 0 && input_.empty()) close_fd(in_w);
  }

  // Until the child exited and its output ended, or the deadline, or the output bound.
  void run() {
    const auto deadline = Clock::now() + o_.timeout;
    bool eof = !o_.capture_stdout;
    for (;;) {
      if (!exited_) exited_ = reap(pid_, status_, false);
      if (exited_) close_fd(fds_.in[1]);  // nobody left to read it
      if (exited_ && eof) return;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        if (!exited_) {
          stop();
          r_.timed_out = true;
          drain_after_stop();  // what it said while it was asked to stop
        }
        return;
      }
      if (eof && fds_.in[1] < 0) {  // nothing to read or write: wait for the exit
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 5)));
        continue;
      }
      if (!poll_once(left, eof)) return;
    }
  }

  // The exit status into the result, once the child's end is known.
  void finish() {
    if (o_.keep_tail && r_.output.size() > o_.max_output)
      r_.output.erase(0, r_.output.size() - o_.max_output);
    if (o_.own_process_group && o_.kill_group_on_exit) ::kill(-pid_, SIGKILL);
    if (exited_ && !r_.timed_out && !r_.output_overflow) {
      if (WIFEXITED(status_))
        r_.exit_code = WEXITSTATUS(status_);
      else if (WIFSIGNALED(status_))
        r_.signal = WTERMSIG(status_);
    }
  }

 private:
  // One poll over stdout and stdin; false when the run is over.
  bool poll_once(long long left_ms, bool& eof) {
    int& in_w = fds_.in[1];
    pollfd p[2];
    nfds_t np = 0;
    int out_at = -1, in_at = -1;
    if (!eof) {
      out_at = static_cast<int>(np);
      p[np++] = {fds_.out[0], POLLIN, 0};
    }
    if (in_w >= 0) {
      in_at = static_cast<int>(np);
      p[np++] = {in_w, POLLOUT, 0};
    }
    const int wait_ms = static_cast<int>(std::min<long long>(left_ms, exited_ ? 50 : 200));
    const int rc = ::poll(p, np, wait_ms);
    if (rc < 0 && errno != EINTR) {
      eof = true;
      close_fd(in_w);
      return true;
    }
    if (rc > 0) {
      if (in_at >= 0 && p[in_at].revents != 0) feed_some();  // POLLERR: the reader is gone
      if (out_at >= 0 && p[out_at].revents != 0) return read_some(eof);
      return true;
    }
    // rc == 0 after the exit: the command is gone and nothing more is coming right now; a
    // process it left behind may hold the pipe, do not wait for it.
    return !(rc == 0 && exited_);
  }

  bool read_some(bool& eof) {
    const ssize_t n = ::read(fds_.out[0], buf_, sizeof buf_);
    if (n > 0) {
      append(buf_, static_cast<std::size_t>(n));
      if (!o_.keep_tail && r_.output.size() > o_.max_output) {
        r_.output.resize(o_.max_output);
        if (!exited_) stop();
        r_.output_overflow = true;
        return false;
      }
    } else if (n == 0 || errno != EINTR) {
      eof = true;
    }
    return true;
  }

  void feed_some() {
    int& in_w = fds_.in[1];
    const std::size_t chunk = std::min<std::size_t>(input_.size() - r_.stdin_written, 1u << 16);
    const ssize_t put = ::write(in_w, input_.data() + r_.stdin_written, chunk);
    if (put > 0) {
      r_.stdin_written += static_cast<std::size_t>(put);
      if (r_.stdin_written == input_.size()) close_fd(in_w);  // EOF: the request is complete
    } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
      close_fd(in_w);  // EPIPE: the child closed its stdin or exited
    }
  }

  void append(const char* data, std::size_t size) {
    r_.output.append(data, size);
    if (o_.keep_tail && r_.output.size() > 2 * o_.max_output)
      r_.output.erase(0, r_.output.size() - o_.max_output);
  }

  void stop() {
    if (o_.kill_grace.count() > 0) {
      ::kill(target_, SIGTERM);
      const auto until = Clock::now() + o_.kill_grace;
      while (!(exited_ = reap(pid_, status_, false)) && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(target_, SIGKILL);
    if (!exited_) exited_ = reap(pid_, status_, true);
  }

  // After the group was killed: what is already in the pipe, without waiting for writers
  // that may live outside the group.
  void drain_after_stop() {
    for (int i = 0; i < 64 && fds_.out[0] >= 0; ++i) {
      pollfd p{fds_.out[0], POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      const ssize_t got = ::read(fds_.out[0], buf_, sizeof buf_);
      if (got <= 0 || (!o_.keep_tail && r_.output.size() >= o_.max_output)) return;
      append(buf_, static_cast<std::size_t>(got));
    }
  }

  pid_t pid_;
  pid_t target_;  // the process group when it has one
  ChildFds& fds_;
  const SubprocessOptions& o_;
  SubprocessResult& r_;
  std::string_view input_;
  bool exited_ = false;
  int status_ = 0;
  char buf_[16384];
};

}  // namespace

SubprocessResult run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& o) {
  SubprocessResult r;
  if (argv.empty()) {
    r.error = "cannot run an empty command";
    return r;
  }
  auto fail = [&](const std::string& what, int err) {
    r.error = "cannot run " + argv[0] + ": " + what + std::strerror(err);
    return r;
  };

  const ExecArgs exec_args(argv, o);
  ChildFds fds;
  if (auto failed = open_fds(fds, o)) return fail(failed->first, failed->second);
  std::optional<SigpipeBlock> sigpipe;
  if (o.stdin_data.has_value()) sigpipe.emplace();

  const pid_t pid = ::fork();
  if (pid == 0) exec_child(exec_args, fds, o);
  const int fork_errno = errno;
  fds.close_child_ends();
  if (pid < 0) {
    fds.close_all();
    return fail("fork: ", fork_errno);
  }
  if (o.own_process_group) ::setpgid(pid, pid);  // also here: whichever side runs first

  if (auto failure = read_exec_report(fds)) {
    fds.close_all();
    int status = 0;
    reap(pid, status, true);
    if (failure->step == static_cast<int>(ChildStep::Chroot))
      return fail("chroot into " + o.chroot_dir + ": ", failure->err);
    return fail("", failure->err);
  }
  r.started = true;

  Supervisor supervisor(pid, fds, o, r);
  supervisor.run();
  fds.close_all();
  supervisor.finish();
  return r;
}

}  // namespace gpufleet::core
