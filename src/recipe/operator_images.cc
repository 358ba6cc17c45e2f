#include "recipe/operator_images.h"

#include <algorithm>
#include <optional>
#include <variant>

#include "core/errors.h"
#include "recipe/overrides.h"
#include "recipe/schema_check.h"

namespace gpufleet::recipe {

using core::InvalidInput;
using core::Value;
using detail::check_keys;
using detail::expect_list;
using detail::expect_map;
using detail::expect_string;
using detail::field_path;

namespace {

constexpr std::string_view kKeys =
    "repository, image, version, reference, enabled, defaultVersion, osTag";

// Operator image paths name map keys only: a chart's image settings never sit in lists.
std::vector<std::string> parse_path(const std::string& path, const std::string& where) {
  std::vector<std::string> keys;
  for (const PathStep& step : parse_value_path(path, where, path)) {
    const auto* key = std::get_if<std::string>(&step);
    if (key == nullptr) {
      throw InvalidInput(where + ": '" + path +
                         "' has a list index; operator image paths name map keys only "
                         "(driver.repository)");
    }
    keys.push_back(*key);
  }
  return keys;
}

// The value at `keys` in `root`, or null when a key along the way is absent. A scalar or list
// where the path needs a map is an error naming `what`.
const Value* lookup(const Value& root, const std::vector<std::string>& keys,
                    const std::string& what) {
  const Value* cur = &root;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (cur->is_null()) return nullptr;
    if (!cur->is_map()) {
      std::string prefix;
      for (std::size_t j = 0; j < i; ++j) prefix += (j ? "." : "") + keys[j];
      throw InvalidInput(what + ": '" + prefix + "' is a " +
                         std::string(core::kind_name(cur->kind())) +
                         " in the values, not a map; fix the path or the value");
    }
    cur = cur->as_map().find(keys[i]);
    if (cur == nullptr) return nullptr;
  }
  return cur;
}

// Image fields are text; an integer (a YAML `version: 2`) reads as its digits. Anything else
// (a float Helm would print in its own way, a map) is refused.
std::optional<std::string> text_at(const Value& values, const std::string& path,
                                   const std::string& what) {
  const Value* v = lookup(values, parse_path(path, what), what);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->as_string();
  if (v->is_int()) return std::to_string(v->as_int());
  throw InvalidInput(what + ": " + path + " is a " + std::string(core::kind_name(v->kind())) +
                     " in the values, not text; quote it (\"" + path + "\": \"...\")");
}

}  // namespace

std::vector<OperatorImage> operator_images_from_value(const Value& v, std::string_view where_sv,
                                                      const Value& values) {
  const std::string where(where_sv);
  std::vector<OperatorImage> out;
  for (const auto& e : expect_map(v, where)) {
    const std::string w = field_path(where, e.key);
    detail::expect_dns_label(e.key, w);
    const core::Map& m = expect_map(e.value, w);
    check_keys(
        m, {"repository", "image", "version", "reference", "enabled", "defaultVersion", "osTag"},
        w);
    OperatorImage img;
    img.name = e.key;
    auto path_field = [&](std::string_view key, std::string& dst) {
      const Value* f = m.find(key);
      if (f == nullptr) return;
      const std::string fw = field_path(w, key);
      dst = expect_string(*f, fw);
      parse_path(dst, fw);
      // The component's own values must not contradict the path (a scalar along the way, a
      // map where the image text is).
      if (!values.is_null()) (void)text_at(values, dst, fw);
    };
    path_field("repository", img.repository);
    path_field("image", img.image);
    path_field("version", img.version);
    path_field("reference", img.reference);
    if (!img.reference.empty()) {
      if (!img.repository.empty() || !img.image.empty() || !img.version.empty()) {
        throw InvalidInput(w +
                           ": has reference and repository/image/version; give either the "
                           "path of a whole image reference or the three paths the operator "
                           "joins");
      }
    } else if (img.image.empty()) {
      throw InvalidInput(field_path(w, "image") +
                         ": missing; give the value paths of repository, image and version "
                         "(or reference: the path of a whole image reference); fields: " +
                         std::string(kKeys));
    }
    if (const Value* f = m.find("enabled")) {
      const std::string fw = field_path(w, "enabled");
      for (const Value& p : expect_list(*f, fw)) {
        const std::string& path = expect_string(p, fw);
        parse_path(path, fw);
        if (!values.is_null()) {
          const Value* at = lookup(values, parse_path(path, fw), fw);
          if (at != nullptr && !at->is_null() && !at->is_bool()) {
            throw InvalidInput(fw + ": " + path + " is a " +
                               std::string(core::kind_name(at->kind())) +
                               " in the values, not true or false");
          }
        }
        img.enabled.push_back(path);
      }
    }
    if (const Value* f = m.find("defaultVersion")) {
      const std::string fw = field_path(w, "defaultVersion");
      if (expect_string(*f, fw) != "appVersion") {
        throw InvalidInput(fw + ": '" + f->as_string() +
                           "' is not a default; use appVersion (the chart's appVersion stands "
                           "for an unset version) or leave it out");
      }
      if (img.version.empty()) {
        throw InvalidInput(fw + ": needs version, the path whose absence it stands for");
      }
      img.app_version_default = true;
    }
    if (const Value* f = m.find("osTag")) {
      img.os_tag = detail::expect_bool(*f, field_path(w, "osTag"));
      if (img.os_tag && img.version.empty()) {
        throw InvalidInput(field_path(w, "osTag") +
                           ": needs version, the tag the node OS is appended to");
      }
    }
    out.push_back(std::move(img));
  }
  return out;
}

Value operator_images_to_value(const std::vector<OperatorImage>& images) {
  Value out = Value::map();
  for (const OperatorImage& img : images) {
    Value e = Value::map();
    if (!img.reference.empty()) e["reference"] = img.reference;
    if (!img.repository.empty()) e["repository"] = img.repository;
    if (!img.image.empty()) e["image"] = img.image;
    if (!img.version.empty()) e["version"] = img.version;
    if (!img.enabled.empty()) {
      Value list = Value::list();
      for (const std::string& p : img.enabled) list.push_back(p);
      e["enabled"] = std::move(list);
    }
    if (img.app_version_default) e["defaultVersion"] = "appVersion";
    if (img.os_tag) e["osTag"] = true;
    out[img.name] = std::move(e);
  }
  return out;
}

Value merge_chart_values(const Value& defaults, const Value& given) {
  if (!defaults.is_map() || !given.is_map()) return given;
  Value out = defaults;
  for (const auto& e : given.as_map()) {
    if (e.value.is_null()) {
      out.as_map().erase(e.key);
      continue;
    }
    const Value* d = defaults.as_map().find(e.key);
    out[e.key] = d != nullptr ? merge_chart_values(*d, e.value) : e.value;
  }
  return out;
}

OperatorImagesResult resolve_operator_images(std::string_view component_sv,
                                             const std::vector<OperatorImage>& declared,
                                             const Value& values, std::string_view app_version,
                                             const NodeOsTags& os) {
  const std::string component(component_sv);
  OperatorImagesResult out;
  for (const OperatorImage& img : declared) {
    const std::string what = component + " operatorImages." + img.name;
    bool on = true;
    for (const std::string& path : img.enabled) {
      const Value* v = lookup(values, parse_path(path, what), what);
      if (v == nullptr || v->is_null()) continue;  // unset: the operator's default, which runs
      if (!v->is_bool()) {
        throw InvalidInput(what + ": " + path + " is a " + std::string(core::kind_name(v->kind())) +
                           " in the values, not true or false");
      }
      on = on && v->as_bool();
    }
    if (!on) continue;
    auto stale = [&](const std::string& path) {
      return InvalidInput(what + ": " + path +
                          " is in neither the chart's values nor the bundle's; the registry's "
                          "path is stale for this chart version: fix operatorImages." +
                          img.name + " of " + component +
                          " in registry.yaml (or a --data copy) from the chart's values.yaml");
    };
    if (!img.reference.empty()) {
      const Value* v = lookup(values, parse_path(img.reference, what), what);
      if (v == nullptr) throw stale(img.reference);
      std::optional<std::string> ref = text_at(values, img.reference, what);
      if (!ref || ref->empty()) {
        out.notes.push_back(what + ": " + img.reference + " is empty; set it to list the image");
      } else {
        out.images.insert(*ref);
      }
      continue;
    }
    const bool has_repository =
        img.repository.empty() || lookup(values, parse_path(img.repository, what), what) != nullptr;
    if (!has_repository) throw stale(img.repository);
    if (lookup(values, parse_path(img.image, what), what) == nullptr) throw stale(img.image);
    const std::string repository =
        img.repository.empty() ? "" : text_at(values, img.repository, what).value_or("");
    const std::string image = text_at(values, img.image, what).value_or("");
    std::string version =
        img.version.empty() ? "" : text_at(values, img.version, what).value_or("");
    if (image.empty()) {
      out.notes.push_back(what + ": " + img.image + " is empty; set it to list the image");
      continue;
    }
    // The operator's rule: neither repository nor version means the image is a whole
    // reference (tools like kbld write repository/image@digest there).
    if (repository.empty() && version.empty()) {
      out.images.insert(image);
      continue;
    }
    const std::string base = repository.empty() ? image : repository + "/" + image;
    if (version.empty() && img.app_version_default && !app_version.empty()) {
      version = std::string(app_version);
      out.notes.push_back(what + ": " + img.version + " is unset; the operator uses the chart's " +
                          "appVersion, " + version);
    }
    if (version.empty()) {
      out.notes.push_back(what + ": " + base + " with the operator's default version (" +
                          img.version + " is unset); set " + component + ":" + img.version +
                          " to pin and list it");
      continue;
    }
    if (version.starts_with("sha256:")) {
      // A digest names one image for every node OS; nothing is appended to it.
      out.images.insert(base + "@" + version);
      continue;
    }
    if (!img.os_tag) {
      out.images.insert(base + ":" + version);
      continue;
    }
    for (const std::string& tag : os.tags) out.images.insert(base + ":" + version + "-" + tag);
    for (const std::string& why : os.unknown) {
      out.notes.push_back(what + ": " + base + ":" + version +
                          "-<os><version> for the nodes' OS, which the recipe does not pin (" +
                          why + "); give it with --node-os (e.g. --node-os rhel9.6)");
    }
    if (os.tags.empty() && os.unknown.empty()) {
      out.notes.push_back(what + ": " + base + ":" + version +
                          "-<os><version>: the recipe names no node OS; give it with --node-os "
                          "(e.g. --node-os ubuntu22.04)");
    }
  }
  return out;
}

}  // namespace gpufleet::recipe
