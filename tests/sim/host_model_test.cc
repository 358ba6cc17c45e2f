#include "sim/host_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

TEST(HostModel, SysctlsAreLiveAtOnceAndOnlyPersistedOnesSurviveReboot) {
  HostModel h("5.15.0-1063-nvidia", "570.148.08", "iommu=pt");
  EXPECT_EQ(h.read("/proc/sys/vm/max_map_count"), "65530\n");
  EXPECT_FALSE(h.set_sysctl("vm.max_map_count", "262144", true));
  EXPECT_FALSE(h.set_sysctl("net.core.rmem_max", "67108864", false));
  EXPECT_EQ(h.read("/proc/sys/vm/max_map_count"), "262144\n");
  EXPECT_THAT(*h.read("/etc/sysctl.d/90-gpufleet.conf"), HasSubstr("vm.max_map_count = 262144"));
  EXPECT_FALSE(h.reboot_required());
  h.reboot();
  EXPECT_EQ(h.read("/proc/sys/vm/max_map_count"), "262144\n");
  EXPECT_THROW(h.set_sysctl("bad/key", "1", false), core::InvalidInput);
}

TEST(HostModel, KernelArgsKernelAndDriverWaitForReboot) {
  HostModel h("5.15.0-1063-nvidia", "570.148.08", "iommu=pt");
  EXPECT_THAT(*h.read("/proc/cmdline"), HasSubstr("iommu=pt"));
  EXPECT_TRUE(h.change_kernel_args({"hugepagesz=1G", "iommu=off"}, {}));
  EXPECT_TRUE(h.set_kernel("6.8.0-1021-nvidia"));
  EXPECT_TRUE(h.set_driver("575.57.08"));
  EXPECT_TRUE(h.reboot_required());
  EXPECT_TRUE(h.read("/var/run/reboot-required").has_value());
  EXPECT_THAT(*h.read("/var/run/reboot-required.pkgs"), HasSubstr("kernel 6.8.0-1021-nvidia"));
  // Still the old boot.
  EXPECT_THAT(*h.read("/proc/cmdline"), ::testing::Not(HasSubstr("hugepagesz")));
  EXPECT_EQ(h.kernel_version(), "5.15.0-1063-nvidia");
  h.reboot();
  EXPECT_FALSE(h.reboot_required());
  EXPECT_FALSE(h.read("/var/run/reboot-required").has_value());
  std::string cmdline = *h.read("/proc/cmdline");
  EXPECT_THAT(cmdline, HasSubstr("hugepagesz=1G"));
  EXPECT_THAT(cmdline, HasSubstr("iommu=off"));
  EXPECT_THAT(cmdline, ::testing::Not(HasSubstr("iommu=pt")));
  EXPECT_THAT(cmdline, HasSubstr("BOOT_IMAGE=/boot/vmlinuz-6.8.0-1021-nvidia"));
  EXPECT_EQ(h.kernel_version(), "6.8.0-1021-nvidia");
  EXPECT_EQ(h.driver_version(), "575.57.08");
  EXPECT_THAT(*h.read("/var/lib/gpufleet/packages"), HasSubstr("nvidia-driver=575.57.08"));
  // Undoing a pending change before the reboot clears the need for one.
  EXPECT_TRUE(h.change_kernel_args({}, {"hugepagesz"}));
  EXPECT_FALSE(h.change_kernel_args({"hugepagesz=1G"}, {}));
  EXPECT_FALSE(h.reboot_required());
}

TEST(HostModel, FilesAndPackages) {
  HostModel h("k", "d", "");
  EXPECT_FALSE(h.write_file("/etc/modprobe.d/nvidia.conf", "options nvidia NVreg_X=1\n"));
  EXPECT_EQ(h.read("/etc/modprobe.d/nvidia.conf"), "options nvidia NVreg_X=1\n");
  EXPECT_THROW(h.write_file("relative", "x"), core::InvalidInput);
  EXPECT_THROW(h.write_file("/etc/../x", "x"), core::InvalidInput);
  EXPECT_THROW(h.write_file("/proc/sys/vm/x", "x"), core::InvalidInput);
  EXPECT_FALSE(h.install_package("dcgm", "4.2.3", false));
  EXPECT_TRUE(h.install_package("nvidia-fabricmanager", "570.148.08", true));
  EXPECT_THAT(*h.read("/var/lib/gpufleet/packages"), HasSubstr("dcgm=4.2.3"));
  EXPECT_THAT(*h.read("/var/lib/gpufleet/packages"),
              ::testing::Not(HasSubstr("nvidia-fabricmanager")));
  h.reboot();
  EXPECT_THAT(*h.read("/var/lib/gpufleet/packages"), HasSubstr("nvidia-fabricmanager=570.148.08"));
  h.remove_file("/etc/modprobe.d/nvidia.conf");
  EXPECT_FALSE(h.read("/etc/modprobe.d/nvidia.conf").has_value());
}

}  // namespace
}  // namespace gpufleet::sim
