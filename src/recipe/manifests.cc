#include "recipe/manifests.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/yaml.h"

extern char** environ;

namespace gpufleet::recipe {

using core::InvalidInput;
using core::Value;

namespace {

// Kustomize output of a library component is a few hundred KiB at most; a tool that writes
// more, or runs longer, is stopped.
constexpr std::size_t kMaxOutput = 16u << 20;
constexpr auto kTimeout = std::chrono::seconds(60);

// Checks the objects and keeps them, to be re-emitted together: the same objects always give
// the same text, whatever the formatting, comments or tool version that produced them.
void canonical(const std::vector<Value>& docs, const std::string& where, std::vector<Value>& out) {
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const Value& d = docs[i];
    if (d.is_null()) continue;  // empty documents ("---" at the end)
    std::string w = where + " document " + std::to_string(i + 1);
    if (!d.is_map()) throw InvalidInput(w + ": not a Kubernetes object (a mapping)");
    for (std::string_view key : {"apiVersion", "kind"}) {
      const Value* f = d.find(key);
      if (f == nullptr || f->if_string() == nullptr || f->as_string().empty())
        throw InvalidInput(w + ": " + std::string(key) + ": missing; every object names it");
    }
    if (d.get_string({"metadata", "name"}).empty())
      throw InvalidInput(w + ": metadata.name: missing; every object is named");
    out.push_back(d);
  }
}

struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/gpufleet-kustomize-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary directory: " +
                               std::string(std::strerror(errno)));
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

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

// Runs argv (stdin /dev/null, stderr to `err_file`) and returns its stdout, bounded in size and
// time.
std::string run(const std::vector<std::string>& args, const std::string& err_file,
                const std::string& what) {
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
                             "; install kubectl or set GPUFLEET_KUBECTL to one (kube-local's "
                             "built-in kubectl: GPUFLEET_KUBECTL=\"kube-local kubectl\")");
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
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) stop("'" + args[0] + "' ran longer than 60 s; stopped");
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) continue;  // the deadline check above stops it
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (out.size() + static_cast<std::size_t>(got) > kMaxOutput)
      stop("'" + args[0] + "' wrote more than 16 MiB; stopped");
    out.append(buf, static_cast<std::size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string err = tail_of(err_file);
    throw InvalidInput(what + ": '" + core::join(args, " ") + "' failed (exit status " +
                       std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")" +
                       (err.empty() ? "" : ": " + err));
  }
  return out;
}

}  // namespace

std::vector<std::string> kustomize_command() {
  std::vector<std::string> cmd;
  if (const char* env = std::getenv("GPUFLEET_KUBECTL"); env != nullptr && *env != '\0') {
    for (std::string_view part : core::split_trimmed(env, ' ')) {
      if (!part.empty()) cmd.emplace_back(part);
    }
  }
  if (cmd.empty()) cmd.emplace_back("kubectl");
  cmd.emplace_back("kustomize");
  return cmd;
}

ManifestSource render_manifests(const Library& lib, const std::string& component,
                                const std::string& kind, const std::string& path) {
  ManifestSource m;
  m.kind = kind;
  m.path = path;
  const std::string prefix = path + "/";
  const std::string where = "component " + component + " (" + kind + " " + path + ")";
  std::vector<Value> objects;
  if (kind == "manifests") {
    // Every *.yaml file under the directory, in path order.
    for (auto it = lib.manifest_files.lower_bound(prefix);
         it != lib.manifest_files.end() && it->first.rfind(prefix, 0) == 0; ++it) {
      std::vector<Value> docs = core::parse_yaml_documents(it->second, it->first);
      canonical(docs, where + ": " + it->first, objects);
    }
  } else if (kind == "kustomize") {
    // The whole manifests/ tree, so that a kustomization may use sibling bases.
    TempDir tmp;
    for (const auto& [file, text] : lib.manifest_files) {
      core::write_file_atomic(tmp.path + "/" + file, text);
    }
    std::vector<std::string> args = kustomize_command();
    args.push_back(tmp.path + "/" + path);
    std::string out = run(args, tmp.path + "/stderr", where);
    std::vector<Value> docs = core::parse_yaml_documents(out, where + " kustomize output");
    canonical(docs, where + " kustomize output", objects);
  } else {
    throw InvalidInput(where + ": unknown manifest kind '" + kind +
                       "'; use manifests or kustomize");
  }
  if (objects.empty())
    throw InvalidInput(where + ": renders no object; the directory holds no Kubernetes object");
  m.content = core::to_yaml_documents(objects);
  m.sha256 = core::sha256_hex(m.content);
  return m;
}

}  // namespace gpufleet::recipe
