// libFuzzer target: training iteration lines. Any input must parse or raise OutputError;
// averages must be finite and non-negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "certify/training_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet::certify;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    TrainingMetrics m = parse_training(text);
    double step = m.avg_step_time_sec();
    double goodput = m.goodput_ratio();
    if (!std::isfinite(step) || step < 0 || !(goodput >= 0 && goodput <= 1)) __builtin_trap();
    if (auto t = m.avg_tflops_per_gpu(); t && (!std::isfinite(*t) || *t < 0)) __builtin_trap();
  } catch (const OutputError&) {
  }
  return 0;
}
