#include "recipe/vendor.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/file_reader.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/yaml.h"
#include "recipe/builtin_charts.h"
#include "recipe/requirement.h"
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

std::vector<VendoredChart> charts_from_bundle(const Recipe& recipe, const std::string& dir,
                                              std::string_view flag_sv) {
  const std::string flag(flag_sv);
  const fs::path root(dir);
  const std::string prov_path = (root / "vendor/provenance.yaml").string();
  std::error_code ec;
  if (!fs::is_regular_file(prov_path, ec)) {
    throw core::InvalidInput(flag + " " + core::quoted(dir) +
                             ": no vendor/provenance.yaml; give the directory of a bundle "
                             "written with --vendor-charts");
  }
  const std::string text = core::read_file(prov_path);
  core::DocumentScope scope(prov_path, text);
  const core::Value doc = core::parse_yaml(text, prov_path);
  if (doc.get_string({"kind"}) != "VendoredCharts" || !doc.get({"charts"}) ||
      !doc.get({"charts"})->is_list()) {
    throw core::InvalidInput(prov_path +
                             ": not a vendored-charts record (kind VendoredCharts with a list "
                             "of charts); give the directory of a bundle written with "
                             "--vendor-charts");
  }
  std::map<std::string, const core::Value*> by_component;
  for (const core::Value& e : doc.get({"charts"})->as_list())
    by_component[std::string(e.get_string({"component"}))] = &e;
  core::InputLimits limits = core::input_limits();
  limits.max_bytes = kMaxArchiveBytes;
  std::vector<VendoredChart> out;
  for (const Component& c : recipe.components) {
    if (c.chart.in_bundle()) continue;
    auto it = by_component.find(c.name);
    if (it == by_component.end()) {
      throw core::InvalidInput(flag + " " + core::quoted(dir) +
                               ": the bundle carries no archive of " + c.name + " (chart " +
                               c.chart.name + " " + c.chart.version +
                               "); bundle a recipe that installs it with --vendor-charts, or "
                               "leave it out with --set " +
                               c.name + ":enabled=false");
    }
    const core::Value& e = *it->second;
    const std::string chart(e.get_string({"chart"})), version(e.get_string({"version"}));
    if (chart != c.chart.name || version != c.chart.version) {
      throw core::InvalidInput(flag + " " + core::quoted(dir) + ": the bundle carries " + chart +
                               " " + version + " for " + c.name + ", the recipe pins " +
                               c.chart.name + " " + c.chart.version +
                               "; give a bundle of the same recipe");
    }
    const std::string file(e.get_string({"file"}));
    const std::string name = fs::path(file).filename().string();
    if (file != "vendor/" + name || name.empty() || name.starts_with(".")) {
      throw core::InvalidInput(prov_path + ": file " + core::quoted(file) + " of " + c.name +
                               " must be vendor/<archive>.tgz");
    }
    VendoredChart v;
    v.component = c.name;
    v.repository = std::string(e.get_string({"repository"}));
    v.chart = chart;
    v.version = version;
    v.file = name;
    v.content = core::read_file((root / file).string(), limits);
    v.sha256 = core::sha256_hex(v.content);
    if (v.sha256 != e.get_string({"sha256"})) {
      throw core::InvalidInput(flag + " " + core::quoted(dir) + ": " + file +
                               " changed since it was bundled: its SHA-256 is " + v.sha256 +
                               ", provenance.yaml records " +
                               std::string(e.get_string({"sha256"})) +
                               "; take the archive from the original bundle");
    }
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

// "== X" or "in X, Y": the values a constraint allows, if it enumerates them.
std::optional<std::vector<std::string>> enumerated(const Constraint* c) {
  if (c == nullptr) return std::nullopt;
  const Requirement r = parse_requirement(c->requirement, c->name);
  if (r.op == RequirementOp::Eq) return std::vector<std::string>{r.operand};
  if (r.op == RequirementOp::In) return r.alternatives;
  return std::nullopt;
}

const Constraint* find_fact(const std::vector<Constraint>& list, std::string_view fact) {
  for (const Constraint& c : list)
    if (c.fact == fact) return &c;
  return nullptr;
}

bool is_os_tag(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] >= 'a' && s[i] <= 'z') ++i;
  if (i == 0 || i == s.size()) return false;
  bool digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digit = true;
    } else if (s[i] != '.' || !digit) {
      return false;
    } else {
      digit = false;
    }
  }
  return digit;
}

}  // namespace

NodeOsTags node_os_tags(const Recipe& recipe, const std::vector<std::string>& given) {
  NodeOsTags out;
  if (!given.empty()) {
    for (const std::string& g : given) {
      if (!is_os_tag(g)) {
        throw core::InvalidInput("--node-os " + core::quoted(g) +
                                 ": not a node OS tag; give the os_release ID and VERSION_ID "
                                 "joined, as the GPU Operator tags its driver images (ubuntu22.04, "
                                 "rhel9.6, rhcos4.18)");
      }
      out.tags.insert(g);
    }
    return out;
  }
  std::vector<const NodePool*> pools;
  for (const NodePool& p : recipe.pools) pools.push_back(&p);
  if (pools.empty()) pools.push_back(nullptr);  // the cluster-wide constraints alone
  std::set<std::string> unknown;
  for (const NodePool* p : pools) {
    const Constraint* os = p ? find_fact(p->constraints, "node.os") : nullptr;
    const Constraint* ver = p ? find_fact(p->constraints, "node.osVersion") : nullptr;
    if (os == nullptr) os = find_fact(recipe.constraints, "node.os");
    if (ver == nullptr) ver = find_fact(recipe.constraints, "node.osVersion");
    if (os == nullptr && ver == nullptr) continue;
    const auto ids = enumerated(os);
    const auto versions = enumerated(ver);
    if (ids && versions) {
      for (const std::string& id : *ids)
        for (const std::string& v : *versions) out.tags.insert(id + v);
      continue;
    }
    std::string why = p ? "pool " + p->name + ": " : "";
    why += os ? "node.os " + os->requirement : "no node.os constraint";
    why += ver ? ", node.osVersion " + ver->requirement : ", no node.osVersion constraint";
    unknown.insert(why);
  }
  out.unknown.assign(unknown.begin(), unknown.end());
  return out;
}

BundleImages bundle_images(const Recipe& given, const Bundle& bundle, const BundleOptions& options,
                           const HelmToolOptions& helm, const std::vector<std::string>& node_os) {
  const Recipe recipe = bundled_recipe(given, options);
  const NodeOsTags os = node_os_tags(recipe, node_os);
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
  BundleImages out;
  for (const Component& c : recipe.components) {
    const std::string values = tmp.path + "/" + c.name + "-values.yaml";
    std::ofstream(values, std::ios::trunc) << core::to_yaml(c.values);
    // The chart as helm finds it: the bundle's copy, else the repository.
    std::vector<std::string> chart;
    if (auto it = vendored.find(c.name); it != vendored.end()) {
      chart.push_back(tmp.path + "/bundle/" + it->second);
    } else if (c.chart.is_builtin()) {
      chart.push_back(tmp.path + "/bundle/" + builtin_chart_dir(c.chart.name));
    } else if (c.chart.is_local()) {
      chart.push_back(tmp.path + "/bundle/local-charts/" + c.name);
    } else {
      chart = repository_args(c, helm);
    }
    const ToolLimits limits{.max_output = 64u << 20, .timeout = helm.timeout};
    std::vector<std::string> args = {helm.helm, "template", c.name};
    args.insert(args.end(), chart.begin(), chart.end());
    args.insert(args.end(), {"--namespace", c.namespace_, "--values", values});
    const std::string what = "--images: helm template of " + c.name;
    const std::string rendered = run_tool(args, tmp.path + "/stderr", what, kHelmHint, limits);
    for (const std::string& image : images_in_manifests(rendered, what)) out.images.insert(image);
    if (c.operator_images.empty()) continue;
    // Operator images: the chart's own default values under the bundle's.
    auto show = [&](const char* part) {
      std::vector<std::string> a = {helm.helm, "show", part};
      a.insert(a.end(), chart.begin(), chart.end());
      const std::string w = "--images: helm show " + std::string(part) + " of " + c.name;
      core::Value v = core::parse_yaml(run_tool(a, tmp.path + "/stderr", w, kHelmHint, limits), w);
      return v.is_null() ? core::Value::map() : v;
    };
    const core::Value defaults = show("values");
    bool need_app_version = false;
    for (const OperatorImage& img : c.operator_images)
      need_app_version = need_app_version || img.app_version_default;
    const std::string app_version =
        need_app_version ? std::string(show("chart").get_string({"appVersion"})) : "";
    OperatorImagesResult r = resolve_operator_images(
        c.name, c.operator_images, merge_chart_values(defaults, c.values), app_version, os);
    out.images.insert(r.images.begin(), r.images.end());
    out.notes.insert(out.notes.end(), r.notes.begin(), r.notes.end());
  }
  return out;
}

std::string images_text(const BundleImages& images) {
  std::string text;
  if (!images.notes.empty()) {
    text += "# Notes (lines starting with # are not images; grep -v '^#' images.txt):\n";
    for (const std::string& n : images.notes) text += "# " + n + "\n";
  }
  for (const std::string& image : images.images) text += image + "\n";
  return text;
}

}  // namespace gpufleet::recipe
