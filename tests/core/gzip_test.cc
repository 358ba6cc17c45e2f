#include "core/gzip.h"

#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "core/input_limits.h"

namespace gpufleet::core {
namespace {

std::string message_of(std::string_view data, std::string_view too_large = {},
                       std::string_view corrupt = {}) {
  try {
    (void)gunzip(data, "ConfigMap x", too_large, corrupt);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(Gzip, RoundTripsWithAGzipHeader) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"node\":\"gpu-node-" + std::to_string(i) + "\"},";
  const std::string z = gzip(text);
  ASSERT_GE(z.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(z[0]), 0x1f);  // gzip magic: `gunzip` reads it
  EXPECT_EQ(static_cast<unsigned char>(z[1]), 0x8b);
  EXPECT_LT(z.size() * 5, text.size());
  EXPECT_EQ(gunzip(z, "x"), text);
  EXPECT_EQ(gunzip(gzip(""), "x"), "");
}

TEST(Gzip, CorruptAndOversizedInputNameTheSourceAndTheFix) {
  std::string z = gzip(std::string(100000, 'x'));
  z.resize(z.size() / 2);
  EXPECT_EQ(message_of(z, {}, "delete it"), "ConfigMap x: gzip data is corrupt (delete it)");
  EXPECT_EQ(message_of("not gzip at all"), "ConfigMap x: gzip data is corrupt");
  // A bomb: far more inflated than the limit; refused before it is all in memory.
  const std::string bomb = gzip(std::string(input_limits().max_inflated_bytes + 1, '\0'));
  const std::string m = message_of(bomb, "raise the limit if real");
  EXPECT_NE(m.find("ConfigMap x: gzip data inflates past the limit of "), std::string::npos) << m;
  EXPECT_NE(m.find("(raise the limit if real)"), std::string::npos) << m;
}

}  // namespace
}  // namespace gpufleet::core
