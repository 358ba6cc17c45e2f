// The workload catalog: the built-in templates load, family overrides apply, and every
// invalid document is refused with the file and field named.
#include "certify/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet::certify {
namespace {

using ::testing::HasSubstr;

TEST(Catalog, BuiltinHoldsEveryCategoryTemplate) {
  const Catalog& c = Catalog::builtin();
  for (const char* id : {"communication/nccl-all-reduce", "communication/nccl-all-gather",
                         "communication/nccl-reduce-scatter", "communication/nccl-alltoall",
                         "diagnostics/dcgm-r1", "diagnostics/dcgm-r2", "diagnostics/dcgm-r3",
                         "diagnostics/dcgm-r4", "training/llm-8b", "training/llm-56b"}) {
    EXPECT_NE(c.find(id), nullptr) << id;
  }
  EXPECT_EQ(c.templates().size(), 10u);
  const WorkloadTemplate& ar = c.get("communication/nccl-all-reduce");
  EXPECT_EQ(ar.output, OutputKind::Nccl);
  EXPECT_TRUE(ar.mpi);
  EXPECT_EQ(ar.scale, Scale::NvlinkDomain);
  EXPECT_EQ(ar.statistic, NcclStatistic::LargestSize);
  EXPECT_EQ(ar.timeout, std::chrono::minutes(15));
  EXPECT_EQ(ar.retries, 1);
  EXPECT_EQ(ar.command.front(), "all_reduce_perf");
  const WorkloadTemplate& r4 = c.get("diagnostics/dcgm-r4");
  EXPECT_EQ(r4.timeout, std::chrono::hours(2));
  EXPECT_EQ(r4.command, (std::vector<std::string>{"dcgmi", "diag", "-r", "4", "-j"}));
  EXPECT_THAT([&] { (void)c.get("communication/nccl-broadcast"); },
              ::testing::ThrowsMessage<core::InvalidInput>(
                  HasSubstr("known: communication/nccl-all-gather")));
}

TEST(Catalog, FamilyOverridesMergeOverTheTemplate) {
  const WorkloadTemplate& ar = Catalog::builtin().get("communication/nccl-all-reduce");
  WorkloadTemplate bw = ar.for_family("blackwell");
  EXPECT_NE(bw.image, ar.image);
  EXPECT_EQ(bw.env.at("NCCL_NVLS_ENABLE"), "1");
  EXPECT_EQ(bw.env.at("NCCL_DEBUG"), "INFO");  // kept from the template
  EXPECT_GT(bw.expected.at("busBandwidthGBps"), ar.expected.at("busBandwidthGBps"));
  WorkloadTemplate unknown = ar.for_family("volta");
  EXPECT_EQ(unknown.image, ar.image);
}

std::string error(const std::string& yaml, const std::string& path = "communication/x.yaml") {
  try {
    (void)parse_template(yaml, "test.yaml", path);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

constexpr const char* kValid = R"(name: x
category: communication
description: d
output: nccl
image: img
command: [all_reduce_perf]
)";

TEST(Catalog, StrictValidationNamesFileAndField) {
  EXPECT_EQ(error(kValid), "no error");
  EXPECT_THAT(error(std::string(kValid) + "timeOut: 5m\n"),
              HasSubstr("test.yaml: timeOut is not a known field (allowed: name, category"));
  EXPECT_THAT(error(std::string(kValid) + "overrides:\n  - gpuFamily: hopper\n    images: y\n"),
              HasSubstr("overrides[0].images is not a known field (allowed: gpuFamily, image, env, "
                        "expected, timeout)"));
  EXPECT_THAT(error(std::string(kValid) + "timeout: soon\n"),
              HasSubstr("timeout \"soon\" must be a duration"));
  EXPECT_THAT(error(std::string(kValid) + "retries: 9\n"),
              HasSubstr("retries must be a whole number in 0..5"));
  EXPECT_THAT(error(std::string(kValid) + "expected: {bandwidth: 3}\n"),
              HasSubstr("expected.bandwidth is not a known metric"));
  EXPECT_THAT(error(std::string(kValid) + "statistic: median\n"), HasSubstr("statistic"));
  EXPECT_THAT(error(std::string(kValid) + "env: {A: 1}\n"), HasSubstr("env.A must be a string"));
  EXPECT_THAT(error(std::string(kValid) + "scale: rack\n"),
              HasSubstr("scale must be one of perNode"));
  EXPECT_THAT(error(kValid, "training/x.yaml"), HasSubstr("belong in communication/x.yaml"));
  EXPECT_THAT(error("name: x\ncategory: misc\n"), HasSubstr("category \"misc\" must be one of"));
  EXPECT_THAT(error("name: x\ncategory: communication\ndescription: d\noutput: dcgm\nimage: "
                    "i\ncommand: [a]\nstatistic: maximum\n"),
              HasSubstr("statistic applies to output: nccl only"));
  EXPECT_THAT(error(std::string(kValid) + "overrides:\n  - gpuFamily: h\n  - gpuFamily: h\n"),
              HasSubstr("\"h\" is overridden twice"));
  EXPECT_THAT(error("name: [x\n"), HasSubstr("test.yaml"));
}

TEST(Catalog, DuplicateIdsAreRefused) {
  std::vector<CatalogFile> files{{"communication/x.yaml", "a.yaml", kValid},
                                 {"communication/x.yaml", "b.yaml", kValid}};
  EXPECT_THAT([&] { (void)Catalog::load(files); },
              ::testing::ThrowsMessage<core::InvalidInput>(
                  HasSubstr("b.yaml: template communication/x is defined twice")));
}

}  // namespace
}  // namespace gpufleet::certify
