// Parsers on real output shapes (tests/certify/testdata), malformed output, and judging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "certify/dcgm_parser.h"
#include "certify/judge.h"
#include "certify/nccl_parser.h"
#include "certify/training_parser.h"
#include "support/source_paths.h"

namespace gpufleet::certify {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string testdata(const std::string& name) {
  std::ifstream in(GPUFLEET_SOURCE_DIR + "/tests/certify/testdata/" + name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

template <typename F>
OutputError output_error(F&& f) {
  try {
    f();
  } catch (const OutputError& e) {
    return e;
  }
  ADD_FAILURE() << "no OutputError";
  return OutputError("none", 0, {}, "none");
}

TEST(NcclText, ReadsRowsHostsAndTheAverageLine) {
  NcclResult r = parse_nccl_text(testdata("nccl_allreduce_2node.txt"));
  EXPECT_EQ(r.collective, "all_reduce_perf");
  EXPECT_EQ(r.ranks, 4);
  EXPECT_THAT(r.hosts, ElementsAre("gpu-node-a", "gpu-node-b"));
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[3].size, 8589934592u);
  EXPECT_DOUBLE_EQ(r.rows[3].out_of_place->busbw_gbs, 179.88);
  EXPECT_DOUBLE_EQ(r.rows[3].in_place->busbw_gbs, 179.73);
  EXPECT_EQ(r.rows[0].out_of_place->wrong, 0);
  EXPECT_DOUBLE_EQ(*r.avg_busbw_gbs, 178.44);
  EXPECT_TRUE(r.concluded);
  EXPECT_TRUE(r.failures.empty());
}

TEST(NcclText, StatisticIsExplicit) {
  NcclResult r = parse_nccl(testdata("nccl_allreduce_2node.txt"));
  NcclMetrics largest = nccl_metrics(r, NcclStatistic::LargestSize);
  EXPECT_DOUBLE_EQ(largest.bus_bandwidth_gbs, 179.73);  // lower placement of the 8 GiB row
  EXPECT_DOUBLE_EQ(largest.alg_bandwidth_gbs, 119.82);
  EXPECT_EQ(largest.size, 8589934592u);
  EXPECT_DOUBLE_EQ(nccl_metrics(r, NcclStatistic::Maximum).bus_bandwidth_gbs, 179.88);
  EXPECT_DOUBLE_EQ(nccl_metrics(r, NcclStatistic::Average).bus_bandwidth_gbs, 178.44);
  EXPECT_EQ(parse_statistic("maximum"), NcclStatistic::Maximum);
  EXPECT_THROW(parse_statistic("median"), core::InvalidInput);
}

TEST(NcclText, UncheckedRunsHaveNoWrongCount) {
  NcclResult r = parse_nccl_text(testdata("nccl_alltoall_nocheck.txt"));
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_FALSE(r.rows[0].out_of_place->wrong.has_value());
  EXPECT_EQ(r.total_wrong(), 0);
  EXPECT_THAT(r.hosts, ElementsAre("host-7"));
}

TEST(NcclText, FailureLinesAreKept) {
  std::string out =
      "# nccl-tests version 2.17.1\n#  Rank  0 Group  0 Pid 1 on node-a device 0 [0000:18:00] X\n"
      "node-a: Test NCCL failure common.cu:1132 'unhandled system error'\n"
      " .. node-a pid 1: Test failure common.cu:1216\n";
  NcclResult r = parse_nccl_text(out);
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_THAT(r.failures[0], HasSubstr("Test NCCL failure"));
  EXPECT_TRUE(r.rows.empty());
}

TEST(NcclText, MalformedRowNamesTheLine) {
  std::string out = testdata("nccl_allreduce_2node.txt");
  std::string bad =
      "  2147483648     536870912     float     sum      -1    18104  118.62  oops      0    18099 "
      " 118.65  177.98      0";
  std::size_t at = out.find("  2147483648");
  out.replace(at, out.find('\n', at) - at, bad);
  OutputError e = output_error([&] { (void)parse_nccl_text(out); });
  EXPECT_EQ(e.line_number(), 15u);
  EXPECT_THAT(e.what(), HasSubstr("busbw \"oops\""));
  EXPECT_THAT(e.line(), HasSubstr("118.62  oops"));

  OutputError cut = output_error(
      [] { (void)parse_nccl_text("  1073741824  268435456  float  sum  -1  9121.3\n"); });
  EXPECT_THAT(cut.what(), HasSubstr("columns"));
  OutputError empty =
      output_error([] { (void)parse_nccl_text("# nccl-tests version 2.17.1\n#\n"); });
  EXPECT_THAT(empty.what(), HasSubstr("no result rows"));
  OutputError avg = output_error([] { (void)parse_nccl_text("# Avg bus bandwidth    : lots\n"); });
  EXPECT_EQ(avg.line_number(), 1u);
  // Found by certify_nccl_fuzz: a negative average passed as the run's bus bandwidth.
  OutputError negative =
      output_error([] { (void)parse_nccl_text("#\n# Avg bus bandwidth    :-1   2423.3\n"); });
  EXPECT_EQ(negative.line_number(), 2u);
  EXPECT_THAT(negative.what(), HasSubstr("not a number >= 0"));
}

TEST(NcclText, RefusesOversizedOutput) {
  std::string big(kMaxOutputBytes + 1, '#');
  EXPECT_THAT(output_error([&] { (void)parse_nccl(big); }).what(), HasSubstr("exceeds the limit"));
}

TEST(NcclJson, ReadsTheVersion2File) {
  NcclResult r = parse_nccl(testdata("nccl_allreduce.json"));
  EXPECT_EQ(r.collective, "all_reduce_perf");
  EXPECT_EQ(r.ranks, 2);
  EXPECT_THAT(r.hosts, ElementsAre("gpu-node-a", "gpu-node-b"));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(r.rows[1].out_of_place->busbw_gbs, 413.76);
  EXPECT_FALSE(r.rows[1].in_place->wrong.has_value());
  EXPECT_DOUBLE_EQ(*r.avg_busbw_gbs, 412.355);
  EXPECT_TRUE(r.concluded);
  EXPECT_DOUBLE_EQ(nccl_metrics(r).bus_bandwidth_gbs, 412.82);
}

TEST(NcclJson, TruncatedFileNamesTheLine) {
  std::string json = testdata("nccl_allreduce.json");
  json.resize(json.size() / 2);
  OutputError e = output_error([&] { (void)parse_nccl(json); });
  EXPECT_EQ(e.line_number(), 1u);
  EXPECT_THAT(e.what(), HasSubstr("nccl-tests JSON output line 1"));
  OutputError missing = output_error([] { (void)parse_nccl_json(R"({"results":[{"size":8}]})"); });
  EXPECT_THAT(missing.what(), HasSubstr("results[0].count"));
  EXPECT_THAT(output_error([] {
                (void)parse_nccl_json(R"({"results":[{"size":1e300,"count":1,"in_place":{}}]})");
              }).what(),
              HasSubstr("results[0].size is not a number in 0..1e18"));
  EXPECT_THAT(output_error([] {
                (void)parse_nccl_json(R"({"results":[],"average_bus_bandwidth":{"bandwidth":-1}})");
              }).what(),
              HasSubstr("average_bus_bandwidth.bandwidth is not a finite number >= 0"));
}

TEST(Dcgm, Reads3xLayoutWithLeadingText) {
  DcgmReport r = parse_dcgm(testdata("dcgm3_r3_fail.json"));
  EXPECT_EQ(r.major_version, 3);
  EXPECT_EQ(r.version, "3.3.5");
  ASSERT_EQ(r.results.size(), 5u);
  EXPECT_THAT(r.results[0].gpus, ElementsAre(0, 1));
  EXPECT_EQ(r.results[0].status, DcgmStatus::Pass);
  EXPECT_EQ(r.results[2].test, "GPU Memory");
  EXPECT_EQ(r.results[2].category, "Hardware");
  EXPECT_EQ(r.results[2].status, DcgmStatus::Fail);
  ASSERT_EQ(r.results[2].warnings.size(), 1u);
  EXPECT_THAT(r.results[2].warnings[0].text, HasSubstr("double-bit ECC"));
  EXPECT_FALSE(r.results[2].warnings[0].error_id.has_value());
  EXPECT_THAT(r.results[2].info, ElementsAre("Allocated 85% of memory"));
  EXPECT_EQ(r.failures(), 1);
  EXPECT_EQ(r.warnings(), 1);
  EXPECT_THAT(r.failed_gpus(), ElementsAre(1));
  EXPECT_EQ(r.results[4].status, DcgmStatus::Skip);
}

TEST(Dcgm, Reads4xLayoutKeepingWarnApartFromTheSummary) {
  DcgmReport r = parse_dcgm(testdata("dcgm4_r2.json"));
  EXPECT_EQ(r.major_version, 4);
  ASSERT_EQ(r.results.size(), 5u);
  const DcgmResult& remap = r.results[2];
  EXPECT_EQ(remap.test, "memory");
  EXPECT_EQ(remap.status, DcgmStatus::Warn);  // the summary says "Fail"
  EXPECT_THAT(remap.gpus, ElementsAre(1));
  EXPECT_EQ(remap.warnings[0].error_id, 85);
  EXPECT_EQ(remap.warnings[0].severity, 6);
  EXPECT_EQ(r.failures(), 1);
  EXPECT_THAT(r.failed_gpus(), ElementsAre(1));
}

TEST(Dcgm, MalformedOutputIsAnErrorNeverAPass) {
  EXPECT_THAT(output_error([] { (void)parse_dcgm("dcgmi: command not found\n"); }).what(),
              HasSubstr("no JSON document"));
  OutputError syntax =
      output_error([] { (void)parse_dcgm("Note\n{\n \"DCGM Diagnostic\": {\n   \"x\": ]\n}\n"); });
  EXPECT_EQ(syntax.line_number(), 4u);
  EXPECT_THAT(syntax.line(), HasSubstr("\"x\": ]"));
  EXPECT_THAT(output_error([] { (void)parse_dcgm(R"({"other": {}})"); }).what(),
              HasSubstr("neither"));
  EXPECT_THAT(
      output_error([] {
        (void)parse_dcgm(
            R"({"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "memory", "results": [{"entity_id": 0, "status": "Maybe"}]}]}]}})");
      }).what(),
      HasSubstr("\"Maybe\" is not a DCGM status"));
  EXPECT_THAT(output_error([] {
                (void)parse_dcgm(R"({"DCGM Diagnostic": {"test_categories": []}})");
              }).what(),
              HasSubstr("no test results"));
}

TEST(Training, ReadsMegatronIterationLines) {
  TrainingMetrics m = parse_training(testdata("training_llm8b.log"));
  ASSERT_EQ(m.intervals.size(), 3u);
  EXPECT_TRUE(m.completed());
  EXPECT_DOUBLE_EQ(m.avg_step_time_sec(), 1.89);  // the first (warm-up) interval is left out
  EXPECT_DOUBLE_EQ(*m.avg_tflops_per_gpu(), 443.0);
  EXPECT_NEAR(m.goodput_ratio(), 1.0 - 1.0 / 30.0, 1e-12);
}

TEST(Training, BrokenRunsNameTheLine) {
  OutputError crash = output_error([] {
    (void)parse_training(
        " [x] iteration 10/20 | elapsed time per iteration (ms): 100 |\nTraceback (most recent "
        "call last):\n");
  });
  EXPECT_EQ(crash.line_number(), 2u);
  OutputError bad = output_error([] {
    (void)parse_training(" [x] iteration 10/20 | elapsed time per iteration (ms): fast |\n");
  });
  EXPECT_THAT(bad.what(), HasSubstr("\"fast\""));
  EXPECT_THAT(output_error([] {
                (void)parse_training("hello\n");
                // Found by the fuzzer: a count too large for an integer is an error, not an
                // overflow.
                EXPECT_THAT(
                    output_error([] {
                      (void)parse_training(
                          " iteration 10/20 | elapsed time per iteration (ms): 100 | number of nan "
                          "iterations: 1e300 |\n");
                    }).what(),
                    HasSubstr("above 10^12"));
              }).what(),
              HasSubstr("no \"iteration"));
}

ThresholdSet thresholds(std::map<std::string, std::string> t) { return ThresholdSet::compile(t); }

TEST(Judge, ThresholdsPassAndFailIncludingRangesAndCompounds) {
  std::string out = testdata("nccl_allreduce_2node.txt");
  ThresholdContext ctx{.group_size = 2, .gpu_product = "NVIDIA-H100-80GB-HBM3"};
  Judgement ok = judge_output(OutputKind::Nccl, out, 0,
                              thresholds({{"busBandwidthGBps", "value >= 170"}}), ctx);
  EXPECT_TRUE(ok.passed) << ok.message;
  EXPECT_DOUBLE_EQ(ok.metrics.at("busBandwidthGBps"), 179.73);

  Judgement range =
      judge_output(OutputKind::Nccl, out, 0,
                   thresholds({{"busBandwidthGBps", "value >= 180.0 && value <= 500.0"}}), ctx);
  EXPECT_FALSE(range.passed);
  EXPECT_EQ(range.reason, Reason::ThresholdViolated);
  EXPECT_THAT(range.message, HasSubstr("busBandwidthGBps = 179.73 violates"));

  auto compound = thresholds({{"busBandwidthGBps",
                               "gpuProduct.startsWith('NVIDIA-H100') ? value >= (groupSize > 8 ? "
                               "160.0 : 175.0) : value >= 400.0"}});
  EXPECT_TRUE(judge_output(OutputKind::Nccl, out, 0, compound, ctx).passed);
  EXPECT_FALSE(judge_output(OutputKind::Nccl, out, 0, compound,
                            {.group_size = 2, .gpu_product = "NVIDIA-H200"})
                   .passed);
}

TEST(Judge, MissingMeasurementIsATimeoutNotAPass) {
  Judgement j = judge_output(OutputKind::Nccl, testdata("nccl_allreduce_2node.txt"), 0,
                             thresholds({{"avgTFLOPsPerGPU", "value > 400.0"}}), {});
  EXPECT_FALSE(j.passed);
  EXPECT_EQ(j.reason, Reason::MeasurementTimeout);
  EXPECT_THAT(j.message, HasSubstr("avgTFLOPsPerGPU was never measured"));
  Judgement t =
      judge_timeout(thresholds({{"busBandwidthGBps", "value > 1.0"}}), "nccl-all-reduce on rack-3");
  EXPECT_EQ(t.reason, Reason::MeasurementTimeout);
}

TEST(Judge, ReasonsAreDistinct) {
  ThresholdSet none;
  // Corrupted data beats a threshold miss.
  std::string wrong = testdata("nccl_allreduce_2node.txt");
  wrong.replace(wrong.find("179.88      0"), 13, "179.88      3");
  Judgement hw = judge_output(OutputKind::Nccl, wrong, 0,
                              thresholds({{"busBandwidthGBps", "value > 999.0"}}), {});
  EXPECT_EQ(hw.reason, Reason::HardwareFailure);
  EXPECT_THAT(hw.message, HasSubstr("3 wrong elements"));
  // A DCGM Fail is a hardware failure naming the test, GPU and text.
  Judgement dcgm = judge_output(OutputKind::Dcgm, testdata("dcgm4_r2.json"), 0, none, {});
  EXPECT_EQ(dcgm.reason, Reason::HardwareFailure);
  EXPECT_THAT(dcgm.message, HasSubstr("pcie failed on GPU 1 (error 13)"));
  EXPECT_THAT(dcgm.failed_gpus, ElementsAre(1));
  EXPECT_DOUBLE_EQ(dcgm.metrics.at("dcgmWarnResults"), 1);
  // Unreadable output is a workload failure quoting the line.
  Judgement broken = judge_output(
      OutputKind::Training, "iteration 5/10 | elapsed time per iteration (ms): x |", 0, none, {});
  EXPECT_EQ(broken.reason, Reason::WorkloadFailed);
  EXPECT_THAT(broken.message, HasSubstr("training output line 1"));
  // An incomplete training run is a workload failure even when its numbers are fine.
  std::string log = testdata("training_llm8b.log");
  Judgement cut = judge_output(OutputKind::Training,
                               log.substr(0, log.find(" [2026-01-01 00:01:19]")), 0, none, {});
  EXPECT_EQ(cut.reason, Reason::WorkloadFailed);
  EXPECT_THAT(cut.message, HasSubstr("stopped at iteration 20 of 30"));
  // A non-zero exit with good output still fails.
  EXPECT_EQ(judge_output(OutputKind::Training, log, 137, none, {}).reason, Reason::WorkloadFailed);
  EXPECT_TRUE(judge_output(OutputKind::Training, log, 0,
                           thresholds({{"goodputRatio", "value >= 0.95"}}), {})
                  .passed);
}

TEST(Judge, ThresholdCompileErrorsNameTheMetric) {
  auto message = [](std::map<std::string, std::string> t) {
    try {
      ThresholdSet::compile(t);
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(
      message({{"busBandwidth", "value > 1.0"}}),
      HasSubstr(
          "threshold metric \"busBandwidth\" is not a known metric (use one of algBandwidthGBps"));
  EXPECT_THAT(message({{"busBandwidthGBps", "value >="}}),
              HasSubstr("threshold busBandwidthGBps: expression"));
  EXPECT_THAT(message({{"busBandwidthGBps", "value + 1.0"}}), HasSubstr("is a double, not a bool"));
  EXPECT_THAT(message({{"busBandwidthGBps", "valu > 1.0"}}), HasSubstr("does not compile"));
  // Statically over the 10,000-unit budget: 20 × 20 × 20 iterations.
  const std::string l20 = "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]";
  EXPECT_THAT(message({{"busBandwidthGBps", l20 + ".all(a, " + l20 + ".all(b, " + l20 +
                                                ".all(c, value > a + b + c)))"}}),
              HasSubstr("over the limit of 10000 (the costliest part is `[1,2,3"));
  EXPECT_EQ(message({{"busBandwidthGBps", l20 + ".all(a, value > a)"}}), "no error");
  EXPECT_EQ(message({{"busBandwidthGBps", "gpuProduct.matches('H100') && value >= 350"}}),
            "no error");
}

TEST(WorkloadResultContract, StrictJsonMetrics) {
  WorkloadResult r = parse_workload_result(
      R"({"metrics": {"busBandwidthGBps": 371.5, "avgStepTimeSec": 2}, "message": "ok"})");
  EXPECT_DOUBLE_EQ(r.metrics.at("busBandwidthGBps"), 371.5);
  EXPECT_DOUBLE_EQ(r.metrics.at("avgStepTimeSec"), 2.0);
  EXPECT_TRUE(r.succeeded);
  EXPECT_THAT(
      output_error([] { (void)parse_workload_result(R"({"metrics": {"speed": 1}})"); }).what(),
      HasSubstr("metric \"speed\" is not a known metric"));
  EXPECT_THAT(output_error([] { (void)parse_workload_result(R"({"metric": {}})"); }).what(),
              HasSubstr("unknown key \"metric\""));
  EXPECT_THAT(output_error([] {
                (void)parse_workload_result(R"({"metrics": {"goodputRatio": "high"}})");
              }).what(),
              HasSubstr("not a finite number"));
  Judgement failed =
      judge_output(OutputKind::Result, R"({"status": "Failed", "message": "loss diverged"})", 0,
                   ThresholdSet{}, {});
  EXPECT_EQ(failed.reason, Reason::WorkloadFailed);
  EXPECT_THAT(failed.message, HasSubstr("loss diverged"));
}

}  // namespace
}  // namespace gpufleet::certify
