#include "core/subprocess.h"

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

std::string trim_trailing_space(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
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
  const std::string tail = trim_trailing_space(output);
  if (!tail.empty()) s += "; output: " + tail;
  return s;
}

SubprocessResult run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& o) {
  SubprocessResult r;
  if (argv.empty()) {
    r.error = "cannot run an empty command";
    return r;
  }
  const std::string& name = argv[0];
  auto fail = [&](const std::string& what, int err) {
    r.error = "cannot run " + name + ": " + what + std::strerror(err);
    return r;
  };

  // Everything the child needs is prepared before fork(): after it only async-signal-safe
  // calls (the parent may have other threads holding locks).
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (o.env != nullptr) {
    envp.reserve(o.env->size() + 1);
    for (const auto& e : *o.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  char* const* child_env = o.env != nullptr ? envp.data() : environ;

  int out[2] = {-1, -1};
  int in[2] = {-1, -1};
  int report[2] = {-1, -1};
  int devnull = -1;
  int errfile = -1;
  auto close_all = [&] {
    close_fd(out[0]);
    close_fd(out[1]);
    close_fd(in[0]);
    close_fd(in[1]);
    close_fd(report[0]);
    close_fd(report[1]);
    close_fd(devnull);
    close_fd(errfile);
  };
  if (o.capture_stdout && ::pipe2(out, O_CLOEXEC) != 0) return fail("pipe: ", errno);
  if (::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return fail("pipe: ", e);
  }
  const bool feed = o.stdin_data.has_value();
  if (feed && ::pipe2(in, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return fail("pipe: ", e);
  }
  if (!feed) devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (o.stderr_to == StderrTo::File) {
    errfile = ::open(o.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (errfile < 0) {
      const int e = errno;
      close_all();
      return fail("cannot open " + o.stderr_file + " for its stderr: ", e);
    }
  }
  const bool search = o.search_path && name.find('/') == std::string::npos;
  std::optional<SigpipeBlock> sigpipe;
  if (feed) sigpipe.emplace();

  const pid_t pid = ::fork();
  if (pid == 0) {
    if (o.own_process_group) ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);  // an ignored SIGPIPE would be inherited through exec
    if (devnull >= 0) ::dup2(devnull, 0);
    if (in[0] >= 0) ::dup2(in[0], 0);
    if (o.capture_stdout) ::dup2(out[1], 1);
    if (o.stderr_to == StderrTo::Output && o.capture_stdout) ::dup2(out[1], 2);
    if (o.stderr_to == StderrTo::File) ::dup2(errfile, 2);
    ChildFailure f;
    if (!o.chroot_dir.empty() && (::chroot(o.chroot_dir.c_str()) != 0 || ::chdir("/") != 0)) {
      f = {static_cast<int>(ChildStep::Chroot), errno};
    } else {
      if (search)
        ::execvpe(args[0], args.data(), child_env);
      else
        ::execve(args[0], args.data(), child_env);
      f = {static_cast<int>(ChildStep::Exec), errno};
    }
    (void)!::write(report[1], &f, sizeof f);
    ::_exit(127);
  }
  const int fork_errno = errno;
  close_fd(out[1]);
  close_fd(in[0]);
  close_fd(report[1]);
  close_fd(devnull);
  close_fd(errfile);
  if (pid < 0) {
    close_all();
    return fail("fork: ", fork_errno);
  }
  if (o.own_process_group) ::setpgid(pid, pid);  // also here: whichever side runs first

  // EOF on the report pipe means exec succeeded (close-on-exec).
  ChildFailure failure;
  ssize_t n;
  do {
    n = ::read(report[0], &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  close_fd(report[0]);
  int status = 0;
  if (n == static_cast<ssize_t>(sizeof failure)) {
    close_all();
    reap(pid, status, true);
    if (failure.step == static_cast<int>(ChildStep::Chroot))
      return fail("chroot into " + o.chroot_dir + ": ", failure.err);
    return fail("", failure.err);
  }
  r.started = true;

  const pid_t target = o.own_process_group ? -pid : pid;
  bool exited = false;
  auto stop = [&] {
    if (o.kill_grace.count() > 0) {
      ::kill(target, SIGTERM);
      const auto until = Clock::now() + o.kill_grace;
      while (!(exited = reap(pid, status, false)) && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(target, SIGKILL);
    if (!exited) exited = reap(pid, status, true);
  };

  char buf[16384];
  auto append = [&](const char* data, std::size_t size) {
    r.output.append(data, size);
    if (o.keep_tail && r.output.size() > 2 * o.max_output)
      r.output.erase(0, r.output.size() - o.max_output);
  };
  // After the group was killed: what is already in the pipe, without waiting for writers
  // that may live outside the group.
  auto drain_after_stop = [&] {
    for (int i = 0; i < 64 && out[0] >= 0; ++i) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      const ssize_t got = ::read(out[0], buf, sizeof buf);
      if (got <= 0 || (!o.keep_tail && r.output.size() >= o.max_output)) return;
      append(buf, static_cast<std::size_t>(got));
    }
  };

  // The write end is non-blocking: a child that does not read must not stall the loop
  // past its deadline.
  int& in_w = in[1];
  const std::string_view input = feed ? *o.stdin_data : std::string_view{};
  if (in_w >= 0) ::fcntl(in_w, F_SETFL, ::fcntl(in_w, F_GETFL) | O_NONBLOCK);
  if (in_w >= 0 && input.empty()) close_fd(in_w);
  auto feed_some = [&] {
    const std::size_t chunk = std::min<std::size_t>(input.size() - r.stdin_written, 1u << 16);
    const ssize_t put = ::write(in_w, input.data() + r.stdin_written, chunk);
    if (put > 0) {
      r.stdin_written += static_cast<std::size_t>(put);
      if (r.stdin_written == input.size()) close_fd(in_w);  // EOF: the request is complete
    } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
      close_fd(in_w);  // EPIPE: the child closed its stdin or exited
    }
  };

  const auto deadline = Clock::now() + o.timeout;
  bool eof = !o.capture_stdout;
  for (;;) {
    if (!exited) exited = reap(pid, status, false);
    if (exited) close_fd(in_w);  // nobody left to read it
    if (exited && eof) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      if (!exited) {
        stop();
        r.timed_out = true;
        drain_after_stop();  // what it said while it was asked to stop
      }
      break;
    }
    if (eof && in_w < 0) {  // nothing to read or write: wait for the exit
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long long>(left, 5)));
      continue;
    }
    pollfd p[2];
    nfds_t np = 0;
    int out_at = -1, in_at = -1;
    if (!eof) {
      out_at = static_cast<int>(np);
      p[np++] = {out[0], POLLIN, 0};
    }
    if (in_w >= 0) {
      in_at = static_cast<int>(np);
      p[np++] = {in_w, POLLOUT, 0};
    }
    const int wait_ms = static_cast<int>(std::min<long long>(left, exited ? 50 : 200));
    const int rc = ::poll(p, np, wait_ms);
    if (rc < 0 && errno != EINTR) {
      eof = true;
      close_fd(in_w);
    } else if (rc > 0) {
      if (in_at >= 0 && p[in_at].revents != 0) feed_some();  // POLLERR: the reader is gone
      if (out_at >= 0 && p[out_at].revents != 0) {
        n = ::read(out[0], buf, sizeof buf);
        if (n > 0) {
          append(buf, static_cast<std::size_t>(n));
          if (!o.keep_tail && r.output.size() > o.max_output) {
            r.output.resize(o.max_output);
            if (!exited) stop();
            r.output_overflow = true;
            break;
          }
        } else if (n == 0 || errno != EINTR) {
          eof = true;
        }
      }
    } else if (rc == 0 && exited) {
      // The command exited and nothing more is coming right now: a process it left behind
      // may hold the pipe; do not wait for it.
      break;
    }
  }
  close_all();
  if (o.keep_tail && r.output.size() > o.max_output)
    r.output.erase(0, r.output.size() - o.max_output);
  if (o.own_process_group && o.kill_group_on_exit) ::kill(-pid, SIGKILL);
  if (exited && !r.timed_out && !r.output_overflow) {
    if (WIFEXITED(status))
      r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace gpufleet::core
