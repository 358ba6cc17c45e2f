// Retries (which verdicts are re-run, how an attempt is stored and named) and the stored form
// of a run's state (gzip into binaryData above 16 KiB, plain data below, both read back),
// with the size of a 5,000-node category's state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "certify/run_spec.h"
#include "certify/run_state.h"
#include "certify/state_codec.h"
#include "certify/verdict.h"
#include "certify/workload_job.h"
#include "core/base64.h"
#include "core/gzip.h"
#include "core/json.h"
#include "core/yaml.h"

namespace gpufleet::certify {
namespace {

using ::testing::HasSubstr;

TEST(Retry, OnlyNoiseIsRetriedAndOnlyWithinTheBudget) {
  for (Reason r : {Reason::WorkloadFailed, Reason::MeasurementTimeout, Reason::Infrastructure}) {
    EXPECT_TRUE(retryable(reason_name(r))) << reason_name(r);
    EXPECT_TRUE(should_retry(reason_name(r), 1, 1)) << reason_name(r);
    EXPECT_TRUE(should_retry(reason_name(r), 2, 2)) << reason_name(r);
    EXPECT_FALSE(should_retry(reason_name(r), 2, 1)) << "attempt 2 of 2 is the last";
    EXPECT_FALSE(should_retry(reason_name(r), 1, 0)) << "retries 0: one attempt";
  }
  // Evidence about the hardware is never re-rolled.
  for (Reason r : {Reason::ThresholdViolated, Reason::HardwareFailure}) {
    EXPECT_FALSE(retryable(reason_name(r))) << reason_name(r);
    EXPECT_FALSE(should_retry(reason_name(r), 1, 5)) << reason_name(r);
  }
  EXPECT_FALSE(should_retry("", 1, 5));  // passed
}

TEST(Retry, AttemptNamesTheJobAndIsAnnotatedOnThePod) {
  EXPECT_EQ(job_name("rack-12", "0123456789", 1, 7), "rack-12-01234-1-7");
  EXPECT_EQ(job_name("rack-12", "0123456789", 1, 7, 1), "rack-12-01234-1-7");
  EXPECT_EQ(job_name("rack-12", "0123456789", 1, 7, 3), "rack-12-01234-1-7-a3");
  RunSpec rs = parse_workload_run_spec(
      core::parse_yaml("{targets: {nodeNames: [a]}, image: example.com/burn:1, retries: 2}"));
  EXPECT_EQ(rs.categories[0].workload.retries, 2);
  JobRequest r;
  r.ns = "ns";
  r.name = job_name("w", "uid00", 0, 1, 2);
  r.nodes = {"a"};
  r.plan = &rs.categories[0];
  r.attempt = 2;
  core::Value job = build_job(r);
  EXPECT_EQ(job.get_string({"spec", "template", "metadata", "annotations", kAttemptAnnotation}),
            "2");
  try {
    parse_workload_run_spec(
        core::parse_yaml("{targets: {nodeNames: [a]}, image: example.com/burn:1, retries: 9}"));
    FAIL() << "retries 9 accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("spec.retries: 9 is outside 0..5"));
  }
}

TEST(Retry, AttemptAndEarlierFailuresRoundTrip) {
  CategoryState st;
  st.name = "communication/nccl-all-reduce";
  GroupState g;
  g.id = 4;
  g.nodes = {"a"};
  g.attempt = 2;
  g.earlier = {"WorkloadFailed: exit status 1"};
  g.result = GroupResult{true, "", "", {}, 2};
  st.groups.push_back(g);
  GroupState fresh;
  fresh.id = 5;
  fresh.nodes = {"b"};
  st.groups.push_back(fresh);
  CategoryState back = CategoryState::from_value(core::parse_json(core::to_json(st.to_value())));
  EXPECT_EQ(back.groups[0].attempt, 2);
  EXPECT_EQ(back.groups[0].earlier, g.earlier);
  EXPECT_EQ(back.groups[0].result->attempts, 2);
  EXPECT_EQ(back.groups[1].attempt, 1);
  EXPECT_EQ(back.groups[1].earlier.size(), 0u);
  // A state written before retries existed reads as first attempts.
  CategoryState old = CategoryState::from_value(core::parse_json(
      R"({"name": "x", "groups": [{"id": 1, "nodes": ["a"], "result": {"passed": true}}]})"));
  EXPECT_EQ(old.groups[0].attempt, 1);
  EXPECT_EQ(old.groups[0].result->attempts, 1);
}

core::Value config_map(const EncodedState& e) {
  core::Value cm;
  cm["metadata"]["name"] = "run-certify-0";
  cm["data"] = e.data;
  cm["binaryData"] = e.binary_data;
  return cm;
}

TEST(StateCodec, SmallStaysPlainLargeIsGzippedBothReadBack) {
  std::string small = R"({"name": "x"})";
  EncodedState a = encode_state("state.json", small);
  EXPECT_EQ(a.data.get_string({"state.json"}), small);
  EXPECT_TRUE(a.binary_data.as_map().empty());
  EXPECT_EQ(decode_state(config_map(a), "state.json"), small);

  std::string large = "[";
  for (int i = 0; i < 4000; ++i) large += "\"node-" + std::to_string(i) + "\",";
  large += "\"end\"]";
  ASSERT_GT(large.size(), kCompressAbove);
  EncodedState b = encode_state("state.json", large);
  EXPECT_EQ(b.data.find("state.json"), nullptr);
  ASSERT_NE(b.binary_data.find("state.json.gz"), nullptr);
  EXPECT_LT(b.binary_data.get_string({"state.json.gz"}).size(), large.size() / 3);
  EXPECT_EQ(decode_state(config_map(b), "state.json"), large);

  // Objects written before compression: data only.
  core::Value legacy;
  legacy["data"]["state.json"] = large;
  EXPECT_EQ(decode_state(legacy, "state.json"), large);
  EXPECT_EQ(decode_state(core::Value::map(), "state.json"), std::nullopt);
}

TEST(StateCodec, CorruptDataIsNamed) {
  core::Value cm;
  cm["metadata"]["name"] = "run-certify-0";
  cm["binaryData"]["state.json.gz"] = "not base64!";
  try {
    (void)decode_state(cm, "state.json");
    FAIL() << "bad base64 read";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("ConfigMap run-certify-0 binaryData.state.json.gz"));
    EXPECT_THAT(e.what(), HasSubstr("not valid base64"));
  }
  std::string z = core::gzip(std::string(100000, 'x'));
  z.resize(z.size() / 2);
  cm["binaryData"]["state.json.gz"] = core::base64_encode(z);
  try {
    (void)decode_state(cm, "state.json");
    FAIL() << "truncated gzip read";
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("gzip data is corrupt (delete the ConfigMap"));
  }
}

// The size of a 5,000-node perNode category's state (every node its own group with an
// nccl-tests result and three metrics) and of its target set, as stored. Prints the figures
// docs/performance.md records; fails if a stored object would pass a ConfigMap's 1 MiB.
TEST(StateCodec, FiveThousandNodeStateFitsAConfigMap) {
  std::mt19937_64 rng(5000);
  std::uniform_real_distribution<double> bw(470.0, 490.0);
  CategoryState st;
  st.name = "communication/nccl-all-reduce";
  st.phase = "Failed";
  st.start_time = "2026-12-02T00:00:00Z";
  st.completion_time = "2026-12-02T00:20:00Z";
  core::Value targets;
  char name[32];
  for (int i = 0; i < 5000; ++i) {
    std::snprintf(name, sizeof name, "gpu-h100-r%02d-%04d", i / 64, i);
    GroupState g;
    g.id = static_cast<std::uint32_t>(i + 1);
    g.purpose = "perNode";
    g.nodes = {name};
    GroupResult r;
    r.passed = i % 250 != 7;
    if (!r.passed) {
      r.reason = "ThresholdViolated";
      r.message = "busBandwidthGBps = 402.17 violates value >= 450.0";
      st.failed.push_back({name, r.reason, r.message});
    }
    double b = bw(rng);
    r.metrics = {{"busBandwidthGBps", b}, {"algBandwidthGBps", b / 1.75}, {"ncclWrongElements", 0}};
    g.result = r;
    st.groups.push_back(std::move(g));
    core::Value n;
    n["name"] = name;
    n["product"] = "NVIDIA-H100-80GB-HBM3";
    n["family"] = "hopper";
    n["gpus"] = 8;
    n["allocatable"] = 8;
    targets["nodes"].push_back(std::move(n));
  }
  for (const auto& [what, doc] :
       {std::pair<std::string, core::Value>{"category", st.to_value()}, {"targets", targets}}) {
    std::string json = core::to_json(doc);
    EncodedState e = encode_state("state.json", json);
    std::size_t stored = core::to_json(e.binary_data).size() + core::to_json(e.data).size();
    std::printf("5,000-node %s state: %zu bytes JSON, %zu bytes stored (base64 of gzip)\n",
                what.c_str(), json.size(), stored);
    EXPECT_GT(json.size(), std::size_t{1} << 19) << what;  // large enough to matter
    EXPECT_LT(stored, std::size_t{1} << 20) << what;       // a ConfigMap's limit
    EXPECT_EQ(decode_state(config_map(e), "state.json"), json) << what;
  }
}

}  // namespace
}  // namespace gpufleet::certify
