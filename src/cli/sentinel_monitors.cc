// Registers the health sentinel's node monitors with the agent. This lives in the CLI, not in
// the sentinel library: a static registration object in a static library is dropped by the
// linker when nothing references its translation unit (see docs/agent.md).
#include "agent/plugin.h"
#include "sentinel/gpu_monitor.h"
#include "sentinel/ib_monitor.h"
#include "sentinel/kmsg_monitor.h"
#include "sentinel/maintenance.h"

namespace gpufleet::cli {
namespace {

const agent::MonitorRegistration kKmsgXid("kmsg-xid", sentinel::make_kmsg_monitor);
const agent::MonitorRegistration kIbPort("ib-port", sentinel::make_ib_monitor);
const agent::MonitorRegistration kGpuNvml("gpu-nvml", sentinel::make_gpu_monitor);
const agent::MonitorRegistration kMaintenance("cloud-maintenance",
                                              sentinel::make_maintenance_monitor);

}  // namespace
}  // namespace gpufleet::cli
