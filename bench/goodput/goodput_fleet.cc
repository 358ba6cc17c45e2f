// The goodput benchmark (docs/goodput.md "The goodput benchmark"): one scenario, every built
// configuration side by side on the same faults; the table on stdout, the report as JSON and
// the plots' data as TSV when asked. scripts/bench-goodput.sh runs it.
//
//   goodput_fleet [--scenario FILE] [--seed N] [--days N] [--rate-multiplier X]
//                 [--json FILE] [--tsv-dir DIR]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/field_reader.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/text.h"
#include "core/yaml.h"
#include "goodput/model/model.h"

namespace model = gpufleet::goodput::model;
namespace core = gpufleet::core;

namespace {

std::int64_t whole(const std::string& flag, const std::string& text, std::int64_t min,
                   std::int64_t max) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > max) {
    throw core::InvalidInput(flag + " " + core::quoted(text) + " is not a whole number from " +
                             std::to_string(min) + " to " + std::to_string(max));
  }
  return v;
}

void write_tsv(const std::string& dir, const std::vector<model::ConfigurationResult>& results) {
  std::string ettr = "configuration\tettr_percent\n";
  std::string lost = "configuration";
  for (std::size_t k = 0; k < model::kCategoryCount; ++k)
    lost += "\t" + std::string(model::category_name(static_cast<model::Category>(k)));
  lost += "\n";
  for (const auto& r : results) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "\t%.3f\n", 100 * r.ettr);
    ettr += r.name + buf;
    lost += r.name;
    for (double v : r.lost_by_category) {
      std::snprintf(buf, sizeof buf, "\t%.1f", v);
      lost += buf;
    }
    lost += "\n";
  }
  core::write_file_atomic(dir + "/goodput-ettr.tsv", ettr);
  core::write_file_atomic(dir + "/goodput-lost.tsv", lost);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string scenario_path, json_path, tsv_dir;
    std::optional<std::int64_t> seed, days;
    std::optional<double> multiplier;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) throw core::InvalidInput(a + ": needs a value");
      const std::string v = argv[++i];
      if (a == "--scenario") {
        scenario_path = v;
      } else if (a == "--seed") {
        seed = whole(a, v, 0, std::numeric_limits<std::int64_t>::max());
      } else if (a == "--days") {
        days = whole(a, v, 1, 3650);
      } else if (a == "--rate-multiplier") {
        char* end = nullptr;
        multiplier = std::strtod(v.c_str(), &end);
        if (*end != '\0' || *multiplier < 0 || *multiplier > 1000) {
          throw core::InvalidInput(a + " " + core::quoted(v) + " is not a number from 0 to 1000");
        }
      } else if (a == "--json") {
        json_path = v;
      } else if (a == "--tsv-dir") {
        tsv_dir = v;
      } else {
        throw core::InvalidInput(a +
                                 " is not a known flag (use --scenario, --seed, --days, "
                                 "--rate-multiplier, --json, --tsv-dir)");
      }
    }
    model::Scenario s = model::Scenario::defaults();
    if (!scenario_path.empty()) {
      const std::string text = core::read_file(scenario_path);
      core::DocumentScope scope(scenario_path, text);
      s = model::Scenario::from_value(core::parse_yaml(text, scenario_path), scenario_path);
    }
    if (seed) s.seed = static_cast<std::uint64_t>(*seed);
    if (days) s.days = *days;
    if (multiplier) s.rate_multiplier = *multiplier;
    const std::vector<model::Fault> faults = model::sample_faults(s);
    std::vector<model::ConfigurationResult> results;
    // (c) job-aware, once built, is one more entry here (docs/goodput.md).
    for (auto& c : {model::no_gpufleet(s), model::gpufleet_node_level(s)})
      results.push_back(model::run(s, faults, *c));
    std::fputs(model::report_table(s, faults, results).c_str(), stdout);
    if (!json_path.empty()) {
      core::write_file_atomic(json_path, core::to_json(model::report_to_value(s, faults, results),
                                                       core::JsonStyle::Pretty) +
                                             "\n");
    }
    if (!tsv_dir.empty()) write_tsv(tsv_dir, results);
    return 0;
  } catch (const core::InvalidInput& e) {
    std::fprintf(stderr, "goodput_fleet: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "goodput_fleet: %s\n", e.what());
    return 1;
  }
}
