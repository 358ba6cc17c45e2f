#include "sim/host_model.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/errors.h"

namespace gpufleet::sim {
namespace {

std::vector<std::string> split_args(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string arg_key(const std::string& arg) { return arg.substr(0, arg.find('=')); }

void check_path(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find("..") != std::string::npos ||
      path.find('\0') != std::string::npos) {
    throw core::InvalidInput("host file path \"" + path +
                             "\" is not an absolute path without '..' (write e.g. /etc/foo.conf)");
  }
  if (path.rfind("/proc/", 0) == 0 || path.rfind("/sys/", 0) == 0) {
    throw core::InvalidInput("host file path \"" + path +
                             "\" is in /proc or /sys (use a sysctl or kernel argument change)");
  }
}

void add_reason(std::vector<std::string>& reasons, std::string reason) {
  if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) {
    reasons.push_back(std::move(reason));
  }
}

}  // namespace

std::string sysctl_path(std::string_view key) {
  std::string p = "/proc/sys/";
  for (char c : key) p.push_back(c == '.' ? '/' : c);
  return p;
}

HostModel::HostModel(std::string kernel_version, std::string driver_version,
                     std::string extra_cmdline)
    : kernel_(std::move(kernel_version)), driver_(std::move(driver_version)) {
  cmdline_ = {"BOOT_IMAGE=/boot/vmlinuz-" + kernel_, "root=LABEL=cloudimg-rootfs", "ro",
              "console=tty1", "console=ttyS0"};
  for (auto& a : split_args(extra_cmdline)) cmdline_.push_back(std::move(a));
  pending_cmdline_ = cmdline_;
  // Defaults of a stock Ubuntu host that GPU recipes commonly change.
  sysctls_ = {{"kernel.numa_balancing", "1"},
              {"net.core.rmem_max", "212992"},
              {"net.core.wmem_max", "212992"},
              {"net.ipv4.tcp_mtu_probing", "0"},
              {"vm.max_map_count", "65530"},
              {"vm.swappiness", "60"},
              {"fs.inotify.max_user_watches", "65536"},
              {"kernel.pid_max", "4194304"}};
  packages_ = {{"nvidia-driver", driver_}, {"linux-image", kernel_}};
}

bool HostModel::write_file(const std::string& path, std::string content) {
  check_path(path);
  files_[path] = std::move(content);
  return false;
}

bool HostModel::remove_file(const std::string& path) {
  check_path(path);
  files_.erase(path);
  return false;
}

bool HostModel::set_sysctl(const std::string& key, const std::string& value, bool persist) {
  if (key.empty() || key.find('/') != std::string::npos || key.front() == '.' ||
      key.back() == '.') {
    throw core::InvalidInput("sysctl key \"" + key +
                             "\" is not a dotted sysctl name (write e.g. net.core.rmem_max)");
  }
  sysctls_[key] = value;
  if (persist) persisted_sysctls_[key] = value;
  return false;
}

bool HostModel::change_kernel_args(const std::vector<std::string>& add,
                                   const std::vector<std::string>& remove) {
  auto& args = pending_cmdline_;
  for (const auto& r : remove) {
    args.erase(std::remove_if(args.begin(), args.end(),
                              [&](const std::string& a) { return a == r || arg_key(a) == r; }),
               args.end());
  }
  for (const auto& a : add) {
    if (a.empty() || a.find_first_of(" \t\n") != std::string::npos) {
      throw core::InvalidInput("kernel argument \"" + a +
                               "\" is empty or holds whitespace (give one argument per entry)");
    }
    std::string key = arg_key(a);
    args.erase(std::remove_if(args.begin(), args.end(),
                              [&](const std::string& x) { return arg_key(x) == key; }),
               args.end());
    args.push_back(a);
  }
  // Argument order carries no meaning here; compare as sets.
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  bool changed = sorted(args) != sorted(cmdline_);
  auto it = std::find(pending_reasons_.begin(), pending_reasons_.end(), "kernel arguments");
  if (changed && it == pending_reasons_.end()) pending_reasons_.push_back("kernel arguments");
  if (!changed && it != pending_reasons_.end()) pending_reasons_.erase(it);
  return changed;
}

bool HostModel::install_package(const std::string& name, const std::string& version,
                                bool needs_reboot) {
  if (name.empty() || version.empty()) {
    throw core::InvalidInput(
        "package name and version must not be empty (e.g. nvidia-fabricmanager 570.148.08)");
  }
  if (!needs_reboot) {
    packages_[name] = version;
    return false;
  }
  pending_packages_[name] = version;
  add_reason(pending_reasons_, "package " + name);
  return true;
}

bool HostModel::set_kernel(const std::string& version) {
  if (version == kernel_) return false;
  pending_kernel_ = version;
  pending_cmdline_.front() = "BOOT_IMAGE=/boot/vmlinuz-" + version;
  add_reason(pending_reasons_, "kernel " + version);
  return true;
}

bool HostModel::set_driver(const std::string& version) {
  if (version == driver_) return false;
  pending_driver_ = version;
  add_reason(pending_reasons_, "driver " + version);
  return true;
}

void HostModel::reboot() {
  if (pending_kernel_) kernel_ = *std::exchange(pending_kernel_, std::nullopt);
  if (pending_driver_) driver_ = *std::exchange(pending_driver_, std::nullopt);
  packages_["linux-image"] = kernel_;
  packages_["nvidia-driver"] = driver_;
  for (auto& [name, version] : pending_packages_) packages_[name] = version;
  pending_packages_.clear();
  cmdline_ = pending_cmdline_;
  // Live sysctls fall back to what is persisted (defaults plus /etc/sysctl.d).
  for (const auto& [key, value] : persisted_sysctls_) sysctls_[key] = value;
  pending_reasons_.clear();
}

std::string HostModel::cmdline() const {
  std::string out;
  for (const auto& a : cmdline_) {
    if (!out.empty()) out.push_back(' ');
    out += a;
  }
  return out;
}

std::map<std::string, std::string> HostModel::files() const {
  std::map<std::string, std::string> out = files_;
  out["/proc/cmdline"] = cmdline() + "\n";
  for (const auto& [key, value] : sysctls_) out[sysctl_path(key)] = value + "\n";
  if (!persisted_sysctls_.empty()) {
    std::string conf = "# written by gpufleet host packages\n";
    for (const auto& [key, value] : persisted_sysctls_) conf += key + " = " + value + "\n";
    out["/etc/sysctl.d/90-gpufleet.conf"] = conf;
  }
  std::string pkgs;
  for (const auto& [name, version] : packages_) pkgs += name + "=" + version + "\n";
  out["/var/lib/gpufleet/packages"] = pkgs;
  if (reboot_required()) {
    out["/var/run/reboot-required"] = "*** System restart required ***\n";
    std::string why;
    for (const auto& r : pending_reasons_) why += r + "\n";
    out["/var/run/reboot-required.pkgs"] = why;
  }
  return out;
}

std::optional<std::string> HostModel::read(const std::string& path) const {
  auto all = files();
  auto it = all.find(path);
  if (it == all.end()) return std::nullopt;
  return it->second;
}

}  // namespace gpufleet::sim
