#include "recipe/pin.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::recipe {
namespace {

TEST(PinTest, AcceptsExactVersions) {
  for (const char* v : {"0.18.3", "v26.3.2", "v0.1.0-alpha.8", "1.2.3+build.5", "10.20.30",
                        "1.0.0-rc.1+meta", "535.104.05"}) {
    EXPECT_TRUE(is_exact_pin(v)) << v;
  }
}

TEST(PinTest, RejectsFloatingTagsRangesAndPartials) {
  for (const char* v :
       {"", "latest", "stable", "v", "1", "1.2", "^1.2.3", "~1.2.3", ">=1.0.0", "1.x", "1.2.*", "*",
        "1.2.3 - 1.4.0", "1.2.3-", "1.2.3-a..b", "1.2.3.4", "v1.2.x"}) {
    EXPECT_FALSE(is_exact_pin(v)) << v;
  }
}

TEST(PinTest, ErrorNamesTheFieldAndTheFix) {
  try {
    require_exact_pin("latest", "registry.yaml: components.a.chart.version");
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("components.a.chart.version"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'latest'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1.2.3"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace gpufleet::recipe
