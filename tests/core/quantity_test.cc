#include "core/quantity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/value.h"

namespace gpufleet::core {
namespace {

std::string canonical(std::string_view text) { return Quantity::parse(text).to_string(); }

// Input -> what the API server writes back.
TEST(Quantity, CanonicalFormsTable) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"100m", "100m"},
      {"1.5Gi", "1536Mi"},
      {"2e3", "2e3"},
      {"1k", "1k"},
      {"+1", "1"},
      {"0.5", "500m"},
      {"10Ki", "10Ki"},
      {"1E", "1E"},
      {"1000m", "1"},
      {"1.5", "1500m"},
      {"0", "0"},
      {"0Gi", "0"},
      {"-0", "0"},
      {"0.000", "0"},
      {"1Ki", "1Ki"},
      {"1024", "1024"},
      {"0.5Ki", "512"},
      {"1.5Ki", "1536"},
      {"1536Ki", "1536Ki"},
      {"1024Ki", "1Mi"},
      {"1000k", "1M"},
      {"1500k", "1500k"},
      {"1.5M", "1500k"},
      {"0.1m", "100u"},
      {"0.1n", "1n"},
      {"1n", "1n"},
      {"1000000n", "1m"},
      {"1u", "1u"},
      {"-1.5Gi", "-1536Mi"},
      {"-100m", "-100m"},
      {"1.5e3", "1500"},
      {"1e-3", "1e-3"},
      {"1E3", "1e3"},
      {"1e+6", "1e6"},
      {"12e1", "120"},
      {"1e0", "1"},
      {".5", "500m"},
      {"5.", "5"},
      {"1.0", "1"},
      {"0.001", "1m"},
      {"001", "1"},
      {"1.23456789012m", "1234568n"},
      {"-0.1n", "-1n"},
      {"7Ei", "7Ei"},
      {"1Ti", "1Ti"},
      {"1Pi", "1Pi"},
      {"1T", "1T"},
      {"1P", "1P"},
      {"1G", "1G"},
      {"9223372036854775807", "9223372036854775807"},
      {"1e-100000", "1e-9"},
      // Binary quantities are capped at 2^63-1 like the API server; decimal ones are not.
      {"8Ei", "9223372036854775807"},
      {"9Ei", "9223372036854775807"},
      {"9223372036854775807Ki", "9223372036854775807"},
      {"-9Ei", "-9223372036854775807"},
      {"9223372036854775808", "9223372036854775808"},
      {"-9223372036854775809", "-9223372036854775809"},
      {"12E", "12E"},
      {"99999E", "99999E"},
      {"1000E", "1e21"},
      {"5000E", "5e21"},
      {"1e21", "1e21"},
      {"1000000E", "1e24"},
      {"99999999999999999999999999999", "99999999999999999999999999999"},
      {"99999999999999999999999999999.999999999", "99999999999999999999999999999999999999n"},
      // From the API server's own tables.
      {"1024Mi", "1Gi"},
      {"300Mi", "300Mi"},
      {"1001Gi", "1001Gi"},
      {"1000M", "1G"},
      {"0.001T", "1G"},
      {".001Ki", "1024m"},
      {".000001Ki", "1024u"},
      {".000000001Ki", "1024n"},
      {".000000000001Ki", "2n"},
      {"1.G", "1G"},
      {"100.035k", "100035"},
      {"0.0005k", "500m"},
      {"3.001n", "4n"},
      {"1.1E-9", "2e-9"},
      {"0.00000012345", "124n"},
      {"0.5e-9", "1e-9"},
      {"0.08", "80m"},
      {"80e-3", "80e-3"},
      {"300e6", "300e6"},
      {"1.08", "1080m"},
      {"1080000000n", "1080m"},
      {"1025", "1025"},
      {"1.3E+6", "1300e3"},
      {"7.123456M", "7123456"},
  };
  for (const auto& [input, expected] : table) {
    EXPECT_EQ(canonical(input), expected) << input;
    // Canonical text reads back to the same value and the same text.
    EXPECT_EQ(canonical(canonical(input)), expected) << input;
    EXPECT_EQ(Quantity::parse(canonical(input)), Quantity::parse(input)) << input;
  }
}

TEST(Quantity, RemembersFormat) {
  EXPECT_EQ(Quantity::parse("1Gi").format(), Quantity::Format::BinarySI);
  EXPECT_EQ(Quantity::parse("1G").format(), Quantity::Format::DecimalSI);
  EXPECT_EQ(Quantity::parse("1").format(), Quantity::Format::DecimalSI);
  EXPECT_EQ(Quantity::parse("1e3").format(), Quantity::Format::DecimalExponent);
}

TEST(Quantity, RejectsBadInputNamingValueAndForms) {
  for (const char* text : {"",
                           " ",
                           " 1",
                           "1 ",
                           "1.5.5",
                           "abc",
                           "1Kb",
                           "1e",
                           "1e+",
                           "1ki",
                           "1 Gi",
                           "--1",
                           "+-1",
                           "1K",
                           "Gi",
                           ".",
                           "+",
                           "-",
                           "1.5gi",
                           "1e1.5",
                           "0x10",
                           "1,000",
                           "1mm",
                           "1Gi ",
                           "1e3k",
                           "\xff",
                           "１",
                           "1.1.M",
                           "1+1.0M",
                           "0.1mi",
                           "0.1am",
                           ".5i",
                           "1i",
                           "-3.01i",
                           "-3.01e-",
                           "1e100",
                           "100000000000000000000000000000",
                           "1e29"}) {
    EXPECT_FALSE(Quantity::try_parse(text).has_value()) << text;
    EXPECT_THROW(Quantity::parse(text), InvalidInput) << text;
  }
  try {
    Quantity::parse("1Kb");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"1Kb\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown suffix 'Kb'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Ki Mi Gi"), std::string::npos) << msg;
  }
}

TEST(Quantity, ComparesByValueExactly) {
  EXPECT_EQ(Quantity::parse("1Ki"), Quantity::parse("1024"));
  EXPECT_EQ(Quantity::parse("1"), Quantity::parse("1000m"));
  EXPECT_GT(Quantity::parse("1Gi"), Quantity::parse("1G"));
  EXPECT_LT(Quantity::parse("100m"), Quantity::parse("1"));
  EXPECT_LT(Quantity::parse("-1"), Quantity::parse("0"));
  // Differences far below double precision still compare correctly.
  EXPECT_LT(Quantity::parse("9223372036854775806"), Quantity::parse("9223372036854775807"));
  EXPECT_LT(Quantity::parse("1000000000000.000000001"), Quantity::parse("1000000000000.000000002"));
  std::vector<Quantity> v = {Quantity::parse("2Gi"), Quantity::parse("1"), Quantity::parse("500m"),
                             Quantity::parse("1M")};
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v[0].to_string(), "500m");
  EXPECT_EQ(v[3].to_string(), "2Gi");
}

TEST(Quantity, Arithmetic) {
  EXPECT_EQ((Quantity::parse("1.5Gi") + Quantity::parse("512Mi")).to_string(), "2Gi");
  EXPECT_EQ((Quantity::parse("1") + Quantity::parse("500m")).to_string(), "1500m");
  EXPECT_EQ((Quantity::parse("1") - Quantity::parse("1500m")).to_string(), "-500m");
  EXPECT_EQ((-Quantity::parse("2Gi")).to_string(), "-2Gi");
  EXPECT_EQ((Quantity::parse("80Gi") * 8).to_string(), "640Gi");
  Quantity total;
  for (int i = 0; i < 3; ++i) total += Quantity::parse("250m");
  EXPECT_EQ(total.to_string(), "750m");
  const Quantity int64_max = Quantity::from_int64(std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ((int64_max + Quantity::parse("1")).to_string(), "9223372036854775808");
  const Quantity max = Quantity::parse("99999999999999999999999999999.999999999");
  EXPECT_THROW((void)(max + Quantity::parse("1n")), InvalidInput);
  EXPECT_THROW((void)(-max - Quantity::parse("1n")), InvalidInput);
  EXPECT_THROW((void)(max + max), InvalidInput);
  EXPECT_EQ((Quantity::parse("1Ei") * 16).to_string(), "16Ei");
  EXPECT_THROW((void)(Quantity::parse("1Ei") * std::numeric_limits<std::int64_t>::max()),
               InvalidInput);
  EXPECT_THROW((void)(max * std::numeric_limits<std::int64_t>::min()), InvalidInput);
}

TEST(Quantity, IntegerAndDoubleViews) {
  EXPECT_EQ(Quantity::parse("100m").as_int64(), 1);
  EXPECT_EQ(Quantity::parse("-100m").as_int64(), -1);
  EXPECT_EQ(Quantity::parse("1.5Gi").as_int64(), 1610612736);
  EXPECT_EQ(Quantity::parse("1.5").as_int64_milli(), 1500);
  EXPECT_EQ(Quantity::parse("0.1m").as_int64_milli(), 1);
  EXPECT_EQ(Quantity::parse("-0.1m").as_int64_milli(), -1);
  EXPECT_EQ(Quantity::parse("9P").as_int64_milli(), 9'000'000'000'000'000'000);
  EXPECT_THROW((void)Quantity::parse("1E").as_int64_milli(), InvalidInput);
  EXPECT_EQ(Quantity::parse("9223372036854775807").as_int64(), 9223372036854775807);
  EXPECT_THROW((void)Quantity::parse("12E").as_int64(), InvalidInput);
  EXPECT_THROW((void)Quantity::parse("9223372036854775807.1").as_int64(), InvalidInput);
  EXPECT_EQ(Quantity::parse("2k").as_exact_int64(), 2000);
  EXPECT_EQ(Quantity::parse("-9223372036854775808").as_exact_int64(),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(Quantity::parse("1500m").as_exact_int64(), std::nullopt);
  EXPECT_EQ(Quantity::parse("12E").as_exact_int64(), std::nullopt);
  EXPECT_EQ(Quantity::parse("9223372036854775808").as_exact_int64(), std::nullopt);
  EXPECT_DOUBLE_EQ(Quantity::parse("1.5Gi").as_double(), 1610612736.0);
  EXPECT_DOUBLE_EQ(Quantity::parse("100m").as_double(), 0.1);
  EXPECT_DOUBLE_EQ(Quantity::parse("-2.5").as_double(), -2.5);
  EXPECT_EQ(Quantity::from_milli(1500).to_string(), "1500m");
  EXPECT_EQ(Quantity::from_int64(2048, Quantity::Format::BinarySI).to_string(), "2Ki");
  EXPECT_EQ(Quantity::parse("0").sign(), 0);
  EXPECT_TRUE(Quantity::parse("0Mi").is_zero());
}

TEST(Quantity, FromJsonValue) {
  EXPECT_EQ(Quantity::from_value(Value("1.5Gi")).to_string(), "1536Mi");
  EXPECT_EQ(Quantity::from_value(Value(8)).to_string(), "8");
  EXPECT_EQ(Quantity::from_value(Value(0.5)).to_string(), "500m");
  EXPECT_EQ(Quantity::from_value(Value(std::uint64_t{18446744073709551615u})).to_string(),
            "18446744073709551615");
  EXPECT_EQ(Quantity::from_value(Value(" 1 ")).to_string(), "1");  // as the API server trims
  EXPECT_EQ(Quantity::from_value(Value(1e21)).to_string(), "1e21");
  EXPECT_THROW((void)Quantity::from_value(Value(1e300)), InvalidInput);
  try {
    (void)Quantity::from_value(Value(true), "resources.limits.memory");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("resources.limits.memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bool"), std::string::npos) << msg;
  }
  try {
    (void)Quantity::from_value(Value("lots"), "spec.gpus");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("spec.gpus: invalid quantity \"lots\""), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpufleet::core
