// libFuzzer target: compile arbitrary text and evaluate it against a Node-like object with
// a small cost budget. Results are rendered and converted to check every value path, and the
// static cost estimate over the inputs' exact bounds must cover what the evaluation spent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cel/cel.h"
#include "cel/cost.h"
#include "core/json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  static const core::Value node = core::parse_json(R"({
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100", "n": "3"}},
    "status": {"capacity": {"nvidia.com/gpu": "8", "memory": "1Ti"},
               "conditions": [{"type": "Ready", "status": "True", "t": "2024-01-01T00:00:00Z"}],
               "numbers": [1, -2, 3.5, 18446744073709551615, null, true, "x"]}})");
  static const core::Value event =
      core::parse_json(R"({"isFatal": true, "errorCode": "79", "count": 9})");
  static const core::Value value(300);
  static const cel::Env env = [] {
    cel::Env e;
    e.variable("node").variable("event").variable("value", "int").cost_limit(20000);
    return e;
  }();
  cel::Program p;
  try {
    p = cel::compile(text, env);
  } catch (const cel::CompileError&) {
    return 0;
  }
  static const cel::Sizes sizes = cel::Sizes()
                                      .variable("node", cel::Shape::of(node))
                                      .variable("event", cel::Shape::of(event))
                                      .variable("value", cel::Shape::of(value));
  cel::Activation act;
  act.bind("node", node).bind("event", event).bind("value", value);
  std::uint64_t cost = 0;
  cel::Val v = p.evaluate(act, &cost);
  if (cost <= env.cost_limit_units() && cost > cel::estimate_cost(p, sizes).max)
    __builtin_trap();  // the estimate is not a bound
  if (v.is_error()) {
    (void)v.error_message().size();
    return 0;
  }
  (void)v.debug_string();
  try {
    (void)v.to_value();
  } catch (const core::InvalidInput&) {
  }
  return 0;
}
