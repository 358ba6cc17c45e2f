#include "core/semver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"

namespace gpufleet::core {
namespace {

TEST(SemVer, ParsesFullVersion) {
  const SemVer v = SemVer::parse("1.32.4-rc.1+build.5");
  EXPECT_EQ(v.major, 1u);
  EXPECT_EQ(v.minor, 32u);
  EXPECT_EQ(v.patch, 4u);
  EXPECT_EQ(v.prerelease, (std::vector<std::string>{"rc", "1"}));
  EXPECT_EQ(v.build, "build.5");
  EXPECT_EQ(v.to_string(), "1.32.4-rc.1+build.5");
}

TEST(SemVer, AcceptsLeadingVAndDropsItInCanonicalForm) {
  EXPECT_EQ(SemVer::parse("v26.3.2").to_string(), "26.3.2");
  EXPECT_EQ(SemVer::parse("v1.32.4").to_string(), "1.32.4");
  EXPECT_EQ(SemVer::parse("V0.0.1").to_string(), "0.0.1");
}

TEST(SemVer, StrictGrammarValidExamples) {
  for (const char* text :
       {"0.0.0", "1.0.0-0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7", "1.0.0-x.7.z.92",
        "1.0.0-x-y-z.--", "1.0.0-alpha+001", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
        "1.0.0+21AF26D3----117B344092BD", "10.20.30", "18446744073709551615.0.0", "570.86.15",
        "6.8.0-1015-aws"}) {
    EXPECT_TRUE(SemVer::try_parse(text).has_value()) << text;
    EXPECT_EQ(SemVer::parse(text).to_string(), text) << text;
  }
}

TEST(SemVer, StrictGrammarRejects) {
  for (const char* text : {"",
                           "v",
                           "1",
                           "1.2",
                           "1.2.3.4",
                           "01.2.3",
                           "1.02.3",
                           "1.2.03",
                           "1.2.3-",
                           "1.2.3+",
                           "1.2.3-01",
                           "1.2.3-alpha..1",
                           "1.2.3-alpha_beta",
                           "1.2.3+a..b",
                           "1.2.3 ",
                           " 1.2.3",
                           "-1.2.3",
                           "1.-2.3",
                           "a.b.c",
                           "latest",
                           "*",
                           "1.2.x",
                           "18446744073709551616.0.0",
                           "1.2.3-+",
                           "1.2.3+a+b",
                           "1..3",
                           "535.104.05"}) {
    EXPECT_FALSE(SemVer::try_parse(text).has_value()) << text;
    EXPECT_THROW(SemVer::parse(text), InvalidInput) << text;
  }
}

TEST(SemVer, ErrorNamesValueAndValidForm) {
  try {
    SemVer::parse("1.02.3");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"1.02.3\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("leading zero"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MAJOR.MINOR.PATCH"), std::string::npos) << msg;
  }
  try {
    SemVer::parse("1.2");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("three numeric parts"), std::string::npos);
  }
}

TEST(SemVer, LenientReadsPartialsDriversAndKernels) {
  EXPECT_EQ(SemVer::parse("1.32", true).to_string(), "1.32.0");
  EXPECT_EQ(SemVer::parse("v6", true).to_string(), "6.0.0");
  EXPECT_EQ(SemVer::parse("535.104.05", true).to_string(), "535.104.5");
  EXPECT_EQ(SemVer::parse("570.86.15", true).to_string(), "570.86.15");
  const SemVer kernel = SemVer::parse("6.8.0-1015-aws", true);
  EXPECT_EQ(kernel.release().to_string(), "6.8.0");
  EXPECT_EQ(kernel.prerelease, (std::vector<std::string>{"1015-aws"}));
  EXPECT_EQ(SemVer::parse("4.18.0-553.el8_10.x86_64", true).prerelease,
            (std::vector<std::string>{"553", "el8_10", "x86_64"}));
  EXPECT_EQ(SemVer::parse("v1.32.4-eks-1234", true).release().to_string(), "1.32.4");
  // Still not anything at all.
  EXPECT_FALSE(SemVer::try_parse("1.2.3.4", true));
  EXPECT_FALSE(SemVer::try_parse("latest", true));
  EXPECT_FALSE(SemVer::try_parse("", true));
  EXPECT_FALSE(SemVer::try_parse("1.", true));
}

// The precedence list from SemVer 2.0.0 section 11, plus core ordering.
TEST(SemVer, PrecedenceFollowsSpec) {
  const std::vector<std::string> ordered = {"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta",
                                            "1.0.0-beta",  "1.0.0-beta.2",  "1.0.0-beta.11",
                                            "1.0.0-rc.1",  "1.0.0",         "2.0.0",
                                            "2.1.0",       "2.1.1",         "10.0.0"};
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    for (std::size_t j = 0; j < ordered.size(); ++j) {
      const SemVer a = SemVer::parse(ordered[i]);
      const SemVer b = SemVer::parse(ordered[j]);
      EXPECT_EQ(compare(a, b), i < j ? -1 : (i > j ? 1 : 0)) << ordered[i] << " vs " << ordered[j];
      EXPECT_EQ(a < b, i < j);
      EXPECT_EQ(a == b, i == j);
    }
  }
}

TEST(SemVer, BuildMetadataIsIgnoredInPrecedence) {
  EXPECT_EQ(SemVer::parse("1.0.0+a"), SemVer::parse("1.0.0+b"));
  EXPECT_EQ(SemVer::parse("1.0.0-rc.1+x"), SemVer::parse("1.0.0-rc.1"));
  EXPECT_LT(SemVer::parse("1.0.0-rc.1+zzz"), SemVer::parse("1.0.0"));
}

TEST(SemVer, NumericIdentifiersCompareWithoutOverflow) {
  EXPECT_LT(SemVer::parse("1.0.0-99999999999999999999998"),
            SemVer::parse("1.0.0-99999999999999999999999"));
  EXPECT_LT(SemVer::parse("1.0.0-9"), SemVer::parse("1.0.0-10"));
  EXPECT_LT(SemVer::parse("1.0.0-10"), SemVer::parse("1.0.0-1a"));  // numeric < alphanumeric
}

bool satisfies(std::string_view constraint, std::string_view version) {
  return VersionConstraint::parse(constraint).satisfied_by(version);
}

TEST(VersionConstraint, ComparisonsAreVersionAware) {
  EXPECT_TRUE(satisfies(">= 1.32", "1.32.4"));
  EXPECT_TRUE(satisfies(">= 1.32", "1.32.0"));
  EXPECT_TRUE(satisfies(">=1.32", "v1.33.0"));
  EXPECT_FALSE(satisfies(">= 1.32", "1.31.9"));
  EXPECT_FALSE(satisfies(">= 1.32", "1.32.0-rc.1"));
  EXPECT_TRUE(satisfies("< 1.33", "1.32.99"));
  EXPECT_FALSE(satisfies("< 1.33", "1.33.0"));
  EXPECT_TRUE(satisfies("<= 1.32", "1.32.9"));
  EXPECT_FALSE(satisfies("<= 1.32", "1.33.0-rc.1"));
  EXPECT_FALSE(satisfies("<= 1.32", "1.33.0"));
  EXPECT_FALSE(satisfies("> 1.32", "1.32.9"));
  EXPECT_TRUE(satisfies("> 1.32", "1.33.0"));
  EXPECT_TRUE(satisfies("> 1.32.4", "1.32.5"));
  EXPECT_FALSE(satisfies("> 1.32.4", "1.32.4"));
  EXPECT_TRUE(satisfies("<= 1.32.4", "1.32.4"));
  EXPECT_TRUE(satisfies("== 570.86.15", "570.86.15"));
  EXPECT_FALSE(satisfies("== 570.86.15", "570.86.16"));
  EXPECT_TRUE(satisfies("= 1.2.3", "1.2.3+build"));
  EXPECT_TRUE(satisfies("1.2.3", "1.2.3"));
  EXPECT_TRUE(satisfies("== 1.32", "1.32.7"));
  EXPECT_FALSE(satisfies("== 1.32", "1.33.0"));
  EXPECT_TRUE(satisfies("!= 1.2.3", "1.2.4"));
  EXPECT_FALSE(satisfies("!= 1.2.3", "1.2.3"));
  EXPECT_FALSE(satisfies("!= 1.32", "1.32.5"));
  EXPECT_TRUE(satisfies("!= 1.32", "1.33.0"));
  EXPECT_TRUE(satisfies("!= 1.32", "1.31.0"));
}

TEST(VersionConstraint, TildeCaretAndWildcards) {
  EXPECT_TRUE(satisfies("~1.32", "1.32.9"));
  EXPECT_FALSE(satisfies("~1.32", "1.33.0"));
  EXPECT_TRUE(satisfies("~1.32.4", "1.32.5"));
  EXPECT_FALSE(satisfies("~1.32.4", "1.32.3"));
  EXPECT_FALSE(satisfies("~1.32.4", "1.33.0-rc.1"));
  EXPECT_TRUE(satisfies("~1", "1.9.0"));
  EXPECT_FALSE(satisfies("~1", "2.0.0"));
  EXPECT_TRUE(satisfies("^1.2", "1.9.9"));
  EXPECT_FALSE(satisfies("^1.2", "1.1.9"));
  EXPECT_FALSE(satisfies("^1.2", "2.0.0"));
  EXPECT_TRUE(satisfies("^0.2.3", "0.2.9"));
  EXPECT_FALSE(satisfies("^0.2.3", "0.3.0"));
  EXPECT_TRUE(satisfies("^0.0.3", "0.0.3"));
  EXPECT_FALSE(satisfies("^0.0.3", "0.0.4"));
  EXPECT_TRUE(satisfies("1.32.x", "1.32.3"));
  EXPECT_FALSE(satisfies("1.32.x", "1.33.0"));
  EXPECT_TRUE(satisfies("1.x", "1.99.0"));
  EXPECT_TRUE(satisfies("*", "0.0.1"));
}

TEST(VersionConstraint, CommaListIsAnd) {
  const VersionConstraint c = VersionConstraint::parse(">= 1.32, < 1.34,!= 1.33.1");
  EXPECT_TRUE(c.satisfied_by(SemVer::parse("1.32.0")));
  EXPECT_TRUE(c.satisfied_by(SemVer::parse("1.33.2")));
  EXPECT_FALSE(c.satisfied_by(SemVer::parse("1.33.1")));
  EXPECT_FALSE(c.satisfied_by(SemVer::parse("1.34.0")));
  EXPECT_FALSE(c.satisfied_by(SemVer::parse("1.31.0")));
  EXPECT_EQ(c.text(), ">= 1.32, < 1.34,!= 1.33.1");
}

TEST(VersionConstraint, KernelSuffixesSortBelowReleaseUnlessReleasePartIsUsed) {
  const SemVer kernel = SemVer::parse("6.8.0-1015-aws", true);
  const VersionConstraint at_least = VersionConstraint::parse(">= 6.8");
  EXPECT_FALSE(at_least.satisfied_by(kernel));
  EXPECT_TRUE(at_least.satisfied_by(kernel.release()));
}

TEST(VersionConstraint, RejectsBadConstraintsWithMessage) {
  for (const char* text :
       {"", " ", ">=", ">= 1.32,", ",< 2", ">= 1.32 < 1.34", "=> 1.0", ">= abc", "latest", "> *",
        "< x", "!= *", "~*", "^x", "1.x.3", ">= 1.2.3.4", "1.x-rc.1"}) {
    EXPECT_FALSE(VersionConstraint::try_parse(text).has_value()) << text;
  }
  try {
    VersionConstraint::parse(">= 1.32 < 1.34");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\">= 1.32 < 1.34\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("separate comparisons with ','"), std::string::npos) << msg;
  }
  EXPECT_THROW((void)VersionConstraint::parse(">= 1").satisfied_by("not-a-version"), InvalidInput);
}

TEST(IsExactPin, AcceptsOnlySingleVersions) {
  for (const char* pin :
       {"570.86.15", "v1.32.4", "535.104.05", "6.8.0-1015-aws", "1.0.0-rc.1", "v26.3.2+build.1"}) {
    EXPECT_TRUE(is_exact_pin(pin)) << pin;
  }
  for (const char* floating : {"", "latest", "stable", "*", "x", "1.32", "1", "1.x", "1.32.x",
                               "^1.2", "~1.2.3", ">=1.0", "1.0.0 - 2.0.0", "1.2.3 ", "v"}) {
    EXPECT_FALSE(is_exact_pin(floating)) << floating;
  }
}

}  // namespace
}  // namespace gpufleet::core
