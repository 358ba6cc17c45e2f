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

#include "core/duration.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/subprocess.h"

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

std::string now_rfc3339() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  core::Timestamp t;
  t.seconds = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  return t.to_rfc3339(core::TimestampPrecision::Seconds);
}

std::string script_name(Stage s, bool check) {
  return std::string(stage_name(s)) + (check ? "-check.sh" : ".sh");
}

void write_file_atomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << data;
    f.flush();
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, path);
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
    write_file_atomic(path, keep);
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
  if (verify) {
    for (Stage st : req.verify) {
      fs::path p = fs::path(req.package_dir) / script_name(st, true);
      if (st == Stage::Interrupt || !fs::is_regular_file(p)) {
        throw core::InvalidInput("pkg-step: the package has no " + p.string() +
                                 "; verification runs the checks of apply, config and "
                                 "post-interrupt, which every package ships");
      }
    }
  } else if (!interrupt) {
    for (bool check : {false, true}) {
      fs::path p = fs::path(req.package_dir) / script_name(req.stage, check);
      if (!fs::is_regular_file(p)) {
        throw core::InvalidInput(
            "pkg-step: the package has no " + p.string() +
            "; every stage needs a script and a -check.sh script in the image's package directory");
      }
    }
  }

  StepResult result;
  History h = req.history_path.empty() ? History{} : read_history(req.history_path, key);
  result.attempt = h.attempts + 1;
  auto entry = [&](std::string_view event) {
    core::Value e = core::Value::map();
    e["time"] = now_rfc3339();
    e["key"] = key;
    e["event"] = std::string(event);
    e["attempt"] = result.attempt;
    return e;
  };
  if (h.succeeded && !verify) {
    result.status = StepStatus::Skipped;
    result.exit_code = 0;
    result.attempt = h.attempts;
    result.message = "already completed for " + key + "; nothing to do";
    if (!req.result_path.empty())
      write_file_atomic(req.result_path, core::to_json(result_to_value(req, result)));
    return result;
  }
  append_history(req.history_path, entry("started"));

  // Stage the package and its configuration inside the host.
  fs::path staged = fs::path(root) / host_dir.substr(1);
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
    write_file_atomic((staged / "interrupt.sh").string(), interrupt_script(req.interrupt));
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

  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "GPUFLEET_PACKAGE=" + req.package,
      "GPUFLEET_VERSION=" + req.version,
      "GPUFLEET_FROM_VERSION=" + req.from_version,
      "GPUFLEET_STAGE=" + std::string(stage_name(req.stage)),
      "GPUFLEET_PACKAGE_DIR=" + host_dir,
      "GPUFLEET_CONFIG_DIR=" + host_dir + "/config",
      "GPUFLEET_ATTEMPT=" + std::to_string(result.attempt),
  };
  std::string changed;
  for (const std::string& k : req.changed_keys) changed += (changed.empty() ? "" : " ") + k;
  env.push_back("GPUFLEET_CHANGED_KEYS=" + changed);
  for (const auto& [k, v] : req.env) env.push_back(k + "=" + v);

  auto command = [&](const std::string& script) {
    std::string path = host_dir + "/" + script;
    if (nsenter) {
      return std::vector<std::string>{"/usr/bin/nsenter",
                                      "-t",
                                      std::to_string(req.host_pid),
                                      "-m",
                                      "-u",
                                      "-i",
                                      "-n",
                                      "-p",
                                      "--",
                                      "/bin/sh",
                                      path};
    }
    return std::vector<std::string>{"/bin/sh", path};
  };
  const std::string chroot_dir = nsenter ? "" : root;
  auto start = Clock::now();
  auto deadline = start + req.timeout;
  auto finish = [&](StepStatus s, std::string message) {
    result.status = s;
    result.message = std::move(message);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    core::Value e = entry(s == StepStatus::Succeeded ? "succeeded" : step_status_name(s));
    e["message"] = result.message;
    append_history(req.history_path, e);
    if (!req.result_path.empty())
      write_file_atomic(req.result_path, core::to_json(result_to_value(req, result)));
    return result;
  };

  if (verify) {
    // Each stage's check with that stage's name in GPUFLEET_STAGE; the first failure wins.
    std::string what = "verification of " + req.package + " " + req.version;
    for (Stage st : req.verify) {
      std::vector<std::string> venv = env;
      for (std::string& e : venv) {
        if (e.starts_with("GPUFLEET_STAGE=")) e = "GPUFLEET_STAGE=" + std::string(stage_name(st));
      }
      Exec check = run_command(command(script_name(st, true)), venv, chroot_dir, deadline);
      result.check_output = std::move(check.tail);
      result.exit_code = check.exit_code;
      std::string name(stage_name(st));
      if (check.timed_out) {
        return finish(StepStatus::TimedOut, "the " + name + " check in the " + what +
                                                " did not finish within " +
                                                core::format_duration(req.timeout));
      }
      if (check.exit_code != 0) {
        std::string last = result.check_output;
        while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
        if (auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
        return finish(StepStatus::CheckFailed,
                      "the " + name + " check of " + req.package + " " + req.version +
                          " failed with exit code " + std::to_string(check.exit_code) +
                          (last.empty() ? "" : ": " + last.substr(0, 300)));
      }
    }
    result.exit_code = 0;
    return finish(StepStatus::Succeeded, what + " passed");
  }
  if (interrupt && req.interrupt.kind == InterruptKind::Reboot) {
    // The reboot takes this process with it: record success first; the controller confirms
    // the reboot by the node's boot ID changing.
    result.exit_code = 0;
    finish(StepStatus::Succeeded, "reboot requested");
    run_command(command("interrupt.sh"), env, chroot_dir, deadline);
    return result;
  }
  Exec step = run_command(command(interrupt ? "interrupt.sh" : script_name(req.stage, false)), env,
                          chroot_dir, deadline);
  result.exit_code = step.exit_code;
  result.output = std::move(step.tail);
  std::string what = std::string(stage_name(req.stage)) + " of " + req.package + " " + req.version;
  if (step.timed_out) {
    return finish(StepStatus::TimedOut, what + " did not finish within " +
                                            core::format_duration(req.timeout) + " and was killed");
  }
  if (step.exit_code != 0) {
    return finish(StepStatus::Failed,
                  what + " failed with exit code " + std::to_string(step.exit_code));
  }
  if (!interrupt) {
    Exec check = run_command(command(script_name(req.stage, true)), env, chroot_dir, deadline);
    result.check_output = std::move(check.tail);
    if (check.timed_out) {
      return finish(StepStatus::TimedOut, "the check of " + what + " did not finish within " +
                                              core::format_duration(req.timeout));
    }
    if (check.exit_code != 0) {
      result.exit_code = check.exit_code;
      return finish(StepStatus::CheckFailed, what + " ran but its check failed with exit code " +
                                                 std::to_string(check.exit_code));
    }
  }
  return finish(StepStatus::Succeeded, what + " succeeded");
}

}  // namespace gpufleet::hostpkg
