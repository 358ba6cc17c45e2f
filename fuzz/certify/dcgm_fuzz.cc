// libFuzzer target: dcgmi diag JSON (3.x and 4.x). Any input must parse or raise
// OutputError; a Fail result must never judge as passed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "certify/dcgm_parser.h"
#include "certify/judge.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet::certify;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  bool failed = false;
  try {
    DcgmReport r = parse_dcgm(text);
    failed = r.failures() > 0;
    if (r.results.empty()) __builtin_trap();
  } catch (const OutputError&) {
  }
  Judgement j = judge_output(OutputKind::Dcgm, text, 0, ThresholdSet{}, {});
  if (failed && j.passed) __builtin_trap();
  return 0;
}
