#include "recipe/vendor.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/tool_process.h"

namespace gpufleet::recipe {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHelmHint =
    "install helm 3 (https://helm.sh) or give its path with --helm";

// Chart archives are a few MiB; a repository that serves more is refused.
constexpr std::uint64_t kMaxArchiveBytes = 64u << 20;

std::vector<std::string> repository_args(const Component& c, const HelmToolOptions& o) {
  std::vector<std::string> args;
  if (c.chart.is_oci()) {
    args.push_back(c.chart.repository + "/" + c.chart.name);
    if (o.plain_http) args.emplace_back("--plain-http");
  } else {
    args = {c.chart.name, "--repo", c.chart.repository};
  }
  args.insert(args.end(), {"--version", c.chart.version});
  if (!o.ca_file.empty()) args.insert(args.end(), {"--ca-file", o.ca_file});
  return args;
}

void collect_images(const core::Value& v, std::set<std::string>& out) {
  if (const core::Map* m = v.if_map()) {
    for (const auto& [key, child] : *m) {
      if ((key == "containers" || key == "initContainers" || key == "ephemeralContainers") &&
          child.is_list()) {
        for (const core::Value& container : child.as_list()) {
          const std::string_view image = container.get_string({"image"});
          if (!image.empty()) out.emplace(image);
        }
      }
      collect_images(child, out);
    }
  } else if (const core::List* l = v.if_list()) {
    for (const core::Value& child : *l) collect_images(child, out);
  }
}

}  // namespace

std::vector<VendoredChart> fetch_charts(const Recipe& recipe, const HelmToolOptions& options) {
  std::vector<VendoredChart> out;
  for (const Component& c : recipe.components) {
    if (c.chart.in_bundle()) continue;
    ToolTempDir tmp("gpufleet-vendor");
    const fs::path dest = fs::path(tmp.path) / "charts";
    fs::create_directories(dest);
    std::vector<std::string> args = {options.helm, "pull"};
    for (std::string& a : repository_args(c, options)) args.push_back(std::move(a));
    args.insert(args.end(), {"--destination", dest.string()});
    run_tool(args, tmp.path + "/stderr",
             "--vendor-charts: pulling " + c.name + " (chart " + c.chart.name + " " +
                 c.chart.version + " from " + c.chart.repository + ")",
             kHelmHint, {.max_output = 1u << 20, .timeout = options.timeout});
    std::vector<fs::path> archives;
    for (const auto& e : fs::directory_iterator(dest))
      if (e.path().extension() == ".tgz") archives.push_back(e.path());
    if (archives.size() != 1) {
      throw core::InvalidInput("--vendor-charts: helm pull of " + c.chart.name + " " +
                               c.chart.version + " left " + std::to_string(archives.size()) +
                               " archives instead of one");
    }
    core::InputLimits limits = core::input_limits();
    limits.max_bytes = kMaxArchiveBytes;
    VendoredChart v;
    v.component = c.name;
    v.repository = c.chart.repository;
    v.chart = c.chart.name;
    v.version = c.chart.version;
    v.file = archives[0].filename().string();
    v.content = core::read_file(archives[0].string(), limits);
    v.sha256 = core::sha256_hex(v.content);
    out.push_back(std::move(v));
  }
  return out;
}

std::set<std::string> images_in_manifests(const std::string& yaml, const std::string& where) {
  std::set<std::string> out;
  for (const core::Value& doc : core::parse_yaml_documents(yaml, where)) collect_images(doc, out);
  return out;
}

std::set<std::string> bundle_images(const Recipe& given, const Bundle& bundle,
                                    const BundleOptions& options, const HelmToolOptions& helm) {
  const Recipe recipe = bundled_recipe(given, options);
  ToolTempDir tmp("gpufleet-images");
  // The charts the bundle carries, on disk for helm.
  for (const auto& [path, file] : bundle) {
    if (!path.starts_with("local-charts/") && !path.starts_with("vendor/")) continue;
    const fs::path p = fs::path(tmp.path) / "bundle" / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << file.content;
  }
  std::map<std::string, std::string> vendored;  // component -> archive in the bundle
  for (const VendoredChart& v : options.vendored) vendored[v.component] = "vendor/" + v.file;
  std::set<std::string> images;
  for (const Component& c : recipe.components) {
    const std::string values = tmp.path + "/" + c.name + "-values.yaml";
    std::ofstream(values, std::ios::trunc) << core::to_yaml(c.values);
    std::vector<std::string> args = {helm.helm, "template", c.name};
    if (auto it = vendored.find(c.name); it != vendored.end()) {
      args.push_back(tmp.path + "/bundle/" + it->second);
    } else if (c.chart.is_builtin()) {
      args.push_back(tmp.path + "/bundle/" + builtin_chart_dir(c.chart.name));
    } else if (c.chart.is_local()) {
      args.push_back(tmp.path + "/bundle/local-charts/" + c.name);
    } else {
      for (std::string& a : repository_args(c, helm)) args.push_back(std::move(a));
    }
    args.insert(args.end(), {"--namespace", c.namespace_, "--values", values});
    const std::string what = "--images: helm template of " + c.name;
    const std::string rendered = run_tool(args, tmp.path + "/stderr", what, kHelmHint,
                                          {.max_output = 64u << 20, .timeout = helm.timeout});
    for (const std::string& image : images_in_manifests(rendered, what)) images.insert(image);
  }
  return images;
}

}  // namespace gpufleet::recipe
