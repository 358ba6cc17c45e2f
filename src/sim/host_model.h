// The host OS of one simulated node as host packages see it: files, live sysctls, the
// kernel command line, the kernel and driver versions and installed packages. A package
// step changes it through these calls; a check reads it back through read(). Changes that
// only take effect at boot (kernel arguments, kernel, driver, packages that say so) stay
// pending until reboot(), and /var/run/reboot-required says so, as on Ubuntu.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::sim {

class HostModel {
 public:
  HostModel() = default;
  HostModel(std::string kernel_version, std::string driver_version, std::string extra_cmdline);

  // Each returns true when the change needs a reboot to take effect.
  bool write_file(const std::string& path, std::string content);
  bool remove_file(const std::string& path);
  // Live at once (/proc/sys); `persist` also writes /etc/sysctl.d/90-gpufleet.conf.
  bool set_sysctl(const std::string& key, const std::string& value, bool persist);
  // Adds and removes kernel arguments for the next boot (by key for key=value arguments).
  bool change_kernel_args(const std::vector<std::string>& add,
                          const std::vector<std::string>& remove);
  bool install_package(const std::string& name, const std::string& version, bool needs_reboot);
  bool set_kernel(const std::string& version);
  bool set_driver(const std::string& version);

  // What a check reads: /proc/cmdline, /proc/sys/<key as path>, /var/run/reboot-required,
  // /var/lib/gpufleet/packages (name=version lines), or any file written. nullopt: absent.
  [[nodiscard]] std::optional<std::string> read(const std::string& path) const;
  [[nodiscard]] bool reboot_required() const noexcept { return !pending_reasons_.empty(); }
  [[nodiscard]] const std::vector<std::string>& pending_reasons() const { return pending_reasons_; }

  // Boot: pending kernel arguments, kernel, driver and packages become current.
  void reboot();

  [[nodiscard]] const std::string& kernel_version() const noexcept { return kernel_; }
  [[nodiscard]] const std::string& driver_version() const noexcept { return driver_; }
  [[nodiscard]] std::string cmdline() const;
  [[nodiscard]] const std::map<std::string, std::string>& sysctls() const { return sysctls_; }
  // Every file the model exposes under a node's root (path -> content), including the
  // /proc views; the signal writer mirrors these into <root>/<node>/.
  [[nodiscard]] std::map<std::string, std::string> files() const;

 private:
  std::string kernel_;
  std::string driver_;
  std::optional<std::string> pending_kernel_;
  std::optional<std::string> pending_driver_;
  std::vector<std::string> cmdline_;
  std::vector<std::string> pending_cmdline_;
  std::map<std::string, std::string> sysctls_;
  std::map<std::string, std::string> persisted_sysctls_;
  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> packages_;
  std::map<std::string, std::string> pending_packages_;
  std::vector<std::string> pending_reasons_;
};

// "net.core.rmem_max" -> "/proc/sys/net/core/rmem_max".
std::string sysctl_path(std::string_view key);

}  // namespace gpufleet::sim
