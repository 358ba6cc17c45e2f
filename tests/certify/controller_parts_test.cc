// The Kubernetes-free parts of the certify controller: reading a spec (thresholds that do
// not compile named with their metric and expression), choosing nodes (cordons, taints and
// tolerations, missing names), the Job and Service of a group test, iteration overrides, and
// the stored progress of a category round-tripping through JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certify/node_selection.h"
#include "certify/run_spec.h"
#include "certify/run_state.h"
#include "certify/workload_job.h"
#include "core/json.h"
#include "core/yaml.h"

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

TEST(WorkloadJob, GroupsBecomeIndexedJobsWithAServiceAndOneNodeJobsArePinned) {
  RunSpec rs = parse_certification_spec(
      core::parse_yaml("{targets: {nodeNames: [a]}, categories: [{name: "
                       "communication/nccl-all-reduce, iterations: 3, timeout: 2m}]}"),
      Catalog::builtin());
  JobRequest r;
  r.ns = "ns";
  r.name = job_name("my.cert-with-a-long-name-that-goes-on-and-on", "abcdef12", 0, 7);
  EXPECT_EQ(r.name, "my-cert-with-a-long-name-that-abcde-0-7");
  r.run_uid = "abcdef12";
  r.nodes = {"a", "b", "c"};
  r.plan = &rs.categories[0];
  r.gpus_per_node = 8;
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
