#include "recipe/builtin_charts.h"

#include "core/errors.h"
#include "core/value.h"
#include "core/yaml.h"

namespace gpufleet::recipe {

std::map<std::string, std::string> builtin_chart(std::string_view name, std::string_view version) {
  std::string prefix = std::string(name) + "/";
  std::map<std::string, std::string> files;
  std::vector<std::string> known;
  for (const LibraryFile& f : builtin_chart_files()) {
    if (f.path.rfind(prefix, 0) == 0) files[f.path.substr(prefix.size())] = f.content;
    if (f.path.size() > 11 && f.path.substr(f.path.size() - 11) == "/Chart.yaml")
      known.push_back(f.path.substr(0, f.path.size() - 11));
  }
  auto chart = files.find("Chart.yaml");
  if (chart == files.end()) {
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw core::InvalidInput("chart '" + std::string(name) +
                             "' is not built into gpufleet (repository: builtin); built-in "
                             "charts: " +
                             list + ". Use an https:// or oci:// repository for other charts");
  }
  core::Value doc = core::parse_yaml(chart->second, "deploy/chart/" + prefix + "Chart.yaml");
  const core::Value* v = doc.find("version");
  std::string declared = v != nullptr && v->is_string() ? v->as_string() : "";
  if (declared != version) {
    throw core::InvalidInput("chart '" + std::string(name) +
                             "' built into this gpufleet is version '" + declared +
                             "', the recipe pins '" + std::string(version) +
                             "'; render the recipe with this gpufleet (gpufleet recipe) or bundle "
                             "it with the gpufleet release that pins " +
                             std::string(version));
  }
  return files;
}

std::string builtin_chart_dir(std::string_view name) { return "local-charts/" + std::string(name); }

}  // namespace gpufleet::recipe
