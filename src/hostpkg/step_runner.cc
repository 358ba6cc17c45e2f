#include "hostpkg/step_runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/duration.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/subprocess.h"
#include "core/time.h"

namespace gpufleet::hostpkg {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kTail = 1536;         // bytes of output kept per command
constexpr std::size_t kHistoryMax = 2000;   // lines before the history is compacted
constexpr std::size_t kHistoryKeep = 1000;  // lines kept when it is
constexpr const char* kHostBase = "/var/lib/gpufleet/hostpkg";

struct Exec {
  int exit_code = -1;
  bool timed_out = false;
  std::string tail;
};

// Runs argv with exactly `env`, stdout+stderr captured, chrooted into `root` when it is not
// empty. At the deadline the whole group gets SIGTERM, then SIGKILL 2 s later; what the
// command leaves running in its group goes when it exits.
Exec run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 const std::string& root, Clock::time_point deadline) {
  core::SubprocessOptions o;
  o.timeout =
      std::max(std::chrono::milliseconds(0),
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  o.kill_grace = std::chrono::seconds(2);
  o.max_output = kTail;
  o.env = &env;
  o.chroot_dir = root;
  o.search_path = false;
  o.kill_group_on_exit = true;
  core::SubprocessResult r = core::run_subprocess(argv, o);
  Exec out;
  out.timed_out = r.timed_out;
  if (!r.started) {
    out.exit_code = 127;  // as a shell reports a command it cannot run
    out.tail = "pkg-step: " + r.error + "\n";
  } else {
    out.tail = std::move(r.output);
    if (r.signal != 0)
      out.exit_code = 128 + r.signal;
    else if (!r.timed_out)
      out.exit_code = r.exit_code;
  }
  return out;
}

core::Value history_entry(const std::string& key, std::string_view event, int attempt) {
  core::Value e = core::Value::map();
  e["time"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Seconds);
  e["key"] = key;
  e["event"] = std::string(event);
  e["attempt"] = attempt;
  return e;
}

std::string script_name(Stage s, bool check) {
  return std::string(stage_name(s)) + (check ? "-check.sh" : ".sh");
}

// The result file is written in place, not renamed over: /dev/termination-log is a file the
// kubelet bind-mounts into the container, and rename(2) onto a mount point fails (EBUSY).
void write_result(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  f.flush();
  if (!f) throw std::runtime_error("cannot write the step result to " + path);
}

struct History {
  bool succeeded = false;
  int attempts = 0;
};

History read_history(const std::string& path, const std::string& key) {
  History h;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    try {
      core::Value v = core::parse_json(line);
      if (v.get_string({"key"}) != key) continue;
      std::string_view ev = v.get_string({"event"});
      if (ev == "started") ++h.attempts;
      h.succeeded = ev == "succeeded" || ev == "skipped";
    } catch (const std::exception&) {
      // A torn last line from a crash mid-write: ignore it, the next line is whole.
    }
  }
  return h;
}

void append_history(const std::string& path, const core::Value& entry) {
  if (path.empty()) return;
  fs::create_directories(fs::path(path).parent_path());
  std::string line = core::to_json(entry) + "\n";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open history " + path + ": " + std::strerror(errno));
  ssize_t n = write(fd, line.data(), line.size());
  fsync(fd);
  close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("short write to history " + path);
  // Bounded: compact to the newest lines once it grows past the limit.
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(std::move(l));
  if (lines.size() > kHistoryMax) {
    std::string keep;
    for (std::size_t i = lines.size() - kHistoryKeep; i < lines.size(); ++i)
      keep += lines[i] + "\n";
    core::write_file_atomic(path, keep);
  }
}

std::string interrupt_script(const Interrupt& i) {
  switch (i.kind) {
    case InterruptKind::None: return "exit 0\n";
    case InterruptKind::Reboot: return "exec systemctl reboot\n";
    case InterruptKind::RestartServices: {
      std::string s = "exec systemctl restart";
      for (const std::string& svc : i.services) s += " '" + svc + "'";
      return s + "\n";
    }
    case InterruptKind::RestartAllServices:
      return "systemctl daemon-reload || exit $?\n"
             "for u in $(systemctl list-units --type=service --state=running --plain --no-legend "
             "| cut -d' ' -f1); do systemctl try-restart \"$u\" || exit $?; done\n";
  }
  return "exit 0\n";
}

}  // namespace

std::string_view step_status_name(StepStatus s) noexcept {
  switch (s) {
    case StepStatus::Succeeded: return "succeeded";
    case StepStatus::Skipped: return "skipped";
    case StepStatus::Failed: return "failed";
    case StepStatus::TimedOut: return "timed-out";
    case StepStatus::CheckFailed: return "check-failed";
  }
  return "?";
}

std::string step_key(const StepRequest& req) {
  return req.package + "/" + (req.verify.empty() ? std::string(stage_name(req.stage)) : "verify") +
         "/" + req.version + "/" + req.config_hash + "/" + req.change;
}

core::Value result_to_value(const StepRequest& req, const StepResult& r) {
  core::Value v = core::Value::map();
  v["package"] = req.package;
  v["version"] = req.version;
  v["stage"] = req.verify.empty() ? std::string(stage_name(req.stage)) : "verify";
  v["key"] = step_key(req);
  v["status"] = std::string(step_status_name(r.status));
  v["exitCode"] = r.exit_code;
  v["attempt"] = r.attempt;
  v["seconds"] = r.seconds;
  v["message"] = r.message;
  v["output"] = r.output;
  v["checkOutput"] = r.check_output;
  // Kubernetes keeps at most 4096 bytes of a termination message: shorten the tails.
  for (std::size_t cap = 1024; core::to_json(v).size() > 4000 && cap >= 64; cap /= 2) {
    for (const char* k : {"output", "checkOutput"}) {
      std::string& s = v[k].as_string();
      if (s.size() > cap) s = "..." + s.substr(s.size() - cap);
    }
  }
  return v;
}

namespace {

// The package's scripts this request runs must exist before anything touches the host.
void require_scripts(const StepRequest& req, bool verify, bool interrupt) {
  if (verify) {
    for (Stage st : req.verify) {
      fs::path p = fs::path(req.package_dir) / script_name(st, true);
      if (st == Stage::Interrupt || !fs::is_regular_file(p)) {
        throw core::InvalidInput("pkg-step: the package has no " + p.string() +
                                 "; verification runs the checks of apply, config and "
                                 "post-interrupt, which every package ships");
      }
    }
    return;
  }
  if (interrupt) return;
  for (bool check : {false, true}) {
    fs::path p = fs::path(req.package_dir) / script_name(req.stage, check);
    if (!fs::is_regular_file(p)) {
      throw core::InvalidInput(
          "pkg-step: the package has no " + p.string() +
          "; every stage needs a script and a -check.sh script in the image's package directory");
    }
  }
}

// Copies the package (or the interrupt script) and its configuration into the host, under
// `staged` (the host's view of the package directory).
void stage_on_host(const StepRequest& req, const fs::path& staged, bool verify, bool interrupt) {
  fs::create_directories(staged);
  if (!interrupt) {
    for (const auto& e : fs::directory_iterator(req.package_dir)) {
      if (!e.is_regular_file()) continue;
      fs::copy_file(e.path(), staged / e.path().filename(), fs::copy_options::overwrite_existing);
      fs::permissions(staged / e.path().filename(),
                      fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec);
    }
  } else {
    core::write_file_atomic((staged / "interrupt.sh").string(), interrupt_script(req.interrupt));
  }
  // Verification checks what the config stage left there; it never replaces it.
  if (!verify) fs::remove_all(staged / "config");
  fs::create_directories(staged / "config");
  if (!verify && !req.config_dir.empty() && fs::is_directory(req.config_dir)) {
    for (const auto& e : fs::directory_iterator(req.config_dir)) {
      // ConfigMap volumes hold ..data links; only the plain keys are files to hand over.
      std::string name = e.path().filename().string();
      if (name.rfind("..", 0) == 0 || fs::is_directory(e.path())) continue;
      fs::copy_file(e.path(), staged / "config" / name, fs::copy_options::overwrite_existing);
    }
  }
}

// The scripts' environment: exactly this, nothing inherited from the runner's container.
std::vector<std::string> step_env(const StepRequest& req, const std::string& host_dir,
                                  int attempt) {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "GPUFLEET_PACKAGE=" + req.package,
      "GPUFLEET_VERSION=" + req.version,
      "GPUFLEET_FROM_VERSION=" + req.from_version,
      "GPUFLEET_STAGE=" + std::string(stage_name(req.stage)),
      "GPUFLEET_PACKAGE_DIR=" + host_dir,
      "GPUFLEET_CONFIG_DIR=" + host_dir + "/config",
      "GPUFLEET_ATTEMPT=" + std::to_string(attempt),
  };
  std::string changed;
  for (const std::string& k : req.changed_keys) changed += (changed.empty() ? "" : " ") + k;
  env.push_back("GPUFLEET_CHANGED_KEYS=" + changed);
  for (const auto& [k, v] : req.env) env.push_back(k + "=" + v);
  return env;
}

// One step once its scripts are staged: runs them under one deadline and records the outcome
// (history line, result file) whichever way it ends.
class StepRun {
 public:
  StepRun(const StepRequest& req, std::string key, std::string root, std::string host_dir,
          StepResult& result)
      : req_(req),
        key_(std::move(key)),
        chroot_dir_(req.host_pid > 0 ? "" : std::move(root)),
        host_dir_(std::move(host_dir)),
        result_(result),
        env_(step_env(req, host_dir_, result.attempt)),
        start_(Clock::now()),
        deadline_(start_ + req.timeout) {}

  // Each stage's check with that stage's name in GPUFLEET_STAGE; the first failure wins.
  StepResult verify() {
    std::string what = "verification of " + req_.package + " " + req_.version;
    for (Stage st : req_.verify) {
      std::vector<std::string> venv = env_;
      for (std::string& e : venv) {
        if (e.starts_with("GPUFLEET_STAGE=")) e = "GPUFLEET_STAGE=" + std::string(stage_name(st));
      }
      Exec check = run_command(command(script_name(st, true)), venv, chroot_dir_, deadline_);
      result_.check_output = std::move(check.tail);
      result_.exit_code = check.exit_code;
      std::string name(stage_name(st));
      if (check.timed_out) {
        return finish(StepStatus::TimedOut, "the " + name + " check in the " + what +
                                                " did not finish within " +
                                                core::format_duration(req_.timeout));
      }
      if (check.exit_code != 0) {
        std::string last = result_.check_output;
        while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
        if (auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
        return finish(StepStatus::CheckFailed,
                      "the " + name + " check of " + req_.package + " " + req_.version +
                          " failed with exit code " + std::to_string(check.exit_code) +
                          (last.empty() ? "" : ": " + last.substr(0, 300)));
      }
    }
    result_.exit_code = 0;
    return finish(StepStatus::Succeeded, what + " passed");
  }

  // The reboot takes this process with it: success is recorded first; the controller
  // confirms the reboot by the node's boot ID changing.
  StepResult reboot() {
    result_.exit_code = 0;
    finish(StepStatus::Succeeded, "reboot requested");
    run_command(command("interrupt.sh"), env_, chroot_dir_, deadline_);
    return result_;
  }

  // The stage's script, then (except for an interrupt) its check.
  StepResult stage(bool interrupt) {
    Exec step = run_command(command(interrupt ? "interrupt.sh" : script_name(req_.stage, false)),
                            env_, chroot_dir_, deadline_);
    result_.exit_code = step.exit_code;
    result_.output = std::move(step.tail);
    std::string what =
        std::string(stage_name(req_.stage)) + " of " + req_.package + " " + req_.version;
    if (step.timed_out) {
      return finish(StepStatus::TimedOut, what + " did not finish within " +
                                              core::format_duration(req_.timeout) +
                                              " and was killed");
    }
    if (step.exit_code != 0) {
      return finish(StepStatus::Failed,
                    what + " failed with exit code " + std::to_string(step.exit_code));
    }
    if (!interrupt) {
      Exec check =
          run_command(command(script_name(req_.stage, true)), env_, chroot_dir_, deadline_);
      result_.check_output = std::move(check.tail);
      if (check.timed_out) {
        return finish(StepStatus::TimedOut, "the check of " + what + " did not finish within " +
                                                core::format_duration(req_.timeout));
      }
      if (check.exit_code != 0) {
        result_.exit_code = check.exit_code;
        return finish(StepStatus::CheckFailed, what + " ran but its check failed with exit code " +
                                                   std::to_string(check.exit_code));
      }
    }
    return finish(StepStatus::Succeeded, what + " succeeded");
  }

 private:
  std::vector<std::string> command(const std::string& script) const {
    std::string path = host_dir_ + "/" + script;
    if (req_.host_pid > 0) {
      return {"/usr/bin/nsenter",
              "-t",
              std::to_string(req_.host_pid),
              "-m",
              "-u",
              "-i",
              "-n",
              "-p",
              "--",
              "/bin/sh",
              path};
    }
    return {"/bin/sh", path};
  }

  StepResult finish(StepStatus s, std::string message) {
    result_.status = s;
    result_.message = std::move(message);
    result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    core::Value e = history_entry(
        key_, s == StepStatus::Succeeded ? "succeeded" : step_status_name(s), result_.attempt);
    e["message"] = result_.message;
    append_history(req_.history_path, e);
    if (!req_.result_path.empty())
      write_result(req_.result_path, core::to_json(result_to_value(req_, result_)));
    return result_;
  }

  const StepRequest& req_;
  std::string key_;
  std::string chroot_dir_;  // empty under nsenter
  std::string host_dir_;
  StepResult& result_;
  std::vector<std::string> env_;
  Clock::time_point start_;
  Clock::time_point deadline_;
};

}  // namespace

StepResult run_step(const StepRequest& req) {
  if (req.package.empty() || req.version.empty()) {
    throw core::InvalidInput("pkg-step: --package and --version are required");
  }
  const bool nsenter = req.host_pid > 0;
  const std::string root =
      nsenter ? "/proc/" + std::to_string(req.host_pid) + "/root" : req.host_root;
  if (!fs::is_directory(root)) {
    throw core::InvalidInput(
        "pkg-step: host root \"" + root +
        "\" is not a directory; mount the host's / there (hostPath) or pass --host-pid");
  }
  const std::string key = step_key(req);
  const std::string host_dir = std::string(kHostBase) + "/" + req.package + "/" + req.version;
  const bool verify = !req.verify.empty();
  const bool interrupt = !verify && req.stage == Stage::Interrupt;
  require_scripts(req, verify, interrupt);

  StepResult result;
  History h = req.history_path.empty() ? History{} : read_history(req.history_path, key);
  result.attempt = h.attempts + 1;
  if (h.succeeded && !verify) {
    result.status = StepStatus::Skipped;
    result.exit_code = 0;
    result.attempt = h.attempts;
    result.message = "already completed for " + key + "; nothing to do";
    if (!req.result_path.empty())
      write_result(req.result_path, core::to_json(result_to_value(req, result)));
    return result;
  }
  append_history(req.history_path, history_entry(key, "started", result.attempt));
  stage_on_host(req, fs::path(root) / host_dir.substr(1), verify, interrupt);

  StepRun run(req, key, root, host_dir, result);
  if (verify) return run.verify();
  if (interrupt && req.interrupt.kind == InterruptKind::Reboot) return run.reboot();
  return run.stage(interrupt);
}

}  // namespace gpufleet::hostpkg
