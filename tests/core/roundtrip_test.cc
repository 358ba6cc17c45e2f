// Property checks over many generated inputs (fixed seed, so failures reproduce).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/quantity.h"
#include "core/semver.h"
#include "core/time.h"

namespace gpufleet::core {
namespace {

TEST(RoundTrip, QuantityCanonicalTextReadsBackExactly) {
  std::mt19937_64 rng(20261130);
  const char* suffixes[] = {"",   "n",  "u",  "m",  "k",  "M",  "G",   "T",  "P",  "E",  "Ki",
                            "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "e-3", "e0", "e9", "E-6"};
  std::uniform_int_distribution<std::int64_t> mantissa(-9'999'999'999, 9'999'999'999);
  std::uniform_int_distribution<int> point(0, 12);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(suffixes) - 1);
  for (int i = 0; i < 5000; ++i) {
    const std::int64_t m = mantissa(rng);
    std::string digits = std::to_string(m < 0 ? -m : m);
    const int p = point(rng);
    if (p > 0 && static_cast<std::size_t>(p) < digits.size()) {
      digits.insert(digits.size() - static_cast<std::size_t>(p), ".");
    }
    const std::string text = (m < 0 ? "-" : "") + digits + suffixes[pick(rng)];
    const Quantity q = Quantity::parse(text);
    const std::string canonical = q.to_string();
    const Quantity back = Quantity::parse(canonical);
    ASSERT_EQ(back, q) << text << " -> " << canonical;
    ASSERT_EQ(back.to_string(), canonical) << text;
    ASSERT_EQ(canonical.find('.'), std::string::npos) << text << " -> " << canonical;
  }
}

TEST(RoundTrip, SemVerTextAndOrderAreConsistent) {
  std::mt19937_64 rng(7);
  const char* ids[] = {"alpha", "beta", "rc", "0", "1", "2", "10", "11", "x-y", "a1"};
  std::uniform_int_distribution<int> small(0, 3);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(ids) - 1);
  std::vector<SemVer> versions;
  for (int i = 0; i < 300; ++i) {
    std::string text = std::to_string(small(rng)) + "." + std::to_string(small(rng)) + "." +
                       std::to_string(small(rng));
    const int n = small(rng);
    for (int k = 0; k < n; ++k) text += (k == 0 ? "-" : ".") + std::string(ids[pick(rng)]);
    const SemVer v = SemVer::parse(text);
    ASSERT_EQ(v.to_string(), text);
    versions.push_back(v);
  }
  // A strict weak order: sorting works and neighbours never compare the wrong way round.
  std::sort(versions.begin(), versions.end());
  for (std::size_t i = 1; i < versions.size(); ++i) {
    ASSERT_LE(compare(versions[i - 1], versions[i]), 0);
    ASSERT_GE(compare(versions[i], versions[i - 1]), 0);
  }
  // Transitivity on samples.
  for (std::size_t i = 0; i + 2 < versions.size(); i += 3) {
    ASSERT_LE(compare(versions[i], versions[i + 2]), 0);
  }
}

TEST(RoundTrip, DurationsFormatAndParseBack) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::int64_t> any(std::numeric_limits<std::int64_t>::min(),
                                                  std::numeric_limits<std::int64_t>::max());
  std::uniform_int_distribution<std::int64_t> small(-5'000'000'000'000, 5'000'000'000'000);
  for (int i = 0; i < 5000; ++i) {
    const std::chrono::nanoseconds d(i % 2 == 0 ? any(rng) : small(rng));
    ASSERT_EQ(parse_duration(format_duration(d)), d) << format_duration(d);
    ASSERT_EQ(parse_duration(format_duration_seconds(d)), d) << format_duration_seconds(d);
  }
}

TEST(RoundTrip, TimestampsFormatAndParseBack) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> seconds(Timestamp::kMinSeconds,
                                                      Timestamp::kMaxSeconds);
  std::uniform_int_distribution<std::int32_t> nanos(0, 999'999'999);
  for (int i = 0; i < 5000; ++i) {
    const Timestamp t{seconds(rng), i % 3 == 0 ? 0 : nanos(rng)};
    ASSERT_EQ(Timestamp::parse_rfc3339(t.to_rfc3339()), t) << t.to_rfc3339();
  }
}

}  // namespace
}  // namespace gpufleet::core
