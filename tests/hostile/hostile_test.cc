// The hostile-input suite: every gpufleet command and document reader that takes input is fed
// every hostile file (generated here at test time; nothing big is committed) in a child
// process held to 512 MiB and 5 s. A case fails when the child crashes, hangs, goes over the
// memory limit, exits 0, reports a sanitizer error, or prints an error that does not name
// the input.
//
// Adding a command: one line in commands(). Adding a reader: one line in reader_main.cc.
// Adding a hostile file: one entry in hostile_files().
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/base64.h"
#include "support/source_paths.h"

namespace fs = std::filesystem;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

constexpr long kMemoryLimitMiB = 512;
// The time limit is CPU time (RLIMIT_CPU), so that a loaded test machine does not turn a
// slow ASan run into a failure; a child that waits instead of working (a read blocked on
// a FIFO) is caught by the wall-clock limit.
constexpr long kCpuLimitSeconds = 5;
constexpr auto kWallLimit = std::chrono::seconds(30);

// ---- hostile files ------------------------------------------------------------------------

void write(const fs::path& p, std::string_view content) {
  std::ofstream out(p, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

// `levels` anchors, each a list of ten aliases of the one before: 10^levels leaves from a
// file of ~60 bytes per level. The document is a list, a shape no reader accepts even when
// the budget lets it through.
std::string alias_bomb(int levels) {
  std::string doc = "- &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    doc += "- &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) doc += (j ? ", " : "") + prev;
    doc += "]\n";
  }
  return doc;
}

// The same bomb through mapping values and keys of a Kubernetes-shaped document.
std::string alias_bomb_map() {
  std::string doc =
      "apiVersion: v1\nkind: Config\nx0: &x0 {a: lol, b: lol, c: lol, d: lol, e: lol, "
      "f: lol, g: lol, h: lol, i: lol, j: lol}\n";
  for (int i = 1; i < 9; ++i) {
    std::string prev = "*x" + std::to_string(i - 1);
    doc += "x" + std::to_string(i) + ": &x" + std::to_string(i) + " {";
    for (int j = 0; j < 10; ++j) doc += std::string(j ? ", " : "") + char('a' + j) + ": " + prev;
    doc += "}\n";
  }
  return doc;
}

std::string gzip(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out(deflateBound(&zs, zs.avail_in), '\0');
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A kubectl dump of one Helm release Secret whose record inflates from ~250 KiB to 256 MiB
// (data.release is base64 as kubectl prints it, of Helm's base64 of gzip).
std::string gzip_bomb() {
  std::string payload = "{\"name\":\"" + std::string(256u << 20, 'a') + "\"}";
  std::string release = gpufleet::core::base64_encode(gpufleet::core::base64_encode(gzip(payload)));
  return R"({"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret",)"
         R"("metadata":{"name":"sh.helm.release.v1.bomb.v1","namespace":"default",)"
         R"("labels":{"owner":"helm"}},"type":"helm.sh/release.v1","data":{"release":")" +
         gpufleet::core::base64_encode(release) + "\"}}]}\n";
}

struct HostileFile {
  std::string name;
  std::function<void(const fs::path&)> make;
};

std::vector<HostileFile> hostile_files() {
  using namespace std::string_literals;  // "..."s keeps embedded NUL bytes
  auto text = [](std::string content) {
    return [content = std::move(content)](const fs::path& p) { write(p, content); };
  };
  return {
      {"alias-bomb-3.yaml", text(alias_bomb(3))},
      {"alias-bomb-5.yaml", text(alias_bomb(5))},
      {"alias-bomb-10.yaml", text(alias_bomb(10))},
      {"alias-bomb-map.yaml", text(alias_bomb_map())},
      {"gzip-bomb.json", text(gzip_bomb())},
      {"sparse-200mb.yaml",
       [](const fs::path& p) {
         write(p, "kind: Recipe\n");
         fs::resize_file(p, 200u << 20);  // sparse: no disk used
       }},
      {"deep-nesting.yaml", text(std::string(100000, '['))},
      {"deep-nesting-map.yaml",
       [](const fs::path& p) {
         std::string s;
         for (int i = 0; i < 100000; ++i) s += "{a: ";
         write(p, s);
       }},
      {"deep-nesting.json",
       [](const fs::path& p) {
         std::string s;
         for (int i = 0; i < 100000; ++i) s += "{\"a\":";
         write(p, s);
       }},
      {"huge-string.yaml",
       [](const fs::path& p) {
         write(p, "kind: Recipe\nmetadata:\n  name: " + std::string(20u << 20, 'x') + "\n");
       }},
      {"huge-key.json",
       [](const fs::path& p) { write(p, "{\"" + std::string(20u << 20, 'k') + "\": 1}"); }},
      {"invalid-utf8.yaml", text("kind: Recipe\nmetadata:\n  name: \xff\xfe\xc3\x28\n")},
      {"nul-bytes.yaml", text("kind: Recipe\0\0\0\nmetadata: {}\n"s)},
      {"bom-crlf.yaml", text("\xEF\xBB\xBF"
                             "kind: Hostile\r\nmetadata:\r\n  name: [unterminated\r\n")},
      {"utf16.yaml", text("\xFF\xFEk\0i\0n\0d\0:\0 \0[\0"s)},
      {"duplicate-keys.yaml",
       text("apiVersion: gpufleet.io/v1alpha1\nkind: Recipe\nkind: Fleet\n")},
      {"numbers-out-of-range.yaml",
       text("apiVersion: gpufleet.io/v1alpha1\nkind: Fleet\nmetadata: {name: n}\nspec:\n"
            "  seed: 999999999999999999999999999999\n  pools:\n  - name: p\n    count: 1e400\n"
            "    gpu: {product: h100, count: -9223372036854775809}\n")},
      {"numbers-out-of-range.json",
       text("{\"a\": 1e99999, \"b\": -99999999999999999999999999999}")},
      {"timestamps-out-of-range.yaml",
       text("apiVersion: gpufleet.io/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nspec:\n"
            "  fleet: missing-fleet.yaml\n  duration: 99999999999999999999h\n  timeline:\n"
            "  - {at: 9999-99-99T99:99:99Z, node: n, type: xid, gpu: 0, code: 79}\n"
            "  - {at: -1s, node: n, type: reboot}\n"
            "  - {at: 1e308h, node: n, type: reboot}\n")},
      {"binary-garbage.yaml",
       [](const fs::path& p) {
         std::mt19937 rng(14);
         std::string s(4096, '\0');
         for (char& c : s) c = static_cast<char>(rng());
         write(p, s);
       }},
      {"unknown-alias.yaml", text("kind: *nowhere\n")},
      {"a-directory.yaml", [](const fs::path& p) { fs::create_directory(p); }},
      {"a-fifo.yaml", [](const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); }},
  };
}

// ---- commands -----------------------------------------------------------------------------

// A command line with placeholders: {file} is the hostile file; {dir:NAME} a fresh directory
// holding NAME as a symbolic link to it; {dump:NAME} the same plus a valid version.json, so
// that `snapshot --from-dir` goes on to read NAME (Helm records: the gzip bomb); {good-recipe},
// {good-snapshot} valid inputs for the other slots; {out} a fresh output path.
constexpr std::string_view kVersionJson = R"({"serverVersion": {"gitVersion": "v1.32.4"}})";

struct Command {
  std::string name;
  std::vector<std::string> args;
};

std::vector<Command> commands() {
  return {
      {"bundle -r", {"bundle", "-r", "{file}", "--deployer", "helm", "-o", "{out}"}},
      {"recipe --data", {"recipe", "--data", "{dir:registry.yaml}", "--service", "eks"}},
      {"recipe list --data", {"recipe", "list", "--data", "{dir:criteria.yaml}"}},
      {"validate -r", {"validate", "-r", "{file}", "--snapshot", "{good-snapshot}"}},
      {"validate --snapshot", {"validate", "-r", "{good-recipe}", "--snapshot", "{file}"}},
      {"validate --kubeconfig", {"validate", "-r", "{good-recipe}", "--kubeconfig", "{file}"}},
      {"diff -r", {"diff", "-r", "{file}", "--snapshot", "{good-snapshot}"}},
      {"diff --snapshot", {"diff", "--snapshot", "{file}", "--against", "{good-snapshot}"}},
      {"diff --against", {"diff", "--snapshot", "{good-snapshot}", "--against", "{file}"}},
      {"snapshot --kubeconfig", {"snapshot", "--kubeconfig", "{file}", "-o", "{out}"}},
      {"snapshot --from-dir nodes", {"snapshot", "--from-dir", "{dir:nodes.json}", "-o", "{out}"}},
      {"snapshot --from-dir helm",
       {"snapshot", "--from-dir", "{dump:helm-releases.json}", "-o", "{out}"}},
      {"sim validate --fleet", {"sim", "validate", "--fleet", "{file}"}},
      {"sim validate --scenario", {"sim", "validate", "--scenario", "{file}"}},
      {"sim inject -f", {"sim", "inject", "--state-dir", "{out}", "-f", "{file}"}},
      {"sim --fleet", {"sim", "--fleet", "{file}", "--kubeconfig", "{good-kubeconfig}"}},
      {"sim --scenario", {"sim", "--scenario", "{file}", "--kubeconfig", "{good-kubeconfig}"}},
      {"sim --kubeconfig", {"sim", "--kubeconfig", "{file}", "--fleet", "{good-fleet}"}},
      {"sim --behaviours",
       {"sim", "--behaviours", "{file}", "--kubeconfig", "{good-kubeconfig}", "--fleet",
        "{good-fleet}", "--duration", "1s"}},
  };
}

// ---- running one case ---------------------------------------------------------------------

struct Outcome {
  bool timed_out = false;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  long max_rss_kib = 0;
  double seconds = 0;      // wall
  double cpu_seconds = 0;  // user + system
  std::string stderr_text;
};

// The children's environment: ours, with the memory limit for ASan builds and without
// anything that would point gpufleet at other inputs or limits.
std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  std::string asan = "ASAN_OPTIONS=";
  if (const char* old = std::getenv("ASAN_OPTIONS")) asan += std::string(old) + ":";
  asan += "hard_rss_limit_mb=" + std::to_string(kMemoryLimitMiB) + ":detect_leaks=1";
  env.push_back(asan);
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    for (std::string_view drop : {"ASAN_OPTIONS=", "KUBECONFIG=", "GPUFLEET_MAX_INPUT_BYTES="}) {
      if (kv.starts_with(drop)) kv = {};
    }
    if (!kv.empty()) env.emplace_back(kv);
  }
  return env;
}

// Runs argv under the limits. Everything the child needs is prepared before fork(), so the
// child only calls async-signal-safe functions (the suite forks from several threads).
Outcome run_limited(const std::vector<std::string>& argv, const fs::path& err_file) {
  static const std::vector<std::string> env_strings = child_environment();
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string err_path = err_file.string();
  auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err, 2);
    rlimit cpu{kCpuLimitSeconds, kCpuLimitSeconds + 1};
    ::setrlimit(RLIMIT_CPU, &cpu);
    if (!kAsan) {
      // ASan reserves terabytes of address space for its shadow, so an address-space limit
      // cannot hold it; there the limit is its hard RSS limit (below) plus ru_maxrss.
      rlimit lim{kMemoryLimitMiB << 20, kMemoryLimitMiB << 20};
      ::setrlimit(RLIMIT_AS, &lim);
    }
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  Outcome o;
  int status = 0;
  rusage ru{};
  for (;;) {
    pid_t r = ::wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() - start > kWallLimit) {
      o.timed_out = true;
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &ru);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.max_rss_kib = ru.ru_maxrss;
  o.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  std::ifstream in(err_file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  o.stderr_text = s.str();
  return o;
}

// Empty when the outcome is what a hostile input must get; else what went wrong.
// `may_accept`: a syntax-only reader (plain YAML or JSON) rightly accepts a hostile file that
// is well-formed (a small alias bomb, a List of Secrets); it must still stay within limits.
std::string judge(const Outcome& o, const std::vector<std::string>& names,
                  bool may_accept = false) {
  if (o.timed_out) return "did not finish within 30 s of wall time (hang?)";
  if (o.signal == SIGXCPU || o.signal == SIGKILL) {
    return "used more than 5 s of CPU time (signal " + std::to_string(o.signal) + ")";
  }
  if (o.signal != 0) return "killed by signal " + std::to_string(o.signal) + " (crash)";
  if (o.max_rss_kib > kMemoryLimitMiB * 1024) {
    return "peak memory " + std::to_string(o.max_rss_kib / 1024) + " MiB is over the limit";
  }
  if (o.exit_code == 0) return may_accept ? "" : "exited 0: the hostile input was accepted";
  if (o.exit_code != 1 && o.exit_code != 2) return "exit code " + std::to_string(o.exit_code);
  for (const char* bad : {"Sanitizer", "runtime error:", "terminate called", "bad_alloc"}) {
    if (o.stderr_text.find(bad) != std::string::npos) return std::string("stderr shows ") + bad;
  }
  for (const auto& n : names) {
    if (o.stderr_text.find(n) != std::string::npos) return "";
  }
  return "the error does not name the input";
}

class HostileSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("gpufleet-hostile-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "files");
    fs::create_directories(root_ / "out");
    for (const HostileFile& f : hostile_files()) f.make(root_ / "files" / f.name);
    // Valid inputs for the slots that are not under test.
    fs::path src = GPUFLEET_SOURCE_DIR;
    good_["{good-snapshot}"] = (src / "tests/recipe/testdata/snapshot.yaml").string();
    good_["{good-fleet}"] = (src / "examples/fleet-h100.yaml").string();
    good_["{good-kubeconfig}"] = (src / "tests/kube/testdata/kubeconfig-a.yaml").string();
    good_["{good-recipe}"] = (root_ / "good-recipe.yaml").string();
    Outcome o =
        run_limited({GPUFLEET_BIN, "recipe", "--service", "eks", "--accelerator", "h100", "--os",
                     "ubuntu", "--intent", "inference", "-o", good_["{good-recipe}"]},
                    root_ / "good-recipe.err");
    ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // Expands placeholders; `names` collects what the error may call the input.
  static std::vector<std::string> expand(const std::vector<std::string>& args, const fs::path& file,
                                         const std::string& case_id,
                                         std::vector<std::string>& names) {
    std::vector<std::string> out;
    names = {file.string()};
    for (const std::string& a : args) {
      if (a == "{file}") {
        out.push_back(file.string());
      } else if (a == "{out}") {
        out.push_back((root_ / "out" / case_id).string());
      } else if (a.rfind("{dir:", 0) == 0 || a.rfind("{dump:", 0) == 0) {
        fs::path dir = root_ / "dirs" / case_id;
        fs::create_directories(dir);
        std::size_t colon = a.find(':');
        fs::path link = dir / a.substr(colon + 1, a.size() - colon - 2);
        fs::create_symlink(file, link);
        // A kubectl dump directory is only read on when it has the server version.
        if (a[1] == 'd' && a[2] == 'u') write(dir / "version.json", kVersionJson);
        names = {link.string(), dir.string()};
        out.push_back(dir.string());
      } else if (auto it = good_.find(a); it != good_.end()) {
        out.push_back(it->second);
      } else {
        out.push_back(a);
      }
    }
    return out;
  }

  static inline fs::path root_;
  static inline std::map<std::string, std::string> good_;
};

std::string case_id(const std::string& a, const std::string& b) {
  std::string s = a + "__" + b;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  }
  return s;
}

std::string report(const std::string& what, const Outcome& o) {
  std::ostringstream s;
  s << what << " (exit " << o.exit_code << ", signal " << o.signal << ", " << o.seconds
    << " s wall, " << o.cpu_seconds << " s CPU, " << o.max_rss_kib / 1024
    << " MiB)\n  stderr: " << o.stderr_text.substr(0, 600);
  return s.str();
}

struct Case {
  std::string label;
  std::vector<std::string> argv;
  std::vector<std::string> names;  // what the error may call the input
  bool may_accept = false;
  fs::path err_file;
  Outcome outcome;
};

// Runs the cases on a few threads (each case is its own process, so they do not interfere)
// and checks each outcome; prints the largest CPU time and memory seen.
void run_cases(std::vector<Case>& cases, const char* what) {
  std::atomic<std::size_t> next{0};
  unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < cases.size(); i = next++) {
        cases[i].outcome = run_limited(cases[i].argv, cases[i].err_file);
      }
    });
  }
  for (auto& t : pool) t.join();
  double most_cpu = 0;
  long biggest = 0;
  std::string slowest;
  for (const Case& c : cases) {
    EXPECT_EQ(judge(c.outcome, c.names, c.may_accept), "") << report(c.label, c.outcome);
    if (c.outcome.cpu_seconds > most_cpu) {
      most_cpu = c.outcome.cpu_seconds;
      slowest = c.label;
    }
    biggest = std::max(biggest, c.outcome.max_rss_kib);
  }
  std::cout << cases.size() << " " << what << " cases; most CPU " << most_cpu << " s (" << slowest
            << "), peak RSS " << biggest / 1024 << " MiB" << (kAsan ? " (ASan build)" : "") << "\n";
}

TEST_F(HostileSuite, EveryCommandRefusesEveryHostileFile) {
  std::vector<Case> cases;
  for (const HostileFile& f : hostile_files()) {
    fs::path file = root_ / "files" / f.name;
    for (const Command& c : commands()) {
      Case k;
      std::string id = case_id(c.name, f.name);
      k.label = "gpufleet " + c.name + " " + f.name;
      k.argv = {GPUFLEET_BIN};
      for (auto& a : expand(c.args, file, id, k.names)) k.argv.push_back(std::move(a));
      k.err_file = root_ / (id + ".err");
      cases.push_back(std::move(k));
    }
  }
  run_cases(cases, "command");
}

// The plain YAML and JSON readers accept any well-formed document; the others must refuse
// every hostile file.
const std::set<std::string> kSyntaxOnlyReaders = {"yaml", "json"};

TEST_F(HostileSuite, EveryReaderRefusesEveryHostileFile) {
  std::vector<std::string> readers;
  FILE* p = ::popen((std::string(HOSTILE_READER) + " --list").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[256];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    readers.push_back(s);
  }
  ASSERT_EQ(::pclose(p), 0);
  ASSERT_GE(readers.size(), 5u);
  std::vector<Case> cases;
  for (const HostileFile& f : hostile_files()) {
    fs::path file = root_ / "files" / f.name;
    for (const std::string& r : readers) {
      Case k;
      k.label = "reader " + r + " " + f.name;
      k.argv = {HOSTILE_READER, r, file.string()};
      k.names = {file.string()};
      k.may_accept = kSyntaxOnlyReaders.contains(r);
      k.err_file = root_ / (case_id(r, f.name) + ".err");
      cases.push_back(std::move(k));
    }
  }
  run_cases(cases, "reader");
}

// The suite's own check: a runner that let everything pass would prove nothing.
TEST_F(HostileSuite, JudgeCatchesEachFailureKind) {
  Outcome ok;
  ok.exit_code = 2;
  ok.stderr_text = "error: /x/f.yaml: is a directory";
  EXPECT_EQ(judge(ok, {"/x/f.yaml"}), "");
  Outcome o = ok;
  o.exit_code = 0;
  EXPECT_THAT(judge(o, {"/x/f.yaml"}), ::testing::HasSubstr("exited 0"));
  o = ok;
  o.stderr_text = "error: expected a mapping but found null";
  EXPECT_THAT(judge(o, {"/x/f.yaml"}), ::testing::HasSubstr("does not name"));
  o = ok;
  o.max_rss_kib = 600 * 1024;
  EXPECT_THAT(judge(o, {"/x/f.yaml"}), ::testing::HasSubstr("over the limit"));
  // The CPU limit's signal reaches the judge (a real spin would take 5 s of CPU, which a
  // loaded test machine may not grant within the wall-clock limit).
  Outcome xcpu = run_limited({"/bin/sh", "-c", "kill -XCPU $$"}, root_ / "xcpu.err");
  EXPECT_EQ(xcpu.signal, SIGXCPU);
  EXPECT_THAT(judge(xcpu, {}), ::testing::HasSubstr("CPU time"));
  o = ok;
  o.timed_out = true;
  EXPECT_THAT(judge(o, {"/x/f.yaml"}), ::testing::HasSubstr("hang"));
}

}  // namespace
