#include "core/log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/json.h"
#include "core/utf8.h"

namespace gpufleet::core {
namespace {

using namespace std::chrono_literals;

std::string line(log::Level level, std::string_view msg, log::Fields fields,
                 log::Format format = log::Format::Logfmt) {
  return log::format_line(level, msg, std::span<const log::Field>(fields.begin(), fields.size()),
                          format, std::nullopt);
}

// Captures lines written through the global logger, restoring defaults afterwards.
class LogCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    log::set_sink([this](std::string_view l) { lines.emplace_back(l); });
    log::set_timestamps(false);
  }
  void TearDown() override {
    log::set_sink({});
    log::set_timestamps(true);
    log::set_level(log::Level::Info);
    log::set_format(log::Format::Logfmt);
  }
  std::vector<std::string> lines;
};

TEST(LogFormat, LogfmtGolden) {
  const std::string name = "gpu-7";
  EXPECT_EQ(line(log::Level::Info, "node quarantined",
                 {{"node", name}, {"count", 3}, {"ok", true}, {"after", 1500ms}, {"ratio", 0.25}}),
            "level=info msg=\"node quarantined\" node=gpu-7 count=3 ok=true after=1.5s "
            "ratio=0.25\n");
  EXPECT_EQ(line(log::Level::Warn, "x", {{"empty", ""}, {"eq", "a=b"}, {"quote", "say \"hi\""}}),
            "level=warn msg=x empty=\"\" eq=\"a=b\" quote=\"say \\\"hi\\\"\"\n");
  EXPECT_EQ(line(log::Level::Error, "multi\nline", {{"tab", "a\tb"}, {"ctl", "\x01"}}),
            "level=error msg=\"multi\\nline\" tab=\"a\\tb\" ctl=\"\\u0001\"\n");
  EXPECT_EQ(line(log::Level::Debug, "k", {{"bad key", 1}, {"", 2}, {"k=v", 3}}),
            "level=debug msg=k bad_key=1 _=2 k_v=3\n");
  EXPECT_EQ(line(log::Level::Info, "n",
                 {{"neg", -5},
                  {"big", std::numeric_limits<std::uint64_t>::max()},
                  {"nan", std::nan("")},
                  {"inf", -INFINITY}}),
            "level=info msg=n neg=-5 big=18446744073709551615 nan=NaN inf=-Inf\n");
}

TEST(LogFormat, ValuesAndTimestamps) {
  Value v;
  v["gpus"] = 8;
  v["name"] = "a b";
  EXPECT_EQ(line(log::Level::Info, "v", {{"obj", v}, {"null", Value()}, {"s", Value("x y")}}),
            "level=info msg=v obj=\"{\\\"gpus\\\":8,\\\"name\\\":\\\"a b\\\"}\" null=null "
            "s=\"x y\"\n");
  EXPECT_EQ(
      line(log::Level::Info, "v", {{"obj", v}, {"list", Value(List{1, "two"})}}, log::Format::Json),
      "{\"level\":\"info\",\"msg\":\"v\",\"obj\":{\"gpus\":8,\"name\":\"a b\"},"
      "\"list\":[1,\"two\"]}\n");
  const Timestamp t = Timestamp::parse_rfc3339("2024-05-01T12:00:00.5Z");
  const log::Field f[] = {{"at", t}};
  EXPECT_EQ(log::format_line(log::Level::Info, "t", f, log::Format::Logfmt, t),
            "time=2024-05-01T12:00:00.500000Z level=info msg=t at=2024-05-01T12:00:00.5Z\n");
  EXPECT_EQ(log::format_line(log::Level::Info, "t", f, log::Format::Json, t),
            "{\"time\":\"2024-05-01T12:00:00.500000Z\",\"level\":\"info\",\"msg\":\"t\","
            "\"at\":\"2024-05-01T12:00:00.5Z\"}\n");
}

TEST(LogFormat, JsonLinesParseBack) {
  Value weird;
  weird["d"] = std::nan("");
  weird["bad"] = std::string("\xff\xfe");
  const std::string l = line(log::Level::Error, "bad \xc3\x28 utf8",
                             {{"path", "/a\"b\\c"},
                              {"n", 42},
                              {"d", 2.5},
                              {"weird", weird},
                              {"inf", INFINITY},
                              {"raw", std::string_view("\xe2\x82", 2)}},
                             log::Format::Json);
  ASSERT_EQ(l.back(), '\n');
  EXPECT_TRUE(is_valid_utf8(l));
  const Value parsed = parse_json(std::string_view(l).substr(0, l.size() - 1));
  EXPECT_EQ(parsed.get_string({"level"}), "error");
  EXPECT_EQ(parsed.get_string({"msg"}), "bad \xEF\xBF\xBD( utf8");
  EXPECT_EQ(parsed.get_string({"path"}), "/a\"b\\c");
  EXPECT_EQ(parsed.find("n")->as_int(), 42);
  EXPECT_DOUBLE_EQ(parsed.find("d")->as_double(), 2.5);
  EXPECT_EQ(parsed.get_string({"weird", "d"}), "NaN");
  EXPECT_EQ(parsed.get_string({"weird", "bad"}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(parsed.get_string({"inf"}), "+Inf");
  EXPECT_EQ(parsed.get_string({"raw"}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(LogFormat, BadUtf8InLogfmtIsRepairedAndQuoted) {
  const std::string l = line(log::Level::Info, "\xff", {{"v", "ok\xc0\xaf"}});
  EXPECT_TRUE(is_valid_utf8(l));
  EXPECT_EQ(l, "level=info msg=\"\xEF\xBF\xBD\" v=\"ok\xEF\xBF\xBD\xEF\xBF\xBD\"\n");
  // Valid multi-byte text needs no quotes.
  EXPECT_EQ(line(log::Level::Info, "gr\xC3\xBC\xC3\x9F", {}),
            "level=info msg=gr\xC3\xBC\xC3\x9F\n");
}

TEST(LogLevels, ParseAndNames) {
  EXPECT_EQ(log::parse_level("DEBUG"), log::Level::Debug);
  EXPECT_EQ(log::parse_level("warning"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("off"), log::Level::Off);
  EXPECT_EQ(log::level_name(log::Level::Warn), "warn");
  EXPECT_EQ(log::parse_format("JSON"), log::Format::Json);
  try {
    log::parse_level("verbose");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("\"verbose\""), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("debug, info, warn, error or off"), std::string::npos);
  }
  EXPECT_THROW(log::parse_format("xml"), InvalidInput);
}

TEST_F(LogCapture, LevelIsSetAtRuntime) {
  log::info("one");
  log::debug("hidden");
  log::set_level(log::Level::Debug);
  log::debug("shown", {{"k", "v"}});
  log::set_level(log::Level::Error);
  log::warn("hidden");
  log::error("bad");
  log::set_level(log::Level::Off);
  log::error("hidden");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "level=info msg=one\n");
  EXPECT_EQ(lines[1], "level=debug msg=shown k=v\n");
  EXPECT_EQ(lines[2], "level=error msg=bad\n");
}

TEST_F(LogCapture, FormatSelectableAndTimestamps) {
  log::set_format(log::Format::Json);
  log::info("j", {{"a", 1}});
  log::set_timestamps(true);
  log::set_format(log::Format::Logfmt);
  log::info("t");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "{\"level\":\"info\",\"msg\":\"j\",\"a\":1}\n");
  ASSERT_EQ(lines[1].rfind("time=", 0), 0u) << lines[1];
  const std::size_t sp = lines[1].find(' ');
  EXPECT_TRUE(Timestamp::try_parse_rfc3339(lines[1].substr(5, sp - 5)).has_value()) << lines[1];
  EXPECT_EQ(lines[1].substr(sp), " level=info msg=t\n");
}

TEST_F(LogCapture, LoggerAddsFixedFields) {
  const log::Logger base({{"controller", "sentinel"}});
  const log::Logger node = base.with({{"node", std::string("gpu-1")}, {"wait", 2s}});
  node.warn("draining", {{"pods", 4}});
  base.info("started");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "level=warn msg=draining controller=sentinel node=gpu-1 wait=2s pods=4\n");
  EXPECT_EQ(lines[1], "level=info msg=started controller=sentinel\n");
}

TEST_F(LogCapture, ThrowingSinkDoesNotPropagate) {
  log::set_sink([](std::string_view) { throw std::runtime_error("disk full"); });
  EXPECT_NO_THROW(log::error("still fine"));
}

}  // namespace
}  // namespace gpufleet::core
