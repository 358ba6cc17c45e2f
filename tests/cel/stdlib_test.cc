#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace gpufleet::cel {
namespace {

using testing::eval;
using ::testing::HasSubstr;

TEST(CelStdlib, TimeZones) {
  // 2024-07-01T12:00:00Z: Paris is on summer time (+2), New York (-4), Kathmandu (+5:45).
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getHours('Europe/Paris')").as_int(), 14);
  EXPECT_EQ(eval("timestamp('2024-01-01T12:00:00Z').getHours('Europe/Paris')").as_int(), 13);
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getHours('America/New_York')").as_int(), 8);
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getMinutes('Asia/Kathmandu')").as_int(), 45);
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getHours('-03:30')").as_int(), 8);
  // The CEL specification allows an offset without a sign: east of UTC.
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getHours('02:00')").as_int(), 14);
  EXPECT_EQ(eval("timestamp('2024-07-01T23:30:00Z').getDate('00:30')").as_int(), 2);
  EXPECT_TRUE(eval("timestamp('2024-07-01T12:00:00Z').getHours('2:00')").is_error());
  EXPECT_TRUE(eval("timestamp('2024-07-01T12:00:00Z').getHours('24:00')").is_error());
  // Beyond the last transition listed in the file: the POSIX TZ footer rule applies.
  EXPECT_EQ(eval("timestamp('2090-07-01T12:00:00Z').getHours('Europe/Paris')").as_int(), 14);
  EXPECT_EQ(eval("timestamp('2090-01-01T12:00:00Z').getHours('Europe/Paris')").as_int(), 13);
  EXPECT_EQ(eval("timestamp('2090-07-01T12:00:00Z').getHours('Australia/Sydney')").as_int(), 22);
  EXPECT_EQ(eval("timestamp('2090-01-01T12:00:00Z').getHours('Australia/Sydney')").as_int(), 23);
  // Summer time starts on the last Sunday of March (2090-03-26) at 01:00 UTC.
  EXPECT_EQ(eval("timestamp('2090-03-26T00:59:59Z').getHours('Europe/Paris')").as_int(), 1);
  EXPECT_EQ(eval("timestamp('2090-03-26T01:00:00Z').getHours('Europe/Paris')").as_int(), 3);
  EXPECT_THAT(eval("timestamp('2024-07-01T12:00:00Z').getHours('Mars/Olympus')").error_message(),
              HasSubstr("unknown time zone 'Mars/Olympus'"));
  EXPECT_TRUE(eval("timestamp('2024-07-01T12:00:00Z').getHours('../../etc/passwd')").is_error());
  // Directories of the tz database are not zones (found by eval_fuzz).
  EXPECT_TRUE(eval("timestamp('2009-02-13T23:31:30Z').getMinutes('Asia')").is_error());
  EXPECT_TRUE(eval("timestamp('2008-03-13T23:31:30Z').getDayOfMonth('US/')").is_error());
}

TEST(CelStdlib, TimestampsAndDurations) {
  EXPECT_EQ(eval("timestamp('2024-02-29T23:59:59.5+01:00')").debug_string(),
            "2024-02-29T22:59:59.5Z");
  EXPECT_TRUE(eval("timestamp('2023-02-29T00:00:00Z')").is_error());
  EXPECT_EQ(eval("duration('1h2m3.5s')").debug_string(), "3723.5s");
  EXPECT_EQ(eval("duration('-1.5ms')").debug_string(), "-0.0015s");
  EXPECT_TRUE(eval("duration('5 minutes')").is_error());
  EXPECT_EQ(eval("timestamp('2024-03-10T00:00:00Z').getDayOfWeek()").as_int(), 0);
  EXPECT_EQ(eval("timestamp('2024-12-31T00:00:00Z').getDayOfYear()").as_int(), 365);
  EXPECT_EQ(eval("timestamp('1969-12-31T23:59:59Z').getFullYear()").as_int(), 1969);
}

TEST(CelStdlib, StringsExtension) {
  EXPECT_EQ(eval("'a,b,,c'.split(',')").debug_string(), "[a, b, , c]");
  EXPECT_EQ(eval("'hello'.substring(1, 3)").text(), "el");
  EXPECT_EQ(eval("'%s has %d GPUs (%.1f%%)'.format(['node-1', 8, 99.5])").text(),
            "node-1 has 8 GPUs (99.5%)");
  EXPECT_EQ(eval("['a', 'b'].join(', ')").text(), "a, b");
  EXPECT_EQ(eval("'  x '.trim()").text(), "x");
  EXPECT_EQ(eval("'Ab'.lowerAscii() + 'Ab'.upperAscii()").text(), "abAB");
  EXPECT_TRUE(eval("'NVIDIA-H100-80GB'.matches('^NVIDIA-H1[0-9]{2}')").as_bool());
  EXPECT_EQ(eval("'é'.size()").as_int(), 1);
  EXPECT_EQ(eval("'driver 535.104.05 ok'.find('[0-9]+[.][0-9]+')").text(), "535.104");
  EXPECT_EQ(eval("'abc'.find('[0-9]')").text(), "");
  EXPECT_EQ(eval("'a1b22c333'.findAll('[0-9]+')").debug_string(), "[1, 22, 333]");
  EXPECT_EQ(eval("'a1b22c333'.findAll('[0-9]+', 2)").debug_string(), "[1, 22]");
  EXPECT_EQ(eval("'ab'.findAll('x*')").size(), 3u);  // empty matches advance
  Env env;
  env.variable("re", "string");
  Activation act;
  act.bind("re", Val::string_view("("));
  EXPECT_THAT(compile("'a'.find(re)", env).evaluate(act).error_message(),
              HasSubstr("invalid regular expression"));
}

TEST(CelStdlib, ListHelpers) {
  EXPECT_TRUE(eval("[1, 2, 2, 5].isSorted()").as_bool());
  EXPECT_EQ(eval("[1, 2, 3].sum()").as_int(), 6);
  EXPECT_EQ(eval("[3, 1, 2].min()").as_int(), 1);
  EXPECT_EQ(eval("[3, 1, 2].max()").as_int(), 3);
  EXPECT_EQ(eval("[1, 2, 3, 2].indexOf(2)").as_int(), 1);
  EXPECT_EQ(eval("[1, 2, 3, 2].lastIndexOf(2)").as_int(), 3);
  EXPECT_EQ(eval("[[1], [2, 3]].flatten()").debug_string(), "[1, 2, 3]");
  EXPECT_EQ(eval("[3, 1, 2].sort()").debug_string(), "[1, 2, 3]");
  EXPECT_EQ(eval("[1, 1, 2].distinct()").debug_string(), "[1, 2]");
  EXPECT_EQ(eval("[1, 2, 3, 4].slice(1, 3)").debug_string(), "[2, 3]");
  EXPECT_TRUE(eval("[].min()").is_error());
}

TEST(CelStdlib, Quantity) {
  EXPECT_TRUE(eval("quantity('1Gi') > quantity('1G')").as_bool());  // operators order them too
  EXPECT_TRUE(eval("quantity('1Gi').isGreaterThan(quantity('1G'))").as_bool());
  EXPECT_TRUE(eval("quantity('1024Mi') == quantity('1Gi')").as_bool());
  EXPECT_EQ(eval("quantity('1.5').add(quantity('500m'))").debug_string(), "2");
  EXPECT_EQ(eval("quantity('8').asInteger()").as_int(), 8);
  EXPECT_TRUE(eval("quantity('1500m').asInteger()").is_error());
  EXPECT_FALSE(eval("quantity('1500m').isInteger()").as_bool());
  EXPECT_TRUE(eval("isQuantity('2Ki') && !isQuantity('2 KiB')").as_bool());
  EXPECT_THAT(eval("quantity('lots')").error_message(), HasSubstr("cannot parse 'lots'"));
  EXPECT_EQ(eval("quantity('-3').sign()").as_int(), -1);
  EXPECT_FALSE(eval("quantity('12E').isInteger()").as_bool());  // beyond int64
  EXPECT_TRUE(eval("quantity('12E').asInteger()").is_error());
  EXPECT_EQ(eval("quantity('2k').asInteger()").as_int(), 2000);
}

TEST(CelStdlib, Semver) {
  EXPECT_TRUE(eval("semver('1.32.4').isLessThan(semver('1.33.0'))").as_bool());
  EXPECT_TRUE(eval("semver('1.0.0-rc.1') < semver('1.0.0')").as_bool());
  EXPECT_TRUE(eval("semver('1.0.0-rc.1').compareTo(semver('1.0.0')) == -1").as_bool());
  EXPECT_EQ(eval("semver('570.86.15').major()").as_int(), 570);
  EXPECT_TRUE(eval("semver('v1.2.3')").is_error());
  EXPECT_EQ(eval("semver('v1.32', true).minor()").as_int(), 32);
  EXPECT_TRUE(eval("isSemver('1.2.3') && !isSemver('latest')").as_bool());
  EXPECT_TRUE(eval("semver('1.2.3') == semver('1.2.3+build.7')").as_bool());
}

}  // namespace
}  // namespace gpufleet::cel
