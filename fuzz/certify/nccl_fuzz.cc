// libFuzzer target: nccl-tests output (text and -J JSON). Any input must parse or raise
// OutputError; a parsed result must yield metrics or OutputError; judging never throws.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "certify/judge.h"
#include "certify/nccl_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet::certify;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto parse : {&parse_nccl, &parse_nccl_text, &parse_nccl_json}) {
    try {
      NcclResult r = parse(text);
      for (auto s : {NcclStatistic::LargestSize, NcclStatistic::Maximum, NcclStatistic::Average}) {
        try {
          NcclMetrics m = nccl_metrics(r, s);
          if (!(m.bus_bandwidth_gbs >= 0))
            __builtin_trap();  // NaN or negative would pass thresholds wrongly
        } catch (const OutputError&) {
          if (!r.rows.empty()) __builtin_trap();
        }
      }
    } catch (const OutputError& e) {
      if (e.what()[0] == '\0') __builtin_trap();
    }
  }
  static const ThresholdSet thresholds =
      ThresholdSet::compile({{"busBandwidthGBps", "value >= 100.0"}});
  Judgement j = judge_output(OutputKind::Nccl, text, 0, thresholds, {});
  if (!j.passed && !j.reason) __builtin_trap();
  return 0;
}
