#include "certify/workload_job.h"
#include "core/text.h"

#include "kube/api/meta.h"
#include "kube/api/objects.h"
#include "kube/api/resource.h"

namespace gpufleet::certify {
namespace {

core::Value common_labels(const JobRequest& r) {
  core::Value l = core::Value::map();
  l[kRunLabel] = r.run_uid;
  l[kCategoryLabel] = std::to_string(r.category);
  l[kJobLabel] = r.name;
  l["app.kubernetes.io/part-of"] = "gpufleet";
  l["app.kubernetes.io/component"] = "certify-workload";
  return l;
}

}  // namespace

std::string job_name(std::string_view owner_name, std::string_view owner_uid, int category,
                     std::uint32_t group, int attempt) {
  std::string base(owner_name.substr(0, 30));
  while (!base.empty() && (base.back() == '-' || base.back() == '.')) base.pop_back();
  for (char& c : base)
    if (c == '.') c = '-';
  return base + "-" + std::string(owner_uid.substr(0, 5)) + "-" + std::to_string(category) + "-" +
         std::to_string(group) + (attempt > 1 ? "-a" + std::to_string(attempt) : "");
}

std::vector<std::string> with_iterations(std::vector<std::string> command, int iterations) {
  if (iterations <= 0) return command;
  for (std::size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == "-n" || command[i] == "--iters" || command[i] == "--max-steps") {
      command[i + 1] = std::to_string(iterations);
    }
  }
  return command;
}

core::Value workload_labels(const JobRequest& r) { return common_labels(r); }

core::Value workload_object(const JobRequest& r, std::string_view api_version,
                            std::string_view kind) {
  core::Value obj;
  obj["apiVersion"] = std::string(api_version);
  obj["kind"] = std::string(kind);
  obj["metadata"]["name"] = r.name;
  obj["metadata"]["namespace"] = r.ns;
  obj["metadata"]["labels"] = common_labels(r);
  obj["metadata"]["ownerReferences"].push_back(r.owner_ref);
  return obj;
}

void add_env(core::Value& container, const std::string& name, const std::string& value) {
  core::Value e;
  e["name"] = name;
  e["value"] = value;
  container["env"].push_back(std::move(e));
}

core::Value workload_container(const JobRequest& r, const std::vector<std::string>& launch) {
  const CategoryPlan& plan = *r.plan;
  WorkloadTemplate w = plan.workload.for_family(r.gpu_family);
  core::Value container;
  container["name"] = kContainerName;
  container["image"] = w.image;
  std::vector<std::string> command = launch;
  for (auto& a : with_iterations(w.command, plan.iterations)) command.push_back(std::move(a));
  if (!command.empty()) {
    core::Value cmd = core::Value::list();
    for (const auto& a : command) cmd.push_back(a);
    container["command"] = std::move(cmd);
  }
  if (!plan.args.empty()) {
    core::Value args = core::Value::list();
    for (const auto& a : plan.args) args.push_back(a);
    container["args"] = std::move(args);
  }
  container["env"] = core::Value::list();
  for (const auto& [k, v] : w.env) add_env(container, k, v);
  // The rendezvous contract of multi-node workloads (docs/certify.md "Launching").
  add_env(container, "GPUFLEET_RANKS", std::to_string(r.nodes.size()));
  add_env(container, "GPUFLEET_NODES", core::join(r.nodes, ","));
  // A crashed workload still says why: the log tail becomes the termination message.
  container["terminationMessagePolicy"] = "FallbackToLogsOnError";
  if (!plan.result_file.empty()) container["terminationMessagePath"] = plan.result_file;
  return container;
}

void request_gpus(core::Value& container, int gpus_per_node) {
  if (gpus_per_node > 0)
    container["resources"]["limits"]["nvidia.com/gpu"] = std::to_string(gpus_per_node);
}

core::Value workload_tolerations(const JobRequest& r) {
  core::Value tolerations = r.tolerations.is_list() ? r.tolerations : core::Value::list();
  if (r.tolerate_unschedulable) {
    core::Value t;
    t["key"] = "node.kubernetes.io/unschedulable";
    t["operator"] = "Exists";
    t["effect"] = "NoSchedule";
    tolerations.push_back(std::move(t));
  }
  return tolerations;
}

void place_on_group(core::Value& pod_spec, const JobRequest& r, const core::Value& peers) {
  // matchFields takes one name only: the hostname label names the node (kubelet sets it).
  core::Value term;
  core::Value expr;
  expr["key"] = "kubernetes.io/hostname";
  expr["operator"] = "In";
  for (const auto& node : r.nodes) expr["values"].push_back(node);
  term["matchExpressions"].push_back(std::move(expr));
  pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
          ["nodeSelectorTerms"]
              .push_back(std::move(term));
  core::Value anti;
  anti["labelSelector"]["matchLabels"] = peers;
  anti["topologyKey"] = "kubernetes.io/hostname";
  pod_spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      .push_back(std::move(anti));
}

core::Value build_job(const JobRequest& r) {
  const CategoryPlan& plan = *r.plan;
  const auto n = static_cast<std::int64_t>(r.nodes.size());

  core::Value container = workload_container(r, {});
  if (n > 1) add_env(container, "GPUFLEET_RENDEZVOUS", r.name + "-0." + r.name);
  request_gpus(container, r.gpus_per_node);

  core::Value pod;
  pod["metadata"]["labels"] = common_labels(r);
  // The simulator's NCCL and training models read the group from here (docs/sim.md); a
  // real cluster ignores it.
  pod["metadata"]["annotations"]["sim.gpufleet.io/nccl-hosts"] = core::join(r.nodes, ",");
  pod["metadata"]["annotations"][kAttemptAnnotation] = std::to_string(r.attempt);
  core::Value& spec = pod["spec"];
  spec["restartPolicy"] = "Never";
  spec["containers"].push_back(std::move(container));
  core::Value tolerations = workload_tolerations(r);
  if (!tolerations.as_list().empty()) spec["tolerations"] = std::move(tolerations);
  if (n == 1) {
    spec["nodeName"] = r.nodes.front();  // one node: no scheduling decision to make
  } else {
    spec["subdomain"] = r.name;
    core::Value peers;
    peers[kJobLabel] = r.name;
    place_on_group(spec, r, peers);
  }

  core::Value job = workload_object(r, "batch/v1", "Job");
  job["spec"]["completions"] = n;
  job["spec"]["parallelism"] = n;
  job["spec"]["completionMode"] = "Indexed";
  // Retries are the controller's (a rerun is a new group); a failed rank fails the group.
  job["spec"]["backoffLimit"] = 0;
  job["spec"]["activeDeadlineSeconds"] = static_cast<std::int64_t>(plan.timeout.count());
  job["spec"]["template"] = std::move(pod);
  return job;
}

WorkloadProgress progress_of(const core::Value& workload) {
  WorkloadProgress p;
  const bool mpijob = workload.get_string({"kind"}) == "MPIJob";
  auto true_condition = [&](const char* type) -> const core::Value* {
    const core::Value* c = kube::find_condition(workload, type);
    return c != nullptr && c->get_string({"status"}) == "True" ? c : nullptr;
  };
  const core::Value* done = true_condition(mpijob ? "Succeeded" : "Complete");
  if (const core::Value* failed = true_condition("Failed")) {
    done = failed;
    p.failure_reason = std::string(failed->get_string({"reason"}));
    p.failure_message = std::string(failed->get_string({"message"}));
  }
  if (done != nullptr) {
    p.finished = true;
    p.finished_at = kube::parse_rfc3339(done->get_string({"lastTransitionTime"}));
  }
  if (mpijob) {
    const core::Value* cs = workload.get({"status", "conditions"});
    p.acknowledged = cs != nullptr && cs->is_list() && !cs->as_list().empty();
  }
  return p;
}

core::Value build_service(const JobRequest& r) {
  core::Value svc;
  svc["apiVersion"] = "v1";
  svc["kind"] = "Service";
  svc["metadata"]["name"] = r.name;
  svc["metadata"]["namespace"] = r.ns;
  svc["metadata"]["labels"] = common_labels(r);
  svc["metadata"]["ownerReferences"].push_back(r.owner_ref);
  svc["spec"]["clusterIP"] = "None";
  svc["spec"]["publishNotReadyAddresses"] = true;
  svc["spec"]["selector"][kJobLabel] = r.name;
  return svc;
}

}  // namespace gpufleet::certify
