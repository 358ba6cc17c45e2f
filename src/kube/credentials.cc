#include "kube/credentials.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/time.h"

extern char** environ;

namespace gpufleet::kube {

using core::InvalidInput;

namespace {

std::string strip(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs argv with extra environment, returns stdout. stderr passes through (plugins prompt or
// explain failures there).
std::string run_plugin(const ExecConfig& x, const std::string& exec_info) {
  std::string command = x.command;
  if (command.find('/') != std::string::npos && !std::filesystem::path(command).is_absolute()) {
    command = (std::filesystem::path(x.working_dir) / command).string();
  }
  std::vector<std::string> args{command};
  args.insert(args.end(), x.args.begin(), x.args.end());
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& [k, v] : x.env) env.push_back(k + "=" + v);
  env.push_back("KUBERNETES_EXEC_INFO=" + exec_info);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw InvalidInput("exec plugin: pipe: " + std::string(std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, command.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    std::string hint = x.install_hint.empty() ? "" : " (" + x.install_hint + ")";
    throw InvalidInput("exec credential plugin \"" + x.command +
                       "\" cannot be started: " + std::strerror(rc) + hint);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    // A plugin that never stops writing must not fill memory.
    if (out.size() + static_cast<std::size_t>(n) > core::input_limits().max_bytes) {
      close(fds[0]);
      ::kill(pid, SIGKILL);
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      throw InvalidInput("exec credential plugin \"" + x.command + "\" wrote more than " +
                         core::describe_bytes(core::input_limits().max_bytes) +
                         "; an ExecCredential is a few KiB");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw InvalidInput("exec credential plugin \"" + x.command + "\" failed (exit status " +
                       std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                       "); see its messages above");
  }
  return out;
}

}  // namespace

std::string format_micro_time(std::chrono::system_clock::time_point t) {
  return core::Timestamp::from_time_point(t).to_rfc3339(core::TimestampPrecision::Micros);
}

Credentials::Credentials(const ClientConfig& config) : config_(config) {}

CurrentCredentials Credentials::current() {
  std::lock_guard lock(mu_);
  CurrentCredentials c;
  c.client_cert_pem = config_.client_cert_pem;
  c.client_key_pem = config_.client_key_pem;
  c.bearer_token = config_.token;
  if (!config_.token_file.empty()) {
    struct stat st {};
    if (::stat(config_.token_file.c_str(), &st) == 0) {
      auto mtime = std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec) +
                   std::chrono::nanoseconds(st.st_mtim.tv_nsec);
      if (!file_loaded_ || mtime != file_mtime_) {
        // Capped read: the token file may be written by others (a projected volume).
        try {
          file_token_ = strip(core::read_file(config_.token_file));
          file_mtime_ = mtime;
          file_loaded_ = true;
        } catch (const InvalidInput&) {
          if (!file_loaded_) throw;
        }
      }
    } else if (!file_loaded_) {
      throw InvalidInput("token file \"" + config_.token_file +
                         "\" cannot be read: " + std::strerror(errno));
    }
    // A rotated file that vanished for a moment keeps the last token.
    c.bearer_token = file_token_;
  }
  if (config_.exec) {
    bool expired = exec_expiry_ && std::chrono::system_clock::now() >= *exec_expiry_;
    if (!exec_cache_ || expired) exec_cache_ = run_exec();
    if (!exec_cache_->bearer_token.empty()) c.bearer_token = exec_cache_->bearer_token;
    if (!exec_cache_->client_cert_pem.empty()) {
      c.client_cert_pem = exec_cache_->client_cert_pem;
      c.client_key_pem = exec_cache_->client_key_pem;
    }
  }
  return c;
}

bool Credentials::invalidate() {
  std::lock_guard lock(mu_);
  if (config_.exec) {
    exec_cache_.reset();
    exec_expiry_.reset();
    return true;
  }
  if (!config_.token_file.empty()) {
    file_loaded_ = false;
    return true;
  }
  return false;
}

CurrentCredentials Credentials::run_exec() {
  const ExecConfig& x = *config_.exec;
  core::Value info;
  info["apiVersion"] = x.api_version;
  info["kind"] = "ExecCredential";
  info["spec"]["interactive"] = false;
  if (x.provide_cluster_info) {
    info["spec"]["cluster"]["server"] = config_.server;
    if (!config_.ca_pem.empty()) {
      info["spec"]["cluster"]["certificate-authority-data"] = core::Bytes{config_.ca_pem};
    }
  }
  std::string out = run_plugin(x, core::to_json(info));
  const std::string where = "exec credential plugin \"" + x.command + "\" output";
  core::Value cred = core::parse_json(out, where);
  if (cred.get_string({"kind"}) != "ExecCredential") {
    throw InvalidInput(where + ": kind must be ExecCredential");
  }
  if (cred.get_string({"apiVersion"}) != x.api_version) {
    throw InvalidInput(where + ": apiVersion \"" + std::string(cred.get_string({"apiVersion"})) +
                       "\" differs from the kubeconfig's \"" + x.api_version + "\"");
  }
  CurrentCredentials c;
  c.bearer_token = std::string(cred.get_string({"status", "token"}));
  c.client_cert_pem = std::string(cred.get_string({"status", "clientCertificateData"}));
  c.client_key_pem = std::string(cred.get_string({"status", "clientKeyData"}));
  if (c.bearer_token.empty() && c.client_cert_pem.empty()) {
    throw InvalidInput(where + ": status has neither token nor clientCertificateData");
  }
  if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
    throw InvalidInput(where + ": clientCertificateData and clientKeyData must come together");
  }
  exec_expiry_.reset();
  if (auto exp = cred.get_string({"status", "expirationTimestamp"}); !exp.empty()) {
    auto t = parse_rfc3339(exp);
    if (!t) {
      throw InvalidInput(where + ": status.expirationTimestamp \"" + std::string(exp) +
                         "\" is not an RFC 3339 time");
    }
    exec_expiry_ = *t;
  }
  return c;
}

}  // namespace gpufleet::kube
