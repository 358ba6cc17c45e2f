#include "certify/mpijob.h"

#include <algorithm>

#include "core/errors.h"
#include "core/text.h"

namespace gpufleet::certify {

kube::ResourceId mpijobs() { return {"kubeflow.org", "v2beta1", "mpijobs", true}; }

LauncherChoice parse_launcher_choice(std::string_view value) {
  if (value == "auto") return LauncherChoice::Auto;
  if (value == "job") return LauncherChoice::Job;
  if (value == "mpijob") return LauncherChoice::MpiJob;
  throw core::InvalidInput("setting certify.launcher: value \"" + std::string(value) +
                           "\" is not one of auto, job, mpijob (auto: an MPIJob when the "
                           "cluster serves kubeflow.org/v2beta1 MPIJob, else an indexed Job)");
}

std::vector<std::string> mpirun_prefix(const JobRequest& r, int slots_per_worker) {
  const int ranks = static_cast<int>(r.nodes.size()) * slots_per_worker;
  // -np, not -n: nccl-tests read -n as their iteration count (with_iterations rewrites it).
  std::vector<std::string> cmd = {
      "mpirun", "--allow-run-as-root", "-np", std::to_string(ranks), "-bind-to", "none", "-map-by",
      "slot"};
  // OpenMPI passes only the variables named with -x on to the ranks.
  WorkloadTemplate w = r.plan->workload.for_family(r.gpu_family);
  std::vector<std::string> names;
  for (const auto& [k, v] : w.env) names.push_back(k);
  names.insert(names.end(), {"GPUFLEET_RANKS", "GPUFLEET_NODES"});
  for (const auto& n : names) cmd.insert(cmd.end(), {"-x", n});
  return cmd;
}

core::Value build_mpijob(const JobRequest& r) {
  const CategoryPlan& plan = *r.plan;
  const int slots = std::max(1, r.gpus_per_node);
  core::Value tolerations = workload_tolerations(r);

  auto pod_template = [&](const char* role) {
    core::Value pod;
    pod["metadata"]["labels"] = workload_labels(r);
    pod["metadata"]["labels"][kMpiRoleLabel] = role;
    pod["metadata"]["annotations"][kAttemptAnnotation] = std::to_string(r.attempt);
    if (!tolerations.as_list().empty()) pod["spec"]["tolerations"] = tolerations;
    pod["spec"]["restartPolicy"] = "Never";
    return pod;
  };

  // The launcher asks for no GPU: mpirun starts the ranks in the workers over ssh.
  core::Value launcher = pod_template("launcher");
  // The simulator's NCCL and training models read the group from here (as on the Job's pods).
  launcher["metadata"]["annotations"]["sim.gpufleet.io/nccl-hosts"] = core::join(r.nodes, ",");
  launcher["spec"]["containers"].push_back(workload_container(r, mpirun_prefix(r, slots)));

  // Workers serve sshd for the launcher's mpirun (the mpi-operator mounts the keys and the
  // hostfile); the simulator runs them as the service they are (its behaviour for the image
  // would run the benchmark itself).
  core::Value worker = pod_template("worker");
  worker["metadata"]["annotations"]["sim.gpufleet.io/behaviour"] = "service";
  core::Value wc;
  wc["name"] = kWorkerContainerName;
  wc["image"] = plan.workload.for_family(r.gpu_family).image;
  wc["command"] = core::Value::list();
  for (const char* a : {"/usr/sbin/sshd", "-De"}) wc["command"].push_back(a);
  request_gpus(wc, r.gpus_per_node);
  worker["spec"]["containers"].push_back(std::move(wc));
  core::Value peers;
  peers[kJobLabel] = r.name;
  peers[kMpiRoleLabel] = "worker";
  place_on_group(worker["spec"], r, peers);

  core::Value job = workload_object(r, mpijobs().api_version(), "MPIJob");
  core::Value& spec = job["spec"];
  spec["slotsPerWorker"] = static_cast<std::int64_t>(slots);
  spec["mpiImplementation"] = "OpenMPI";
  // mpirun started before every worker's sshd answers fails the group for nothing (operator
  // v0.5+; an older one drops the field and starts the launcher at once).
  spec["launcherCreationPolicy"] = "WaitForWorkersReady";
  // As the indexed Job: retries are the controller's, the deadline is the category's, and
  // the workers go as soon as the launcher is done.
  spec["runPolicy"]["backoffLimit"] = 0;
  spec["runPolicy"]["activeDeadlineSeconds"] = static_cast<std::int64_t>(plan.timeout.count());
  spec["runPolicy"]["cleanPodPolicy"] = "Running";
  core::Value& replicas = spec["mpiReplicaSpecs"];
  replicas["Launcher"]["replicas"] = 1;
  replicas["Launcher"]["restartPolicy"] = "Never";
  replicas["Launcher"]["template"] = std::move(launcher);
  replicas["Worker"]["replicas"] = static_cast<std::int64_t>(r.nodes.size());
  replicas["Worker"]["restartPolicy"] = "Never";
  replicas["Worker"]["template"] = std::move(worker);
  return job;
}

}  // namespace gpufleet::certify
