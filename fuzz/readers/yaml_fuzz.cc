// libFuzzer target: the YAML reader. Any input is parsed or refused with a ParseError that
// has a source; a parsed stream must write back to YAML and read back to the same value.
#include "core/yaml.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  std::string_view text = fuzz::as_text(data, size);
  // Small limits, so the fuzzer reaches the budget paths with small inputs.
  static const core::InputLimits limits = [] {
    core::InputLimits l;
    l.max_alias_nodes = 10000;
    l.max_alias_bytes = 1 << 20;
    l.max_depth = 64;
    return l;
  }();
  fuzz::refuse_or_accept([&] {
    std::vector<core::Value> docs = core::parse_yaml_documents(text, "fuzz.yaml", limits);
    for (const core::Value& d : docs) {
      std::string out = core::to_yaml(d);
      core::Value back = core::parse_yaml(out, "written.yaml");
      // NaN is the one value not equal to itself; everything else must survive the trip.
      if (out.find(".nan") == std::string::npos && !(back == d)) __builtin_trap();
    }
  });
  return 0;
}
