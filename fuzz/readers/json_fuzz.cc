// libFuzzer target: the JSON reader (simdjson), with and without pruning. A parsed document
// must write back to JSON that reads back to the same value.
#include "core/json.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  std::string_view text = fuzz::as_text(data, size);
  static const core::InputLimits limits = [] {
    core::InputLimits l;
    l.max_depth = 64;
    l.max_string_bytes = 1024;
    return l;
  }();
  static const core::JsonPrune prune = [] {
    core::JsonPrune p;
    p.add("status.images").add("items.metadata.managedFields");
    return p;
  }();
  fuzz::refuse_or_accept([&] {
    core::Value v = core::parse_json(text, "fuzz.json", nullptr, limits);
    std::string out;
    try {
      out = core::to_json(v);
    } catch (const core::InvalidInput&) {
      return;  // NaN/infinity cannot be written as JSON
    }
    if (!(core::parse_json(out, "written.json", nullptr, limits) == v)) __builtin_trap();
  });
  fuzz::refuse_or_accept([&] { core::parse_json(text, "fuzz.json", &prune, limits); });
  return 0;
}
