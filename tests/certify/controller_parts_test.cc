// The Kubernetes-free parts of the certify controller: reading a spec (thresholds that do
// not compile named with their metric and expression), choosing nodes (cordons, taints and
// tolerations, missing names), the Job and Service of a group test, the MPIJob of one and the
// progress read from either, iteration overrides, and the stored progress of a category
// round-tripping through JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certify/controller.h"
#include "certify/mpijob.h"
#include "certify/node_selection.h"
#include "certify/run_spec.h"
#include "certify/run_state.h"
#include "certify/workload_job.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/json.h"
#include "core/yaml.h"
#include "kube/client.h"

namespace gpufleet::certify {
namespace {

using ::testing::HasSubstr;

kube::ObjectPtr node(const std::string& yaml) {
  return std::make_shared<const core::Value>(core::parse_yaml(yaml));
}

TEST(RunSpec, ReadsCategoriesAndNamesABadExpression) {
  RunSpec rs = parse_certification_spec(core::parse_yaml(R"(
targets: {nodeNames: [a, b]}
categories:
  - {name: diagnostics/dcgm-r2}
  - {name: communication/nccl-all-reduce, scale: diagnose, timeout: 90s, iterations: 5,
     thresholds: {busBandwidthGBps: "value >= 300.0"}}
)"),
                                        Catalog::builtin());
  ASSERT_EQ(rs.categories.size(), 2u);
  EXPECT_EQ(rs.categories[0].scale, Scale::PerNode);
  EXPECT_EQ(rs.categories[1].scale, Scale::Diagnose);
  EXPECT_EQ(rs.categories[1].timeout.count(), 90);
  EXPECT_EQ(rs.categories[1].thresholds.size(), 1u);
  try {
    parse_certification_spec(core::parse_yaml(R"(
targets: {nodeNames: [a]}
categories: [{name: diagnostics/dcgm-r1}, {name: diagnostics/dcgm-r2, thresholds: {dcgmWarnResults: "value <="}}]
)"),
                             Catalog::builtin());
    ADD_FAILURE() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.reason(), "InvalidThreshold");
    EXPECT_THAT(e.what(), HasSubstr("spec.categories[1].thresholds.dcgmWarnResults"));
    EXPECT_THAT(e.what(), HasSubstr("\"value <=\""));
  }
  RunSpec wr = parse_workload_run_spec(core::parse_yaml(
      "{targets: {nodeNames: [a]}, image: x, args: [--n, '1'], resultFile: /r.json}"));
  EXPECT_EQ(wr.categories[0].workload.output, OutputKind::Result);
  EXPECT_EQ(wr.categories[0].result_file, "/r.json");
}

TEST(NodeSelection, ExcludesCordonedNotReadyUntoleratedAndMissingNodes) {
  auto ready = [](const std::string& name, const std::string& extra) {
    return node("metadata: {name: " + name +
                ", labels: {pool: a, nvidia.com/gpu.count: '8'}}\nspec: {" + extra +
                "}\nstatus: {allocatable: {nvidia.com/gpu: '8'}, conditions: [{type: Ready, "
                "status: 'True'}]}");
  };
  std::vector<kube::ObjectPtr> nodes = {
      ready("n1", ""),
      ready("n2", "unschedulable: true"),
      ready("n3", "taints: [{key: gpu, value: present, effect: NoSchedule}]"),
      ready("n4", "taints: [{key: maint, effect: NoExecute}]"),
      ready("n5", "taints: [{key: soft, effect: PreferNoSchedule}]"),
      node("metadata: {name: n6, labels: {pool: a}}\nstatus: {conditions: [{type: Ready, "
           "status: 'False'}]}"),
      node("metadata: {name: other, labels: {pool: b}}"),
  };
  Targets t;
  t.node_selector = core::parse_yaml("{matchLabels: {pool: a}}");
  t.node_names = {"ghost"};
  t.tolerations = core::parse_yaml("[{key: gpu, operator: Equal, value: present}]");
  Selection s = select_nodes(t, nodes);
  std::vector<std::string> names;
  for (const auto& n : s.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"n1", "n3", "n5"}));
  std::map<std::string, std::string> ex;
  for (const auto& e : s.excluded) ex[e.node] = e.reason;
  EXPECT_EQ(ex,
            (std::map<std::string, std::string>{
                {"ghost", "NotFound"}, {"n2", "Cordoned"}, {"n4", "Tainted"}, {"n6", "NotReady"}}));
  EXPECT_EQ(s.nodes[0].gpu_count, 8);
  EXPECT_TRUE(tolerates(core::parse_yaml("[{operator: Exists}]"), {"any", "", "NoExecute"}));
  EXPECT_FALSE(tolerates(core::parse_yaml("[{key: a, operator: Exists, effect: NoSchedule}]"),
                         {"a", "", "NoExecute"}));
}

// An all-reduce group test of nodes a, b, c with 8 GPUs each, 3 iterations, 2 minutes.
RunSpec all_reduce_spec() {
  return parse_certification_spec(
      core::parse_yaml("{targets: {nodeNames: [a]}, categories: [{name: "
                       "communication/nccl-all-reduce, iterations: 3, timeout: 2m}]}"),
      Catalog::builtin());
}
JobRequest three_node_request(const RunSpec& rs, std::string name) {
  JobRequest r;
  r.ns = "ns";
  r.name = std::move(name);
  r.run_uid = "abcdef12";
  r.nodes = {"a", "b", "c"};
  r.plan = &rs.categories[0];
  r.gpus_per_node = 8;
  return r;
}

TEST(WorkloadJob, GroupsBecomeIndexedJobsWithAServiceAndOneNodeJobsArePinned) {
  RunSpec rs = all_reduce_spec();
  JobRequest r = three_node_request(
      rs, job_name("my.cert-with-a-long-name-that-goes-on-and-on", "abcdef12", 0, 7));
  EXPECT_EQ(r.name, "my-cert-with-a-long-name-that-abcde-0-7");
  r.tolerate_unschedulable = true;
  core::Value job = build_job(r);
  EXPECT_EQ(job.get({"spec", "completions"})->as_int(), 3);
  EXPECT_EQ(job.get_string({"spec", "completionMode"}), "Indexed");
  EXPECT_EQ(job.get({"spec", "activeDeadlineSeconds"})->as_int(), 120);
  const core::Value& pod = *job.get({"spec", "template"});
  EXPECT_EQ(pod.get_string({"spec", "subdomain"}), r.name);
  EXPECT_EQ(pod.get_string({"metadata", "annotations", "sim.gpufleet.io/nccl-hosts"}), "a,b,c");
  std::string text = core::to_json(pod);
  EXPECT_THAT(text, HasSubstr("\"kubernetes.io/hostname\""));
  EXPECT_THAT(text, HasSubstr("node.kubernetes.io/unschedulable"));
  EXPECT_THAT(text, HasSubstr("\"-n\",\"3\""));
  EXPECT_THAT(text, HasSubstr("\"nvidia.com/gpu\":\"8\""));
  EXPECT_EQ(build_service(r).get_string({"spec", "clusterIP"}), "None");
  r.nodes = {"a"};
  EXPECT_EQ(build_job(r).get_string({"spec", "template", "spec", "nodeName"}), "a");
  EXPECT_EQ(with_iterations({"x", "--max-steps", "50"}, 10),
            (std::vector<std::string>{"x", "--max-steps", "10"}));
}

// The MPIJob of a group: one worker per node holding its GPUs, pinned like the indexed Job's
// pods; a launcher without GPUs running mpirun with one rank per GPU, the template's command
// (iterations replaced) after it, and the env passed on to the ranks.
TEST(WorkloadJob, MpiGroupsBecomeMpiJobsWithALauncherAndAWorkerPerNode) {
  RunSpec rs = all_reduce_spec();
  JobRequest r = three_node_request(rs, "cert-abcde-0-1");
  r.attempt = 2;
  core::Value owner;
  owner["kind"] = "Certification";
  owner["name"] = "cert";
  r.owner_ref = owner;
  core::Value m = build_mpijob(r);
  EXPECT_EQ(m.get_string({"apiVersion"}), "kubeflow.org/v2beta1");
  EXPECT_EQ(m.get_string({"kind"}), "MPIJob");
  EXPECT_EQ(m.get({"spec", "slotsPerWorker"})->as_int(), 8);
  EXPECT_EQ(m.get({"spec", "runPolicy", "activeDeadlineSeconds"})->as_int(), 120);
  EXPECT_EQ(m.get({"spec", "runPolicy", "backoffLimit"})->as_int(), 0);
  EXPECT_EQ(m.get_string({"spec", "launcherCreationPolicy"}), "WaitForWorkersReady");
  EXPECT_EQ((*m.get({"metadata", "ownerReferences"}))[0].get_string({"name"}), "cert");
  EXPECT_EQ(m.get_string({"metadata", "labels", kJobLabel}), r.name);

  const core::Value& workers = *m.get({"spec", "mpiReplicaSpecs", "Worker"});
  EXPECT_EQ(workers.get({"replicas"})->as_int(), 3);
  const core::Value& wpod = *workers.get({"template"});
  EXPECT_EQ(wpod.get_string({"metadata", "labels", kMpiRoleLabel}), "worker");
  EXPECT_EQ(wpod.get_string({"metadata", "annotations", kAttemptAnnotation}), "2");
  // The simulator runs a worker as the sshd service it is, not as the benchmark its image runs.
  EXPECT_EQ(wpod.get_string({"metadata", "annotations", "sim.gpufleet.io/behaviour"}), "service");
  std::string wtext = core::to_json(wpod);
  EXPECT_THAT(wtext, HasSubstr(R"("values":["a","b","c"])"));
  EXPECT_THAT(wtext, HasSubstr(R"("nvidia.com/gpu":"8")"));
  EXPECT_THAT(wtext, HasSubstr(R"("matchLabels":{"gpufleet.io/certify-job":"cert-abcde-0-1",)"
                               R"("gpufleet.io/certify-mpi-role":"worker"})"));
  EXPECT_EQ((*wpod.get({"spec", "containers"}))[0].get_string({"name"}), kWorkerContainerName);

  const core::Value& lpod = *m.get({"spec", "mpiReplicaSpecs", "Launcher", "template"});
  EXPECT_EQ(lpod.get_string({"metadata", "labels", kMpiRoleLabel}), "launcher");
  EXPECT_EQ(lpod.get_string({"metadata", "annotations", "sim.gpufleet.io/nccl-hosts"}), "a,b,c");
  const core::Value& lc = (*lpod.get({"spec", "containers"}))[0];
  EXPECT_EQ(lc.get_string({"name"}), kContainerName);
  EXPECT_EQ(lc.get({"resources"}), nullptr);  // the GPUs are the workers'
  std::vector<std::string> cmd;
  for (const auto& a : lc.get({"command"})->as_list()) cmd.push_back(a.as_string());
  ASSERT_GE(cmd.size(), 6U);
  EXPECT_EQ(cmd[0], "mpirun");
  EXPECT_EQ(cmd[2], "-np");
  EXPECT_EQ(cmd[3], "24");  // 3 nodes x 8 GPUs
  std::string ctext = core::to_json(*lc.get({"command"}));
  EXPECT_THAT(ctext, HasSubstr(R"("-x","NCCL_DEBUG")"));
  EXPECT_THAT(ctext, HasSubstr(R"("-x","GPUFLEET_NODES")"));
  EXPECT_THAT(ctext, HasSubstr(R"("all_reduce_perf")"));
  EXPECT_THAT(ctext, HasSubstr(R"("-n","3")"));  // the iterations, after the launcher's flags
  EXPECT_EQ(lc.get_string({"terminationMessagePolicy"}), "FallbackToLogsOnError");

  EXPECT_EQ(parse_launcher_choice("auto"), LauncherChoice::Auto);
  EXPECT_EQ(parse_launcher_choice("mpijob"), LauncherChoice::MpiJob);
  try {
    (void)parse_launcher_choice("MPIJob");
    ADD_FAILURE() << "an unknown launcher was accepted";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("certify.launcher"));
    EXPECT_THAT(e.what(), HasSubstr("\"MPIJob\""));
    EXPECT_THAT(e.what(), HasSubstr("auto, job, mpijob"));
  }
}

// Jobs finish with Complete or Failed, MPIJobs with Succeeded or Failed; an MPIJob without
// any condition has not been taken up by an operator yet.
TEST(WorkloadJob, ProgressIsReadFromJobAndMpiJobConditions) {
  WorkloadProgress running = progress_of(
      core::parse_yaml("{kind: Job, status: {conditions: [{type: Complete, status: 'False'}]}}"));
  EXPECT_FALSE(running.finished);
  EXPECT_TRUE(running.acknowledged);
  WorkloadProgress deadline = progress_of(core::parse_yaml(
      "{kind: Job, status: {conditions: [{type: Failed, status: 'True', reason: "
      "DeadlineExceeded, message: too long, lastTransitionTime: '2026-12-03T08:00:00Z'}]}}"));
  EXPECT_TRUE(deadline.finished);
  EXPECT_EQ(deadline.failure_reason, "DeadlineExceeded");
  EXPECT_EQ(deadline.failure_message, "too long");
  ASSERT_TRUE(deadline.finished_at.has_value());
  WorkloadProgress fresh = progress_of(core::parse_yaml("{kind: MPIJob, spec: {}}"));
  EXPECT_FALSE(fresh.finished);
  EXPECT_FALSE(fresh.acknowledged);
  WorkloadProgress mpi_running = progress_of(
      core::parse_yaml("{kind: MPIJob, status: {conditions: [{type: Created, status: 'True'}, "
                       "{type: Running, status: 'True'}]}}"));
  EXPECT_FALSE(mpi_running.finished);
  EXPECT_TRUE(mpi_running.acknowledged);
  WorkloadProgress done = progress_of(core::parse_yaml(
      "{kind: MPIJob, status: {conditions: [{type: Running, status: 'False'}, "
      "{type: Succeeded, status: 'True', lastTransitionTime: '2026-12-03T08:00:00Z'}]}}"));
  EXPECT_TRUE(done.finished);
  EXPECT_TRUE(done.failure_reason.empty());
  // A Job has no Succeeded condition: a Job is never read as an MPIJob.
  EXPECT_FALSE(
      progress_of(core::parse_yaml(
                      "{kind: Job, status: {conditions: [{type: Succeeded, status: 'True'}]}}"))
          .finished);
}

// Bad settings stop the controller at start-up with the setting, the value and the fix, before
// it talks to the API server (none listens here).
TEST(CertifySettings, BadLauncherOrGraceIsRefusedNamingTheSetting) {
  kube::ClientConfig cc;
  cc.server = "http://127.0.0.1:1";
  cc.allow_plain_http_loopback = true;
  kube::Client client(cc);
  auto refused = [&](std::map<std::string, std::string> settings) -> std::string {
    controller::Manager manager(client, controller::ManagerOptions{});
    controller::Context ctx;
    ctx.settings = std::move(settings);
    try {
      setup_certify(manager, ctx);
    } catch (const core::InvalidInput& e) {
      return e.what();
    }
    return "";
  };
  std::string e = refused({{"certify.launcher", "mpi-job"}});
  EXPECT_THAT(e, HasSubstr("certify.launcher"));
  EXPECT_THAT(e, HasSubstr("\"mpi-job\""));
  EXPECT_THAT(e, HasSubstr("auto, job, mpijob"));
  for (const char* bad : {"soon", "0s", "-5m", "500ms"}) {
    e = refused({{"certify.overdue-grace", bad}});
    EXPECT_THAT(e, HasSubstr("certify.overdue-grace")) << bad;
    EXPECT_THAT(e, HasSubstr(std::string("\"") + bad + "\"")) << bad;
    EXPECT_THAT(e, HasSubstr("at least 1s")) << bad;
  }
}

TEST(RunState, RoundTripsThroughJson) {
  CategoryState s;
  s.name = "communication/nccl-all-reduce";
  s.rounds = 2;
  s.groups.push_back(
      {1,
       1,
       "screen",
       {"a", "b"},
       GroupResult{false, "ThresholdViolated", "low", {{"busBandwidthGBps", 180.5}}, 1},
       1,
       {}});
  s.groups.push_back({2, 1, "screen", {"c", "d"}, std::nullopt, 1, {}});
  s.failed.push_back({"a", "ThresholdViolated", "low"});
  s.infrastructure.push_back({{"c", "d"}, "the link between c and d is faulty"});
  s.planner = core::parse_yaml("{x: 1}");
  CategoryState r = CategoryState::from_value(core::parse_json(core::to_json(s.to_value())));
  EXPECT_EQ(core::to_json(r.to_value()), core::to_json(s.to_value()));
  EXPECT_EQ(r.groups[0].result->metrics.at("busBandwidthGBps"), 180.5);
  EXPECT_FALSE(r.groups[1].result.has_value());
}

}  // namespace
}  // namespace gpufleet::certify
