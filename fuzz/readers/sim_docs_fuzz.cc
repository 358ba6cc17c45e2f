// libFuzzer target: the simulator's document readers (Fleet, Scenario, behaviour table,
// control event). The first byte picks the reader.
#include "core/yaml.h"
#include "fuzz_util.h"
#include "sim/behaviour.h"
#include "sim/fleet_spec.h"
#include "sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  if (size == 0) return 0;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  const std::uint8_t pick = data[0] % 4;
  fuzz::refuse_or_accept([&] {
    core::Value doc = core::parse_yaml(text, "fuzz.yaml");
    switch (pick) {
      case 0: sim::parse_fleet(doc, "fuzz.yaml"); break;
      // A fleet path in the scenario resolves under a directory that does not exist.
      case 1: sim::parse_scenario(doc, "fuzz.yaml", "/nonexistent-fuzz-dir"); break;
      case 2: sim::BehaviourTable::parse(doc, "fuzz.yaml"); break;
      default: sim::parse_event(doc, "fuzz.yaml", "event", false); break;
    }
  });
  return 0;
}
