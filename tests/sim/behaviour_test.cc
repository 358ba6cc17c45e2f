#include "sim/behaviour.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/text.h"
#include "core/yaml.h"
#include "sim/atomic_file.h"
#include "support/source_paths.h"

namespace gpufleet::sim {
namespace {

using ::testing::HasSubstr;

core::Value pod(const std::string& yaml) { return core::parse_yaml(yaml); }

TEST(Glob, Matches) {
  EXPECT_TRUE(core::glob_match("*nccl-test*", "ghcr.io/coreweave/nccl-tests:12.8"));
  EXPECT_TRUE(core::glob_match("busybox", "busybox"));
  EXPECT_FALSE(core::glob_match("busybox", "busybox:1.36"));
  EXPECT_TRUE(core::glob_match("busybox*", "busybox:1.36"));
  EXPECT_TRUE(core::glob_match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(core::glob_match("a*b*c", "aXXbYY"));
  EXPECT_TRUE(core::glob_match("*", ""));
}

TEST(BehaviourTable, DefaultsPickNcclServiceAndBatch) {
  BehaviourTable t = BehaviourTable::defaults();
  PodPlan nccl = t.plan(pod(R"(
metadata: {name: p}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: ghcr.io/coreweave/nccl-tests:2.17
    command: [all_reduce_perf, -b, 1M, -e, 1G, -f, "2"]
)"));
  EXPECT_EQ(nccl.behaviour, "nccl-tests");
  EXPECT_TRUE(nccl.nccl);
  EXPECT_EQ(nccl.nccl_config.min_bytes, 1u << 20);
  EXPECT_EQ(nccl.nccl_config.max_bytes, 1u << 30);
  EXPECT_FALSE(nccl.nccl_config.nccl_info);  // NCCL_DEBUG unset: no INFO lines
  PodPlan info = t.plan(pod(R"(
metadata: {name: p}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: ghcr.io/coreweave/nccl-tests:2.17
    command: [all_reduce_perf]
    env: [{name: NCCL_DEBUG, value: INFO}, {name: NCCL_DEBUG_SUBSYS, value: "INIT,NET"}]
)"));
  EXPECT_TRUE(info.nccl_config.nccl_info);

  PodPlan svc = t.plan(pod("spec: {containers: [{name: c, image: nginx}]}"));
  EXPECT_EQ(svc.behaviour, "service");  // restartPolicy defaults to Always
  EXPECT_FALSE(svc.duration_s.has_value());

  PodPlan job =
      t.plan(pod("spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}"));
  EXPECT_EQ(job.behaviour, "batch");
  EXPECT_EQ(job.duration_s, 3.0);
  EXPECT_EQ(job.exit_code, 0);
}

// certify's catalog images run the DCGM and training models, but only as run-to-completion
// pods: a dcgm-exporter DaemonSet stays a service.
TEST(BehaviourTable, DefaultsRunDcgmDiagnosticsAndTrainingForCertify) {
  BehaviourTable t = BehaviourTable::defaults();
  PodPlan dcgm = t.plan(pod(R"(
spec:
  restartPolicy: Never
  containers: [{name: workload, image: "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04",
                command: [dcgmi, diag, -r, "2", -j]}]
)"));
  EXPECT_EQ(dcgm.behaviour, "dcgm-diag");
  EXPECT_TRUE(dcgm.nccl);
  EXPECT_EQ(dcgm.generator, "dcgm");
  EXPECT_EQ(dcgm.generator_args, (std::vector<std::string>{"dcgmi", "diag", "-r", "2", "-j"}));
  // The image's tag picks the DCGM JSON layout (sim/dcgm_output.h).
  EXPECT_EQ(dcgm.generator_image, "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04");
  PodPlan nemo = t.plan(pod(R"(
spec:
  restartPolicy: Never
  containers: [{name: workload, image: "nvcr.io/nvidia/nemo:25.04",
                command: [python3, pretrain.py, --model, llm-8b, --max-steps, "10"]}]
)"));
  EXPECT_EQ(nemo.behaviour, "nemo-training");
  EXPECT_EQ(nemo.generator, "training");
  PodPlan exporter = t.plan(
      pod("spec: {containers: [{name: e, image: 'nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1'}]}"));
  EXPECT_EQ(exporter.behaviour, "service");
  EXPECT_FALSE(exporter.nccl);
}

TEST(BehaviourTable, UserTableAndAnnotationsScriptPods) {
  BehaviourTable t = BehaviourTable::parse(core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
behaviours:
- name: crash
  match: {image: "*crasher*", restartPolicy: Never}
  startDelay: 500ms
  duration: 2s
  exitCode: 3
  terminationMessage: "segfault in step 7"
  output: "step 1\nstep 7\n"
- name: labelled
  match: {annotations: {team: ml}}
  duration: forever
)"),
                                           "b.yaml");
  PodPlan crash =
      t.plan(pod("spec: {restartPolicy: Never, containers: [{name: c, image: x/crasher:1}]}"));
  EXPECT_EQ(crash.behaviour, "crash");
  EXPECT_DOUBLE_EQ(crash.start_delay_s, 0.5);
  EXPECT_EQ(crash.duration_s, 2.0);
  EXPECT_EQ(crash.exit_code, 3);
  EXPECT_EQ(crash.termination_message, "segfault in step 7");
  EXPECT_EQ(crash.output, "step 1\nstep 7\n");
  // Restart policy is part of the match.
  EXPECT_EQ(
      t.plan(pod("spec: {restartPolicy: Always, containers: [{name: c, image: x/crasher:1}]}"))
          .behaviour,
      "service");
  EXPECT_EQ(
      t.plan(pod("metadata: {annotations: {team: ml}}\nspec: {containers: [{name: c, image: y}]}"))
          .behaviour,
      "labelled");

  PodPlan scripted = t.plan(pod(R"(
metadata:
  annotations:
    sim.gpufleet.io/behaviour: crash
    sim.gpufleet.io/duration: 1m30s
    sim.gpufleet.io/exit-code: "0"
    sim.gpufleet.io/termination-message: all good
spec: {restartPolicy: Never, containers: [{name: c, image: anything}]}
)"));
  EXPECT_EQ(scripted.behaviour, "crash");
  EXPECT_EQ(scripted.duration_s, 90.0);
  EXPECT_EQ(scripted.exit_code, 0);
  EXPECT_EQ(scripted.termination_message, "all good");

  PodPlan bad = t.plan(pod(R"(
metadata: {annotations: {sim.gpufleet.io/exit-code: "nine"}}
spec: {restartPolicy: Never, containers: [{name: c, image: anything}]}
)"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.termination_message, HasSubstr("sim.gpufleet.io/exit-code=\"nine\""));

  PodPlan unknown = t.plan(
      pod("metadata: {annotations: {sim.gpufleet.io/behaviour: nope}}\nspec: {containers: []}"));
  EXPECT_THAT(unknown.termination_message, HasSubstr("names no behaviour (known: crash, labelled"));

  PodPlan hosts = t.plan(pod(R"(
metadata: {annotations: {sim.gpufleet.io/nccl-hosts: "a, b,c"}}
spec: {restartPolicy: Never, containers: [{name: c, image: nvcr.io/nvidia/hpc-benchmarks:25.04}]}
)"));
  EXPECT_TRUE(hosts.nccl);
  EXPECT_EQ(hosts.nccl_hosts, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(BehaviourTable, ErrorsNameTheField) {
  auto error_of = [](const std::string& yaml) -> std::string {
    try {
      BehaviourTable::parse(core::parse_yaml(yaml), "b.yaml");
    } catch (const core::InvalidInput& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error_of("[{name: a, duration: soon}]"),
              HasSubstr("behaviours[0].duration: value \"soon\" is not a duration"));
  EXPECT_THAT(error_of("[{name: a, exitCode: 300}]"),
              HasSubstr("behaviours[0].exitCode: value 300 is out of range"));
  EXPECT_THAT(error_of("[{name: a}, {name: a}]"), HasSubstr("behaviours[1].name"));
  EXPECT_THAT(error_of("[{name: a, match: {restartPolicy: Sometimes}}]"),
              HasSubstr("behaviours[0].match.restartPolicy"));
  EXPECT_THAT(error_of("[{name: a, colour: red}]"),
              HasSubstr("behaviours[0].colour: is not a known field"));
}

TEST(BehaviourTable, ContainerBehavioursTargetContainersByNameAndImage) {
  BehaviourTable t = BehaviourTable::parse(core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
crashLoopBackOff: {initial: 100ms, max: 1s}
behaviours:
- name: flaky-apply
  match: {initContainer: "*-apply", image: "*package*"}
  duration: 2s
  exitCodes: [1, 1, 0]
- name: slow-main
  match: {container: main}
  startDelay: 0s
  duration: forever
)"),
                                           "b.yaml");
  EXPECT_DOUBLE_EQ(t.back_off().initial_s, 0.1);
  EXPECT_DOUBLE_EQ(t.back_off().max_s, 1.0);
  PodPlan p = t.plan(pod(R"(
spec:
  restartPolicy: OnFailure
  initContainers:
  - {name: kernel-apply, image: example.com/host-package:1}
  - {name: other-apply, image: example.com/other:1}
  - {name: proxy, image: envoy, restartPolicy: Always}
  containers:
  - {name: main, image: busybox}
  - {name: helper, image: busybox}
)"));
  ASSERT_EQ(p.init_containers.size(), 3u);
  EXPECT_EQ(p.init_containers[0].behaviour, "flaky-apply");
  EXPECT_EQ(p.init_containers[0].exit_code(0), 1);
  EXPECT_EQ(p.init_containers[0].exit_code(1), 1);
  EXPECT_EQ(p.init_containers[0].exit_code(2), 0);
  EXPECT_EQ(p.init_containers[0].exit_code(9), 0);
  EXPECT_EQ(p.init_containers[1].behaviour, "init");  // the image does not match
  EXPECT_EQ(p.init_containers[1].duration_s, 1.0);
  EXPECT_EQ(p.init_containers[2].behaviour, "sidecar");
  EXPECT_FALSE(p.init_containers[2].duration_s.has_value());
  ASSERT_EQ(p.containers.size(), 2u);
  EXPECT_EQ(p.containers[0].behaviour, "slow-main");
  EXPECT_FALSE(p.containers[0].duration_s.has_value());
  EXPECT_EQ(p.containers[1].behaviour, "batch");  // the pod's behaviour
  EXPECT_EQ(p.behaviour, "batch");

  auto error_of = [](const std::string& yaml) -> std::string {
    try {
      BehaviourTable::parse(core::parse_yaml(yaml), "b.yaml");
    } catch (const core::InvalidInput& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error_of("[{name: a, exitCodes: [1, 300]}]"),
              HasSubstr("behaviours[0].exitCodes[1]: value 300 is not an exit status"));
  EXPECT_THAT(error_of("[{name: a, exitCodes: []}]"), HasSubstr("behaviours[0].exitCodes: value"));
  EXPECT_THAT(error_of("[{name: a, exitCode: 1, exitCodes: [1]}]"),
              HasSubstr("is given together with exitCode"));
  EXPECT_THAT(error_of("[{name: a, match: {container: x, initContainer: y}}]"),
              HasSubstr("behaviours[0].match.initContainer"));
  EXPECT_THAT(error_of("{apiVersion: gpufleet.io/v1alpha1, kind: BehaviourTable, behaviours: [],"
                       " crashLoopBackOff: {initial: 10s, max: 1s}}"),
              HasSubstr("crashLoopBackOff: initial"));
}

// The BehaviourTable example in docs/sim.md parses and means what the text says.
TEST(BehaviourTable, TheDocsExampleParses) {
  std::string doc = read_text_file(GPUFLEET_SOURCE_DIR + "/docs/sim.md");
  auto start = doc.find("```yaml\napiVersion: gpufleet.io/v1alpha1\nkind: BehaviourTable");
  ASSERT_NE(start, std::string::npos);
  start += 8;
  std::string yaml = doc.substr(start, doc.find("```", start) - start);
  BehaviourTable t = BehaviourTable::parse(core::parse_yaml(yaml), "docs/sim.md");
  EXPECT_DOUBLE_EQ(t.back_off().max_s, 300);
  PodPlan p = t.plan(pod(R"(
spec:
  initContainers: [{name: os-apply, image: example.com/os-package:1}]
  containers: [{name: log-shipper, image: fluent-bit}, {name: app, image: nginx}]
)"));
  EXPECT_EQ(p.init_containers[0].behaviour, "flaky-apply");
  EXPECT_EQ(p.init_containers[0].exit_code(1), 1);
  EXPECT_EQ(p.init_containers[0].exit_code(2), 0);
  EXPECT_EQ(p.containers[0].behaviour, "slow-sidecar");
  EXPECT_EQ(p.containers[1].behaviour, "service");
}

TEST(BehaviourTable, TerminationTailKeepsWholeLinesUnder4096) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "line " + std::to_string(i) + " of the output\n";
  std::string tail = termination_tail(text);
  EXPECT_LE(tail.size(), 4096u);
  EXPECT_EQ(tail.rfind("line ", 0), 0u);
  EXPECT_EQ(tail.back(), '\n');
  EXPECT_EQ(termination_tail("short"), "short");
}

}  // namespace
}  // namespace gpufleet::sim
