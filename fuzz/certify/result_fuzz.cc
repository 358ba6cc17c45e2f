// libFuzzer target: the WorkloadRun result contract and workload catalog templates. Any
// input must parse or raise a clear error (OutputError / core::InvalidInput).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "certify/catalog.h"
#include "certify/judge.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet::certify;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    WorkloadResult r = parse_workload_result(text);
    for (const auto& [name, value] : r.metrics) {
      if (!is_known_metric(name) || !std::isfinite(value)) __builtin_trap();
    }
  } catch (const OutputError&) {
  }
  try {
    (void)parse_template(text, "fuzz.yaml", {});
  } catch (const gpufleet::core::InvalidInput&) {
  }
  return 0;
}
