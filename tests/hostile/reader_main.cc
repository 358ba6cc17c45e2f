// hostile_reader READER FILE: runs one gpufleet document reader on FILE in a process of its
// own, so that the hostile-input suite can hold it to a memory and time limit. Exit 2 with
// the error on stderr when the reader refuses the input (what every hostile file must get),
// 0 when it accepts it, and whatever a crash gives otherwise.
//
// Adding a reader: one line in kReaders.
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "certify/dcgm_parser.h"
#include "certify/judge.h"
#include "certify/nccl_parser.h"
#include "certify/training_parser.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/yaml.h"
#include "kube/config.h"
#include "recipe/inputs.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"
#include "sim/behaviour.h"
#include "sim/fleet_spec.h"
#include "sim/scenario.h"

namespace {

using namespace gpufleet;

// Tool-output parsers take text, as a controller reads it from a termination message or a
// result file; the caller names the source, as certify's controller will.
template <typename Parse>
std::function<void(const std::string&)> tool_output(Parse parse) {
  return [parse](const std::string& p) {
    std::string text = core::read_file(p);
    try {
      parse(text);
    } catch (const core::InvalidInput& e) {
      throw core::InvalidInput(p + ": " + e.what());
    }
  };
}

struct Reader {
  const char* name;
  std::function<void(const std::string& path)> read;
};

const std::vector<Reader> kReaders = {
    {"yaml", [](const std::string& p) { core::parse_yaml_documents(core::read_file(p), p); }},
    {"json", [](const std::string& p) { core::parse_json(core::read_file(p), p); }},
    {"recipe", [](const std::string& p) { recipe::recipe_from_yaml(core::read_file(p), p); }},
    {"snapshot", [](const std::string& p) { recipe::snapshot_from_text(core::read_file(p), p); }},
    {"criteria", [](const std::string& p) { recipe::load_criteria_file(p); }},
    {"recipe-config", [](const std::string& p) { recipe::load_config(p); }},
    {"kubeconfig",
     [](const std::string& p) { kube::load_kubeconfig({.paths = {p}, .context = {}}); }},
    {"fleet", [](const std::string& p) { sim::load_fleet_file(p); }},
    {"scenario", [](const std::string& p) { sim::load_scenario_file(p); }},
    {"behaviours", [](const std::string& p) { sim::BehaviourTable::load_file(p); }},
    {"sim-event",
     [](const std::string& p) {
       sim::parse_event(core::parse_yaml(core::read_file(p), p), p, "event", false);
     }},
    {"nccl-tests", tool_output([](std::string_view t) { certify::parse_nccl(t); })},
    {"dcgm-diag", tool_output([](std::string_view t) { certify::parse_dcgm(t); })},
    {"training-log", tool_output([](std::string_view t) { certify::parse_training(t); })},
    {"workload-result", tool_output([](std::string_view t) { certify::parse_workload_result(t); })},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const Reader& r : kReaders) std::cout << r.name << "\n";
    return 0;
  }
  if (argc != 3) {
    std::cerr << "usage: hostile_reader READER FILE | --list\n";
    return 64;
  }
  for (const Reader& r : kReaders) {
    if (r.name != std::string(argv[1])) continue;
    try {
      r.read(argv[2]);
    } catch (const core::InvalidInput& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      // Not a refusal of bad input: the suite counts this as a failure.
      std::cerr << "unexpected " << typeid(e).name() << ": " << e.what() << "\n";
      return 70;
    }
    return 0;
  }
  std::cerr << "unknown reader " << argv[1] << "\n";
  return 64;
}
