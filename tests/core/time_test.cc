#include "core/time.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"

namespace gpufleet::core {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(Duration, ParsesGoDurations) {
  EXPECT_EQ(parse_duration("1h30m"), hours(1) + minutes(30));
  EXPECT_EQ(parse_duration("300ms"), milliseconds(300));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1500));
  EXPECT_EQ(parse_duration("-2m"), minutes(-2));
  EXPECT_EQ(parse_duration("+2m"), minutes(2));
  EXPECT_EQ(parse_duration("0"), nanoseconds(0));
  EXPECT_EQ(parse_duration("-0"), nanoseconds(0));
  EXPECT_EQ(parse_duration("0s"), nanoseconds(0));
  EXPECT_EQ(parse_duration(".5s"), milliseconds(500));
  EXPECT_EQ(parse_duration("1.s"), seconds(1));
  EXPECT_EQ(parse_duration("10ns"), nanoseconds(10));
  EXPECT_EQ(parse_duration("10us"), microseconds(10));
  EXPECT_EQ(parse_duration("10\xC2\xB5s"), microseconds(10));
  EXPECT_EQ(parse_duration("10\xCE\xBCs"), microseconds(10));
  EXPECT_EQ(
      parse_duration("1h1m1s1ms1us1ns"),
      hours(1) + minutes(1) + seconds(1) + milliseconds(1) + microseconds(1) + nanoseconds(1));
  EXPECT_EQ(parse_duration("1.000000001s"), seconds(1) + nanoseconds(1));
  EXPECT_EQ(parse_duration("0.0000000009s"), nanoseconds(0));  // below 1ns truncates
  EXPECT_EQ(parse_duration("1.1h"), minutes(66));
  EXPECT_EQ(parse_duration("2562047h47m16.854775807s"),
            nanoseconds(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(parse_duration("-9223372036854775808ns"),
            nanoseconds(std::numeric_limits<std::int64_t>::min()));
  EXPECT_EQ(parse_duration("0.100000000000000000000h"), minutes(6));
}

TEST(Duration, RejectsBadInput) {
  for (const char* text : {"",
                           "-",
                           "+",
                           "1",
                           "10",
                           "1x",
                           "1hh",
                           "h",
                           ".s",
                           "1..5s",
                           "1h-",
                           "1 h",
                           " 1h",
                           "1h ",
                           "1.5.5s",
                           "--1s",
                           "1S",
                           "1H",
                           "1d",
                           "1e3s",
                           "9223372036854775808ns",
                           "2562048h",
                           "-9223372036854775809ns",
                           "99999999999999999999s",
                           "1h30"}) {
    EXPECT_FALSE(try_parse_duration(text).has_value()) << text;
    EXPECT_THROW(parse_duration(text), InvalidInput) << text;
  }
  try {
    parse_duration("5d");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"5d\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown unit 'd'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1h30m"), std::string::npos) << msg;
  }
}

TEST(Duration, FormatsLikeGo) {
  const std::vector<std::pair<nanoseconds, std::string>> table = {
      {nanoseconds(0), "0s"},
      {nanoseconds(1), "1ns"},
      {nanoseconds(999), "999ns"},
      {nanoseconds(1500), "1.5\xC2\xB5s"},
      {microseconds(10), "10\xC2\xB5s"},
      {milliseconds(300), "300ms"},
      {nanoseconds(1'500'001), "1.500001ms"},
      {milliseconds(1500), "1.5s"},
      {seconds(1), "1s"},
      {minutes(-2), "-2m0s"},
      {hours(1) + minutes(30), "1h30m0s"},
      {hours(1), "1h0m0s"},
      {seconds(61), "1m1s"},
      {hours(100) + nanoseconds(1), "100h0m0.000000001s"},
      {nanoseconds(std::numeric_limits<std::int64_t>::max()), "2562047h47m16.854775807s"},
      {nanoseconds(std::numeric_limits<std::int64_t>::min()), "-2562047h47m16.854775808s"},
  };
  for (const auto& [d, text] : table) {
    EXPECT_EQ(format_duration(d), text);
    EXPECT_EQ(parse_duration(text), d) << text;
  }
}

TEST(Duration, FormatsSeconds) {
  EXPECT_EQ(format_duration_seconds(hours(1) + minutes(30)), "5400s");
  EXPECT_EQ(format_duration_seconds(milliseconds(1500)), "1.5s");
  EXPECT_EQ(format_duration_seconds(nanoseconds(-1)), "-0.000000001s");
  EXPECT_EQ(format_duration_seconds(nanoseconds(0)), "0s");
}

TEST(Timestamp, ParsesRfc3339) {
  EXPECT_EQ(Timestamp::parse_rfc3339("1970-01-01T00:00:00Z"), (Timestamp{0, 0}));
  EXPECT_EQ(Timestamp::parse_rfc3339("2024-05-01T12:00:00Z").seconds, 1714564800);
  EXPECT_EQ(Timestamp::parse_rfc3339("2024-05-01T14:00:00+02:00").seconds, 1714564800);
  EXPECT_EQ(Timestamp::parse_rfc3339("2024-05-01T06:30:00-05:30").seconds, 1714564800);
  EXPECT_EQ(Timestamp::parse_rfc3339("2024-05-01t12:00:00z").seconds, 1714564800);
  const Timestamp t = Timestamp::parse_rfc3339("2024-05-01T12:00:00.5Z");
  EXPECT_EQ(t.nanos, 500'000'000);
  EXPECT_EQ(Timestamp::parse_rfc3339("2024-05-01T12:00:00.000000001Z").nanos, 1);
  EXPECT_EQ(Timestamp::parse_rfc3339("2024-02-29T00:00:00Z").seconds, 1709164800);
  EXPECT_EQ(Timestamp::parse_rfc3339("1969-12-31T23:59:59.5Z"), (Timestamp{-1, 500'000'000}));
  EXPECT_EQ(Timestamp::parse_rfc3339("0001-01-01T00:00:00Z").seconds, Timestamp::kMinSeconds);
  EXPECT_EQ(Timestamp::parse_rfc3339("9999-12-31T23:59:59.999999999Z"),
            (Timestamp{Timestamp::kMaxSeconds, 999'999'999}));
}

TEST(Timestamp, RejectsBadInput) {
  for (const char* text : {"",
                           "2024-05-01",
                           "2024-05-01T12:00:00",
                           "2024-05-01 12:00:00Z",
                           "2024-5-01T12:00:00Z",
                           "2023-02-29T00:00:00Z",
                           "2024-13-01T00:00:00Z",
                           "2024-00-01T00:00:00Z",
                           "2024-04-31T00:00:00Z",
                           "2024-05-01T24:00:00Z",
                           "2024-05-01T12:60:00Z",
                           "2024-05-01T12:00:60Z",
                           "2024-05-01T12:00:00.Z",
                           "2024-05-01T12:00:00.1234567891Z",
                           "2024-05-01T12:00:00+2:00",
                           "2024-05-01T12:00:00+24:00",
                           "2024-05-01T12:00:00+02:60",
                           "2024-05-01T12:00:00ZZ",
                           "0000-12-31T23:59:59Z",
                           "0001-01-01T00:00:00+00:01",
                           "9999-12-31T23:59:59-00:01",
                           "x024-05-01T12:00:00Z",
                           " 2024-05-01T12:00:00Z",
                           "2024-05-01T12:00:00+0200"}) {
    EXPECT_FALSE(Timestamp::try_parse_rfc3339(text).has_value()) << text;
    EXPECT_THROW(Timestamp::parse_rfc3339(text), InvalidInput) << text;
  }
  try {
    Timestamp::parse_rfc3339("2023-02-29T00:00:00Z");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("\"2023-02-29T00:00:00Z\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("day 29 does not exist in 2023-02"), std::string::npos) << msg;
  }
  try {
    Timestamp::parse_rfc3339("2024-05-01T12:00:60Z");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("leap seconds"), std::string::npos) << e.what();
  }
}

TEST(Timestamp, FormatsRfc3339) {
  const Timestamp t = Timestamp::parse_rfc3339("2024-05-01T14:00:00.25+02:00");
  EXPECT_EQ(t.to_rfc3339(), "2024-05-01T12:00:00.25Z");
  EXPECT_EQ(t.to_rfc3339(TimestampPrecision::Seconds), "2024-05-01T12:00:00Z");
  EXPECT_EQ(t.to_rfc3339(TimestampPrecision::Micros), "2024-05-01T12:00:00.250000Z");
  EXPECT_EQ((Timestamp{0, 0}).to_rfc3339(), "1970-01-01T00:00:00Z");
  EXPECT_EQ((Timestamp{-1, 500'000'000}).to_rfc3339(), "1969-12-31T23:59:59.5Z");
  EXPECT_EQ((Timestamp{Timestamp::kMinSeconds, 0}).to_rfc3339(), "0001-01-01T00:00:00Z");
  EXPECT_EQ((Timestamp{Timestamp::kMaxSeconds, 999'999'999}).to_rfc3339(),
            "9999-12-31T23:59:59.999999999Z");
  for (const char* text : {"2000-02-29T23:59:59.000000001Z", "1900-03-01T00:00:00Z",
                           "2100-12-31T00:00:00.123Z", "1583-10-15T01:02:03Z"}) {
    EXPECT_EQ(Timestamp::parse_rfc3339(text).to_rfc3339(), text);
  }
}

TEST(Timestamp, ArithmeticAndOrder) {
  const Timestamp a = Timestamp::parse_rfc3339("2024-05-01T12:00:00Z");
  const Timestamp b = a + parse_duration("1h30m0.5s");
  EXPECT_EQ(b.to_rfc3339(), "2024-05-01T13:30:00.5Z");
  EXPECT_EQ(b - a, parse_duration("1h30m0.5s"));
  EXPECT_EQ((a - nanoseconds(1)).to_rfc3339(), "2024-05-01T11:59:59.999999999Z");
  EXPECT_LT(a, b);
  EXPECT_LT((Timestamp{-1, 999'999'999}), (Timestamp{0, 0}));
  const Timestamp max{Timestamp::kMaxSeconds, 999'999'999};
  EXPECT_THROW((void)(max + nanoseconds(1)), InvalidInput);
  EXPECT_THROW((void)(Timestamp{Timestamp::kMinSeconds, 0} - nanoseconds(1)), InvalidInput);
  EXPECT_THROW((void)(max - Timestamp{Timestamp::kMinSeconds, 0}), InvalidInput);
}

TEST(Timestamp, SystemClockRoundTrip) {
  const Timestamp now = Timestamp::now();
  EXPECT_GT(now.seconds, 1'700'000'000);
  EXPECT_EQ(Timestamp::from_time_point(now.to_time_point()), now);
  EXPECT_EQ(Timestamp::from_unix_nanos(1'500'000'000), (Timestamp{1, 500'000'000}));
  EXPECT_EQ(Timestamp::from_unix_nanos(-1), (Timestamp{-1, 999'999'999}));
  EXPECT_THROW((void)(Timestamp{Timestamp::kMinSeconds, 0}.to_time_point()), InvalidInput);
}

}  // namespace
}  // namespace gpufleet::core

namespace gpufleet::core {
namespace {

TEST(Timestamp, TryArithmeticReportsRange) {
  const Timestamp max{Timestamp::kMaxSeconds, 999'999'999};
  EXPECT_FALSE(max.try_add(std::chrono::nanoseconds(1)));
  EXPECT_EQ(max.try_add(std::chrono::nanoseconds(-999'999'999)),
            (Timestamp{Timestamp::kMaxSeconds, 0}));
  const Timestamp min{Timestamp::kMinSeconds, 0};
  EXPECT_FALSE(max.try_since(min));  // about 10000 years: beyond int64 nanoseconds
  EXPECT_EQ((Timestamp{10, 0}.try_since(Timestamp{9, 500'000'000})),
            std::chrono::milliseconds(500));
  EXPECT_TRUE(Timestamp::in_range(0));
  EXPECT_FALSE(Timestamp::in_range(Timestamp::kMaxSeconds + 1));
}

TEST(CivilTime, SplitsCalendarFields) {
  // 2024-02-29T23:59:58Z, a Thursday, day 59 of a leap year.
  const CivilTime c = civil_time(Timestamp::parse_rfc3339("2024-02-29T23:59:58Z"));
  EXPECT_EQ(c.year, 2024);
  EXPECT_EQ(c.month, 2);
  EXPECT_EQ(c.day, 29);
  EXPECT_EQ(c.hour, 23);
  EXPECT_EQ(c.minute, 59);
  EXPECT_EQ(c.second, 58);
  EXPECT_EQ(c.day_of_week, 4);
  EXPECT_EQ(c.day_of_year, 59);
  // Two hours east is the next day, a Friday.
  const CivilTime east = civil_time(Timestamp::parse_rfc3339("2024-02-29T23:59:58Z"), 7200);
  EXPECT_EQ(east.month, 3);
  EXPECT_EQ(east.day, 1);
  EXPECT_EQ(east.day_of_week, 5);
  // Before 1970 and at the start of the range.
  const CivilTime first = civil_time(Timestamp{Timestamp::kMinSeconds, 0});
  EXPECT_EQ(first.year, 1);
  EXPECT_EQ(first.day_of_week, 1);  // 0001-01-01 was a Monday
  const CivilTime before = civil_time(Timestamp{-1, 0});
  EXPECT_EQ(before.year, 1969);
  EXPECT_EQ(before.second, 59);
}

TEST(ZoneOffset, FixedOffsetsAndIanaNames) {
  const Timestamp summer = Timestamp::parse_rfc3339("2024-07-01T12:00:00Z");
  const Timestamp winter = Timestamp::parse_rfc3339("2024-01-01T12:00:00Z");
  EXPECT_EQ(zone_offset("UTC", summer), 0);
  EXPECT_EQ(zone_offset("Z", summer), 0);
  EXPECT_EQ(zone_offset("+05:30", summer), 19800);
  EXPECT_EQ(zone_offset("-02:30", summer), -9000);
  EXPECT_EQ(zone_offset("02:00", summer), 7200);  // CEL: unsigned means east
  EXPECT_EQ(zone_offset("Europe/Paris", summer), 7200);
  EXPECT_EQ(zone_offset("Europe/Paris", winter), 3600);
  EXPECT_EQ(zone_offset("Asia/Kathmandu", winter), 20700);
  // Far beyond the last listed transition: the POSIX rule of the zone applies.
  EXPECT_EQ(zone_offset("Europe/Paris", Timestamp::parse_rfc3339("2090-07-01T00:00:00Z")), 7200);
  for (std::string_view bad : {"", "2:00", "+24:00", "+02:60", "+0200", "Mars/Olympus",
                               "../../etc/passwd", "/etc/localtime", "file:/etc/passwd",
                               "Europe/../Europe/Paris", "Asia", "US/", "Europe//Paris"}) {
    EXPECT_FALSE(zone_offset(bad, summer)) << bad;
  }
}

}  // namespace
}  // namespace gpufleet::core

namespace gpufleet::core {
namespace {

TEST(Timestamp, HttpDatesOfCloudMetadataServices) {
  // Azure Scheduled Events (with weekday) and EC2 instance metadata (without).
  auto azure = Timestamp::try_parse_http_date("Mon, 19 Sep 2016 18:29:47 GMT");
  ASSERT_TRUE(azure);
  EXPECT_EQ(azure->to_rfc3339(), "2016-09-19T18:29:47Z");
  EXPECT_EQ(azure->to_http_date(), "Mon, 19 Sep 2016 18:29:47 GMT");
  auto aws = Timestamp::try_parse_http_date("21 Jan 2019 09:00:43 GMT");
  ASSERT_TRUE(aws);
  EXPECT_EQ(aws->to_rfc3339(), "2019-01-21T09:00:43Z");
  for (const char* bad : {"", "2019-01-21T09:00:43Z", "21 Foo 2019 09:00:43 GMT",
                          "32 Jan 2019 09:00:43 GMT", "21 Jan 2019 09:00:43", "Mon, 19 Sep"}) {
    EXPECT_FALSE(Timestamp::try_parse_http_date(bad)) << bad;
  }
}

}  // namespace
}  // namespace gpufleet::core
