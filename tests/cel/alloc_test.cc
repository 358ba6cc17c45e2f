// Proves that the hot rules evaluate without touching the heap: this binary replaces the
// global operator new with a counting one.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>

#include "cel/cel.h"
#include "core/json.h"

namespace {
std::atomic<long> g_allocations{0};
}

namespace {
void* counted_alloc(std::size_t n) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
}  // namespace

// The replacements pair malloc with free on purpose; GCC's -Wmismatched-new-delete cannot
// see that once they are inlined into the static initializers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
// Every replaceable allocation form, so that ASan sees matching new/delete pairs.
void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace gpufleet::cel {
namespace {

long allocations_during(const std::function<void()>& f) {
  long before = g_allocations.load();
  f();
  return g_allocations.load() - before;
}

TEST(CelAllocations, ThresholdRuleDoesNotAllocate) {
  Env env;
  env.variable("value", "int");
  Program p = compile("value >= 300", env);
  core::Value v(512);
  Activation act;
  act.bind("value", v);
  bool result = false;
  EXPECT_EQ(allocations_during([&] {
              for (int i = 0; i < 100; ++i) result = p.evaluate_bool(act);
            }),
            0);
  EXPECT_TRUE(result);
}

TEST(CelAllocations, QuarantineRuleDoesNotAllocate) {
  Env env;
  env.variable("event").variable("node");
  Program p = compile(
      "event.isFatal && event.errorCode in ['79', '48', '94'] && "
      "node.metadata.labels['nvidia.com/gpu.product'].startsWith('NVIDIA-H100')",
      env);
  core::Value node = core::parse_json(
      R"({"metadata": {"name": "n", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}})");
  core::Value event = core::parse_json(R"({"isFatal": true, "errorCode": "94"})");
  Activation act;
  act.bind("event", event).bind("node", node);
  bool result = false;
  EXPECT_EQ(allocations_during([&] {
              for (int i = 0; i < 100; ++i) result = p.evaluate_bool(act);
            }),
            0);
  EXPECT_TRUE(result);
}

TEST(CelAllocations, CounterSeesAllocations) {
  // The counter works: a rule that builds a string does allocate.
  Program p = compile("x + 'b' == 'ab'", Env().variable("x", "string"));
  Activation act;
  act.bind("x", Val::string_view("a"));
  EXPECT_GT(allocations_during([&] { EXPECT_TRUE(p.evaluate_bool(act)); }), 0);
}

}  // namespace
}  // namespace gpufleet::cel
