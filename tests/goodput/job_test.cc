// Jobs from real Pod JSON: gang labels and their precedence, GPU counting, states, the
// checkpoint contract and the errors for bad fields.
#include "goodput/job.h"

#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::goodput {
namespace {

// A pod as the API server returns it; `labels`, `containers`, `status` are JSON fragments.
core::Value pod(const std::string& name, const std::string& labels, const std::string& containers,
                const std::string& status, const std::string& extra_meta = "",
                const std::string& extra_spec = "") {
  return core::parse_json(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                          R"(","namespace":"train","uid":"u-)" + name +
                          R"(","creationTimestamp":"2025-03-01T10:00:00Z","labels":)" + labels +
                          extra_meta + R"(},"spec":{"nodeName":"node-)" + name +
                          R"(","restartPolicy":"Never","containers":)" + containers + extra_spec +
                          R"(},"status":)" + status + "}");
}

const std::string kGpu8 =
    R"([{"name":"trainer","image":"nvcr.io/nvidia/pytorch:24.05-py3","resources":{"limits":{"nvidia.com/gpu":"8","cpu":"96"},"requests":{"nvidia.com/gpu":"8","cpu":"90"}}}])";
const std::string kRunning =
    R"({"phase":"Running","conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}],"containerStatuses":[{"name":"trainer","ready":true,"restartCount":0,"state":{"running":{"startedAt":"2025-03-01T10:01:00Z"}}}]})";
const std::string kPending =
    R"({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable"}]})";
const std::string kNotReady =
    R"({"phase":"Running","conditions":[{"type":"Ready","status":"False"}],"containerStatuses":[{"name":"trainer","ready":false,"restartCount":0}]})";

TEST(GoodputJob, EachGangLabelKeyGroupsItsPods) {
  for (const std::string key : {"goodput.gpufleet.io/job", "jobset.sigs.k8s.io/jobset-name",
                                "training.kubeflow.org/job-name", "batch.kubernetes.io/job-name"}) {
    const std::string labels = R"({")" + key + R"(":"llama"})";
    auto jobs = group_jobs({pod("a", labels, kGpu8, kRunning), pod("b", labels, kGpu8, kRunning)},
                           GroupOptions{});
    ASSERT_EQ(jobs.size(), 1u) << key;
    EXPECT_EQ(jobs[0].key.label, key);
    EXPECT_EQ(jobs[0].key.name, "llama");
    EXPECT_EQ(jobs[0].key.display(), "train/llama");
    EXPECT_EQ(jobs[0].pods, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(jobs[0].nodes, (std::vector<std::string>{"node-a", "node-b"}));
    EXPECT_EQ(jobs[0].gpus, 16);
    EXPECT_EQ(jobs[0].state, JobState::Running);
  }
}

// certify's test pods and hostpkg's stage pods ask for GPUs and carry a batch Job's label, but
// they are gpufleet's own work, not a user's job.
TEST(GoodputJob, GpufleetsOwnWorkloadsAreNoJobs) {
  auto jobs = group_jobs(
      {pod("cert-0",
           R"({"batch.kubernetes.io/job-name":"demo-h100-1","gpufleet.io/certify-run":"u1"})",
           kGpu8, kRunning),
       pod("hp-1", R"({"hostpkg.gpufleet.io/stage":"apply"})", kGpu8, kRunning),
       pod("a", R"({"batch.kubernetes.io/job-name":"llama"})", kGpu8, kRunning)},
      GroupOptions{});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].key.name, "llama");
  GroupOptions all;
  all.excluded_label_keys.clear();
  EXPECT_EQ(group_jobs({pod("cert-0", R"({"gpufleet.io/certify-run":"u1"})", kGpu8, kRunning)}, all)
                .size(),
            1u);
}

TEST(GoodputJob, AJobSetWinsOverItsChildJobs) {
  // A JobSet's pods carry the JobSet label and their child Job's: one job, not two.
  const std::string w0 =
      R"({"jobset.sigs.k8s.io/jobset-name":"gpt","jobset.sigs.k8s.io/replicatedjob-name":"workers","batch.kubernetes.io/job-name":"gpt-workers-0","job-name":"gpt-workers-0"})";
  const std::string w1 =
      R"({"jobset.sigs.k8s.io/jobset-name":"gpt","jobset.sigs.k8s.io/replicatedjob-name":"workers","batch.kubernetes.io/job-name":"gpt-workers-1","job-name":"gpt-workers-1"})";
  auto jobs =
      group_jobs({pod("w0", w0, kGpu8, kRunning), pod("w1", w1, kGpu8, kRunning)}, GroupOptions{});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].key.label, "jobset.sigs.k8s.io/jobset-name");
  EXPECT_EQ(jobs[0].key.name, "gpt");
  // The key order decides: with the batch label first, two jobs.
  GroupOptions batch_first;
  batch_first.gang_label_keys = {"batch.kubernetes.io/job-name", "jobset.sigs.k8s.io/jobset-name"};
  EXPECT_EQ(
      group_jobs({pod("w0", w0, kGpu8, kRunning), pod("w1", w1, kGpu8, kRunning)}, batch_first)
          .size(),
      2u);
}

TEST(GoodputJob, SameNameUnderDifferentLabelsOrNamespacesAreDifferentJobs) {
  auto jobs = group_jobs({pod("a", R"({"batch.kubernetes.io/job-name":"x"})", kGpu8, kRunning),
                          pod("b", R"({"training.kubeflow.org/job-name":"x"})", kGpu8, kRunning)},
                         GroupOptions{});
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_NE(jobs[0].key, jobs[1].key);
}

TEST(GoodputJob, AGpuPodWithoutGangIsItsOwnJobAndCpuPodsAreNone) {
  const std::string cpu =
      R"([{"name":"web","image":"nginx","resources":{"requests":{"cpu":"1"}}}])";
  auto jobs = group_jobs({pod("solo", "{}", kGpu8, kRunning), pod("web", "{}", cpu, kRunning),
                          pod("web2", R"({"app":"web"})", cpu, kRunning)},
                         GroupOptions{});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].key.label, "");
  EXPECT_EQ(jobs[0].key.name, "solo");
  EXPECT_EQ(jobs[0].gpus, 8);
}

TEST(GoodputJob, GpusFollowTheEffectiveRequestRule) {
  // Two containers (4 + 2 limits; requests only on the second), an init container of 8:
  // max(8, 6) = 8.
  const std::string containers =
      R"([{"name":"a","resources":{"limits":{"nvidia.com/gpu":4}}},{"name":"b","resources":{"requests":{"nvidia.com/gpu":"2"}}}])";
  EXPECT_EQ(
      pod_gpus(pod(
          "p", "{}", containers, kRunning, "",
          R"(,"initContainers":[{"name":"warm","resources":{"limits":{"nvidia.com/gpu":"8"}}}])")),
      8);
  // A small init container: the containers' sum.
  EXPECT_EQ(
      pod_gpus(pod(
          "p", "{}", containers, kRunning, "",
          R"(,"initContainers":[{"name":"warm","resources":{"limits":{"nvidia.com/gpu":"1"}}}])")),
      6);
  // A sidecar (restartPolicy Always) of 1 runs beside the containers: 6 + 1; the init
  // container after it runs beside it: 1 + 7 = 8, the larger.
  EXPECT_EQ(
      pod_gpus(pod(
          "p", "{}", containers, kRunning, "",
          R"(,"initContainers":[{"name":"side","restartPolicy":"Always","resources":{"limits":{"nvidia.com/gpu":"1"}}},{"name":"warm","resources":{"limits":{"nvidia.com/gpu":"7"}}}])")),
      8);
  // Limits win over requests.
  EXPECT_EQ(
      pod_gpus(pod(
          "p", "{}",
          R"([{"name":"a","resources":{"limits":{"nvidia.com/gpu":"2"},"requests":{"nvidia.com/gpu":"1"}}}])",
          kRunning)),
      2);
  EXPECT_EQ(pod_gpus(pod("p", "{}", R"([{"name":"a"}])", kRunning)), 0);
}

TEST(GoodputJob, BadGpuQuantitiesNameThePodFieldAndValue) {
  try {
    (void)pod_gpus(
        pod("p", "{}",
            R"([{"name":"a"},{"name":"b","resources":{"limits":{"nvidia.com/gpu":"eight"}}}])",
            kRunning));
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "pod \"train/p\": spec.containers[1].resources.limits[\"nvidia.com/gpu\"]: value "
              "\"eight\" is not a whole number of GPUs (write a non-negative whole number, e.g. "
              "\"8\")");
  }
  for (const std::string bad : {R"("1.5")", R"("-1")", R"("500m")", "true"}) {
    EXPECT_THROW(
        (void)pod_gpus(pod(
            "p", "{}", R"([{"name":"a","resources":{"limits":{"nvidia.com/gpu":)" + bad + "}}}]",
            kRunning)),
        core::InvalidInput)
        << bad;
  }
  EXPECT_EQ(
      pod_gpus(pod("p", "{}", R"([{"name":"a","resources":{"limits":{"nvidia.com/gpu":"1k"}}}])",
                   kRunning)),
      1000);
  // In a group the error stays with the job and the rest is still counted.
  auto jobs =
      group_jobs({pod("a", R"({"goodput.gpufleet.io/job":"j"})", kGpu8, kRunning),
                  pod("b", R"({"goodput.gpufleet.io/job":"j"})",
                      R"([{"name":"a","resources":{"limits":{"nvidia.com/gpu":"x"}}}])", kRunning)},
                 GroupOptions{});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].gpus, 8);
  ASSERT_EQ(jobs[0].errors.size(), 1u);
  EXPECT_NE(jobs[0].errors[0].find("pod \"train/b\""), std::string::npos);
}

TEST(GoodputJob, States) {
  const std::string l = R"({"goodput.gpufleet.io/job":"j"})";
  auto state = [&](std::vector<core::Value> pods) {
    auto jobs = group_jobs(pods, GroupOptions{});
    EXPECT_EQ(jobs.size(), 1u);
    return jobs.empty() ? JobState::Pending : jobs[0].state;
  };
  EXPECT_EQ(state({pod("a", l, kGpu8, kRunning), pod("b", l, kGpu8, kRunning)}), JobState::Running);
  EXPECT_EQ(state({pod("a", l, kGpu8, kPending), pod("b", l, kGpu8, kPending)}), JobState::Pending);
  // Not Ready yet, never ran: Pending... but a Running pod beside it has run.
  EXPECT_EQ(state({pod("a", l, kGpu8, kRunning), pod("b", l, kGpu8, kPending)}),
            JobState::Interrupted);
  EXPECT_EQ(state({pod("a", l, kGpu8, kRunning), pod("b", l, kGpu8, kNotReady)}),
            JobState::Interrupted);
  // A pod being evicted (deletionTimestamp) no longer counts as running.
  EXPECT_EQ(
      state(
          {pod("a", l, kGpu8, kRunning),
           pod("b", l, kGpu8, kRunning,
               R"(,"deletionTimestamp":"2025-03-01T11:00:00Z","deletionGracePeriodSeconds":30)")}),
      JobState::Interrupted);
  // A restarted container shows the job ran before.
  EXPECT_EQ(
      state({pod(
          "a", l, kGpu8,
          R"({"phase":"Pending","containerStatuses":[{"name":"trainer","restartCount":2}]})")}),
      JobState::Interrupted);
  const std::string done = R"({"phase":"Succeeded"})";
  const std::string failed = R"({"phase":"Failed"})";
  EXPECT_EQ(state({pod("a", l, kGpu8, done), pod("b", l, kGpu8, done)}), JobState::Succeeded);
  EXPECT_EQ(state({pod("a", l, kGpu8, done), pod("b", l, kGpu8, failed)}), JobState::Failed);
  // A failed pod of an earlier attempt (created before the successful one) lingers.
  core::Value early = pod("old", l, kGpu8, failed);
  early["metadata"]["creationTimestamp"] = "2025-03-01T09:00:00Z";
  EXPECT_EQ(state({early, pod("a", l, kGpu8, done)}), JobState::Succeeded);
  // Finished pods beside running ones: the live ones decide.
  EXPECT_EQ(state({early, pod("a", l, kGpu8, kRunning)}), JobState::Running);
  // The whole gang evicted at once (a job-aware drain): failed while being deleted, the pods
  // are replaced by the job's controller, so the job is interrupted, not over.
  const std::string deleting = R"(,"deletionTimestamp":"2025-03-01T11:00:00Z")";
  EXPECT_EQ(state({pod("a", l, kGpu8, failed, deleting), pod("b", l, kGpu8, failed, deleting)}),
            JobState::Interrupted);
  EXPECT_EQ(state({pod("a", l, kGpu8, failed, deleting), pod("b", l, kGpu8, failed)}),
            JobState::Interrupted);
  EXPECT_EQ(state({pod("a", l, kGpu8, failed), pod("b", l, kGpu8, failed)}), JobState::Failed);
}

TEST(GoodputJob, LiveGpusAndNodes) {
  const std::string l = R"({"goodput.gpufleet.io/job":"j"})";
  auto jobs = group_jobs(
      {pod("a", l, kGpu8, R"({"phase":"Failed"})"), pod("b", l, kGpu8, kRunning)}, GroupOptions{});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].gpus, 8);
  EXPECT_EQ(jobs[0].nodes, (std::vector<std::string>{"node-b"}));
  EXPECT_EQ(jobs[0].pods, (std::vector<std::string>{"a", "b"}));
}

TEST(GoodputJob, CheckpointContract) {
  const std::string l = R"({"goodput.gpufleet.io/job":"j"})";
  auto with = [&](const std::string& name, const std::string& annotations) {
    return pod(name, l, kGpu8, kRunning, R"(,"annotations":)" + annotations);
  };
  auto jobs = group_jobs(
      {with(
           "a",
           R"({"goodput.gpufleet.io/last-checkpoint":"2025-03-01T10:30:00Z","goodput.gpufleet.io/step-time-seconds":"2.5"})"),
       with("b", R"({"goodput.gpufleet.io/last-checkpoint":"2025-03-01T10:20:00+00:00"})")},
      GroupOptions{});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(jobs[0].reports_checkpoints);
  ASSERT_TRUE(jobs[0].last_checkpoint);
  EXPECT_EQ(*jobs[0].last_checkpoint, 1740825000);  // 2025-03-01T10:30:00Z, the newest
  ASSERT_TRUE(jobs[0].step_time_seconds);
  EXPECT_DOUBLE_EQ(*jobs[0].step_time_seconds, 2.5);
  EXPECT_TRUE(jobs[0].errors.empty());

  jobs =
      group_jobs({with("a", R"({"goodput.gpufleet.io/last-checkpoint":"none"})")}, GroupOptions{});
  EXPECT_TRUE(jobs[0].reports_checkpoints);
  EXPECT_FALSE(jobs[0].last_checkpoint);
  jobs = group_jobs({pod("a", l, kGpu8, kRunning)}, GroupOptions{});
  EXPECT_FALSE(jobs[0].reports_checkpoints);

  jobs = group_jobs(
      {with(
          "a",
          R"({"goodput.gpufleet.io/last-checkpoint":"yesterday","goodput.gpufleet.io/step-time-seconds":"-1"})")},
      GroupOptions{});
  ASSERT_EQ(jobs[0].errors.size(), 2u);
  EXPECT_EQ(jobs[0].errors[0],
            "pod \"train/a\": metadata.annotations[\"goodput.gpufleet.io/last-checkpoint\"]: "
            "value \"yesterday\" is not an RFC 3339 time (write the time of the last completed "
            "checkpoint, e.g. \"2025-03-01T12:00:00Z\", or \"none\")");
  EXPECT_NE(jobs[0].errors[1].find("step-time-seconds\"]: value \"-1\" is not a positive number"),
            std::string::npos)
      << jobs[0].errors[1];
  EXPECT_FALSE(jobs[0].last_checkpoint);
}

TEST(GoodputJob, StateNamesRoundTrip) {
  for (JobState s : {JobState::Pending, JobState::Running, JobState::Interrupted,
                     JobState::Succeeded, JobState::Failed})
    EXPECT_EQ(parse_state(state_name(s)), s);
  EXPECT_FALSE(parse_state("running"));
}

}  // namespace
}  // namespace gpufleet::goodput
