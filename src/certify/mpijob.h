// A group test as a Kubeflow MPIJob (kubeflow.org/v2beta1, the mpi-operator's API), for
// clusters that run that operator: its launcher pod runs `mpirun` over one worker pod per
// node of the group (the workers serve sshd and hold the GPUs), and the result is read from
// the launcher's container as from rank 0 of an indexed Job (docs/certify.md "Launching").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certify/workload_job.h"
#include "core/value.h"
#include "kube/api/resource.h"

namespace gpufleet::certify {

kube::ResourceId mpijobs();

// Which launcher runs MPI-style workloads on two or more nodes: the `certify.launcher`
// setting. Auto picks MpiJob when the API server serves kubeflow.org/v2beta1 MPIJob.
enum class Launcher { Job, MpiJob };
enum class LauncherChoice { Auto, Job, MpiJob };
// Throws core::InvalidInput naming the setting, the value and the accepted ones.
LauncherChoice parse_launcher_choice(std::string_view value);

// Pod label telling an MPIJob's launcher from its workers (both carry the group's labels).
inline constexpr const char* kMpiRoleLabel = "gpufleet.io/certify-mpi-role";
inline constexpr const char* kWorkerContainerName = "worker";

// The launcher's command before the template's: every GPU of the group is a rank (slots =
// GPUs per node), and the template's env and the rendezvous contract reach every rank.
std::vector<std::string> mpirun_prefix(const JobRequest& r, int slots_per_worker);

// For groups of 2 or more nodes of an MPI-style template.
core::Value build_mpijob(const JobRequest& r);

}  // namespace gpufleet::certify
