#include "sim/control_inbox.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/yaml.h"
#include "sim/atomic_file.h"

namespace gpufleet::sim {
namespace {

std::string inbox(const std::string& dir) { return dir + "/control/inbox"; }
std::string done(const std::string& dir) { return dir + "/control/done"; }

}  // namespace

std::string submit_control_event(const std::string& state_dir, const core::Value& event) {
  static std::atomic<unsigned> counter{0};
  auto now = std::chrono::system_clock::now().time_since_epoch();
  char name[96];
  std::snprintf(
      name, sizeof name, "%020lld-%d-%u.yaml",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(now).count()),
      static_cast<int>(::getpid()), counter.fetch_add(1));
  std::string path = inbox(state_dir) + "/" + name;
  // Written as a dot-file first so list_control_inbox never picks up a partial one.
  std::string hidden = inbox(state_dir) + "/." + name;
  write_file_atomic(hidden, core::to_yaml(event));
  std::filesystem::rename(hidden, path);
  return path;
}

std::vector<std::string> list_control_inbox(const std::string& state_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(inbox(state_dir), ec)) {
    std::string n = e.path().filename().string();
    if (n.empty() || n[0] == '.' || e.path().extension() != ".yaml") continue;
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

core::Value read_control_event(const std::string& state_dir, const std::string& file_name) {
  std::string path = inbox(state_dir) + "/" + file_name;
  return core::parse_yaml(read_text_file(path), path);
}

void complete_control_event(const std::string& state_dir, const std::string& file_name,
                            const std::string& result) {
  std::string from = inbox(state_dir) + "/" + file_name;
  std::string text;
  try {
    text = read_text_file(from);
  } catch (const std::exception&) {
  }
  std::string line = result;
  std::replace(line.begin(), line.end(), '\n', ' ');
  write_file_atomic(done(state_dir) + "/" + file_name, text + "# " + line + "\n");
  std::error_code ec;
  std::filesystem::remove(from, ec);
}

std::string status_file_path(const std::string& state_dir) { return state_dir + "/status.json"; }

}  // namespace gpufleet::sim
