// Loading and checking the recipe library (see library.h and docs/recipe.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/file_reader.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/yaml.h"
#include "recipe/library.h"
#include "recipe/library_content.h"
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

std::string stem_of(std::string_view path) {
  std::size_t slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return std::string(base.substr(0, base.rfind('.')));
}

void check_component_refs(const Value& content, const Library& lib, std::string_view where) {
  const Value* comps = content.find("components");
  if (comps == nullptr) return;
  for (const auto& e : comps->as_map()) {
    if (lib.components.find(e.key) == nullptr) {
      std::vector<std::string> names;
      for (const auto& c : lib.components.as_map()) names.push_back(c.key);
      throw InvalidInput(std::string(where) + ": components." + e.key +
                         ": unknown component; the registry (" + lib.registry_origin + ") has " +
                         core::join(names));
    }
    if (const Value* deps = e.value.find("dependencies")) {
      for (const auto& d : deps->as_map()) {
        if (lib.components.find(d.key) == nullptr) {
          throw InvalidInput(std::string(where) + ": components." + e.key + ".dependencies: '" +
                             d.key + "' is not a component of the registry (" +
                             lib.registry_origin + ")");
        }
      }
    }
  }
}

// A manifests block names a directory of the library's manifests/ tree; kustomize ones hold a
// kustomization.yaml.
void check_manifest_dir(const Value& manifests, const Library& lib, const std::string& where) {
  std::string path(manifests.get_string({"path"}));
  std::string kind(manifests.get_string({"kind"}));
  if (path.empty()) return;
  std::string prefix = path + "/";
  auto it = lib.manifest_files.lower_bound(prefix);
  if (it == lib.manifest_files.end() || it->first.rfind(prefix, 0) != 0) {
    throw InvalidInput(where + ".manifests.path: no *.yaml file under '" + path +
                       "' in the library; put the manifests there (or in a --data directory)");
  }
  if (kind == "kustomize" && !lib.manifest_files.count(prefix + "kustomization.yaml")) {
    throw InvalidInput(where + ".manifests.path: '" + path +
                       "' has no kustomization.yaml; kind kustomize renders a kustomization "
                       "directory (use kind manifests for plain files)");
  }
}

void check_manifest_refs(const Value& content, const Library& lib, std::string_view where) {
  const Value* comps = content.find("components");
  if (comps == nullptr) return;
  for (const auto& e : comps->as_map()) {
    if (const Value* m = e.value.find("manifests")) {
      check_manifest_dir(*m, lib, std::string(where) + ": components." + e.key);
    }
  }
}

void check_criterion_value(const Library& lib, std::size_t dim, const std::string& value,
                           std::string_view where) {
  if (value == kAny) return;
  const auto& valid = lib.valid[dim];
  if (std::find(valid.begin(), valid.end(), value) != valid.end()) return;
  throw InvalidInput(std::string(where) + ": '" + value + "' is not a known " +
                     std::string(kDimensionNames[dim]) + "; valid values are " + core::join(valid) +
                     " (or any), as listed in " + lib.criteria_origin);
}

void load_criteria(Library& lib, const LibraryFile& f) {
  core::DocumentScope scope(f.origin, f.content);
  Value doc = core::parse_yaml(f.content, f.origin);
  detail::check_header(doc, "RecipeCriteria", f.origin);
  check_keys(doc.as_map(), {"apiVersion", "kind", "values", "unsupported"}, f.origin);
  lib.criteria_path = f.path;
  lib.criteria_origin = f.origin;
  const Value* values = doc.find("values");
  if (values == nullptr) throw InvalidInput(f.origin + ": values: missing");
  check_keys(expect_map(*values, f.origin + ": values"),
             {"service", "accelerator", "os", "intent", "platform"}, f.origin + ": values");
  for (std::size_t d = 0; d < kDimensions; ++d) {
    std::string w = f.origin + ": values." + std::string(kDimensionNames[d]);
    const Value* list = values->find(kDimensionNames[d]);
    if (list == nullptr) throw InvalidInput(w + ": missing");
    for (const Value& item : expect_list(*list, w)) {
      const std::string& s = expect_string(item, w);
      detail::expect_dns_label(s, w);
      if (s == kAny) throw InvalidInput(w + ": 'any' is the wildcard, not a value");
      lib.valid[d].push_back(s);
    }
    std::sort(lib.valid[d].begin(), lib.valid[d].end());
    if (std::adjacent_find(lib.valid[d].begin(), lib.valid[d].end()) != lib.valid[d].end()) {
      throw InvalidInput(w + ": lists a value twice");
    }
  }
  if (const Value* uns = doc.find("unsupported")) {
    std::string w = f.origin + ": unsupported";
    const core::List& list = expect_list(*uns, w);
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::string wi = w + "[" + std::to_string(i) + "]";
      const core::Map& m = expect_map(list[i], wi);
      check_keys(m, {"when", "reason"}, wi);
      Unsupported u;
      u.reason = expect_string(m.find("reason") ? *m.find("reason") : Value(), wi + ".reason");
      const Value* when = m.find("when");
      if (when == nullptr) throw InvalidInput(wi + ".when: missing");
      for (const auto& e : expect_map(*when, wi + ".when")) {
        auto dim = std::find(kDimensionNames.begin(), kDimensionNames.end(), e.key);
        if (dim == kDimensionNames.end()) {
          throw InvalidInput(wi + ".when." + e.key +
                             ": not a criterion; use service, accelerator, os, intent or platform");
        }
        std::size_t d = static_cast<std::size_t>(dim - kDimensionNames.begin());
        std::vector<std::string>& vals = u.when[e.key];
        for (const Value& item : expect_list(e.value, wi + ".when." + e.key)) {
          const std::string& s = expect_string(item, wi + ".when." + e.key);
          check_criterion_value(lib, d, s, wi + ".when." + e.key);
          vals.push_back(s);
        }
      }
      lib.unsupported.push_back(std::move(u));
    }
  }
}

void load_registry(Library& lib, const LibraryFile& f) {
  core::DocumentScope scope(f.origin, f.content);
  Value doc = core::parse_yaml(f.content, f.origin);
  detail::check_header(doc, "ComponentRegistry", f.origin);
  check_keys(doc.as_map(), {"apiVersion", "kind", "components"}, f.origin);
  lib.registry_path = f.path;
  lib.registry_origin = f.origin;
  const Value* comps = doc.find("components");
  if (comps == nullptr) throw InvalidInput(f.origin + ": components: missing");
  lib.components = Value::map();
  for (const auto& e : expect_map(*comps, f.origin + ": components")) {
    std::string w = f.origin + ": components." + e.key;
    detail::expect_dns_label(e.key, w);
    lib.components[e.key] = detail::normalize_component(e.value, w, true);
  }
  for (const auto& e : lib.components.as_map()) {
    if (const Value* deps = e.value.find("dependencies")) {
      for (const auto& d : deps->as_map()) {
        if (lib.components.find(d.key) == nullptr) {
          throw InvalidInput(f.origin + ": components." + e.key + ".dependencies: '" + d.key +
                             "' is not a component of the registry");
        }
      }
    }
  }
}

struct RawOverlay {
  Overlay overlay;
  std::array<std::optional<std::string>, kDimensions> own;  // criteria this file sets
};

RawOverlay parse_overlay(const LibraryFile& f) {
  RawOverlay raw;
  Overlay& o = raw.overlay;
  o.name = stem_of(f.path);
  o.path = f.path;
  o.origin = f.origin;
  core::DocumentScope scope(f.origin, f.content);
  Value doc = core::parse_yaml(f.content, f.origin);
  detail::check_header(doc, "Overlay", f.origin);
  const core::Map& m = doc.as_map();
  check_keys(m,
             {"apiVersion", "kind", "description", "parent", "mixins", "criteria", "components",
              "constraints", "nodePool"},
             f.origin);
  detail::expect_dns_label(o.name, f.origin + ": file name");
  if (const Value* p = m.find("parent")) o.parent = expect_string(*p, f.origin + ": parent");
  if (const Value* mx = m.find("mixins")) {
    for (const Value& item : expect_list(*mx, f.origin + ": mixins")) {
      o.mixins.push_back(expect_string(item, f.origin + ": mixins"));
    }
  }
  if (const Value* c = m.find("criteria")) {
    std::string w = f.origin + ": criteria";
    check_keys(expect_map(*c, w),
               {"service", "accelerator", "os", "intent", "platform", "nodeCount"}, w);
    for (std::size_t d = 0; d < kDimensions; ++d) {
      if (const Value* v = c->find(kDimensionNames[d])) {
        raw.own[d] = expect_string(*v, field_path(w, kDimensionNames[d]));
      }
    }
    if (const Value* n = c->find("nodeCount")) {
      std::string wn = field_path(w, "nodeCount");
      o.node_count = parse_requirement(expect_string(*n, wn), wn);
    }
  }
  o.content = detail::normalize_content(m, f.origin);
  return raw;
}

// Resolves inheritance: effective criteria (a child may only refine its parent), ancestors,
// depth and specificity. Detects unknown parents and cycles.
void link_overlays(Library& lib, std::map<std::string, RawOverlay>& raw) {
  std::set<std::string> done;
  for (auto& [name, start] : raw) {
    std::vector<std::string> chain;  // start ... root
    std::string cur = name;
    while (!cur.empty() && !done.count(cur)) {
      if (std::find(chain.begin(), chain.end(), cur) != chain.end()) {
        std::string cycle;
        for (auto it = std::find(chain.begin(), chain.end(), cur); it != chain.end(); ++it)
          cycle += *it + " -> ";
        throw InvalidInput(raw.at(cur).overlay.origin + ": parent: inheritance cycle " + cycle +
                           cur);
      }
      chain.push_back(cur);
      const std::string& parent = raw.at(cur).overlay.parent;
      if (!parent.empty() && !raw.count(parent)) {
        throw InvalidInput(raw.at(cur).overlay.origin + ": parent: no overlay named '" + parent +
                           "' (overlays are named by file name under overlays/)");
      }
      cur = parent;
    }
    // Link from the root-most unlinked ancestor down.
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      RawOverlay& r = raw.at(*it);
      Overlay& o = r.overlay;
      const Overlay* parent = o.parent.empty() ? nullptr : &raw.at(o.parent).overlay;
      o.criteria = parent ? parent->criteria : any_criteria();
      if (parent) {
        o.ancestors.push_back(parent->name);
        o.ancestors.insert(o.ancestors.end(), parent->ancestors.begin(), parent->ancestors.end());
        o.depth = parent->depth + 1;
        if (!o.node_count) o.node_count = parent->node_count;
      }
      for (std::size_t d = 0; d < kDimensions; ++d) {
        if (!r.own[d]) continue;
        std::string w = o.origin + ": criteria." + std::string(kDimensionNames[d]);
        check_criterion_value(lib, d, *r.own[d], w);
        if (o.criteria[d] != kAny && *r.own[d] != o.criteria[d]) {
          throw InvalidInput(w + ": '" + *r.own[d] + "' contradicts '" + o.criteria[d] +
                             "' inherited from parent " + parent->origin +
                             "; a child overlay may only narrow its parent's criteria");
        }
        o.criteria[d] = *r.own[d];
      }
      o.specificity = o.node_count ? 1 : 0;
      for (const std::string& c : o.criteria) o.specificity += c != kAny ? 1 : 0;
      done.insert(*it);
    }
  }
  for (auto& [name, r] : raw) lib.overlays.emplace(name, std::move(r.overlay));
}

}  // namespace

std::vector<CriteriaValues> Library::supported_combinations() const {
  std::vector<CriteriaValues> out;
  CriteriaValues cur;
  auto rec = [&](auto&& self, std::size_t d) -> void {
    if (d == kDimensions) {
      if (!unsupported_reason(cur)) out.push_back(cur);
      return;
    }
    for (const std::string& v : valid[d]) {
      cur[d] = v;
      self(self, d + 1);
    }
  };
  rec(rec, 0);
  return out;
}

std::optional<std::string> Library::unsupported_reason(const CriteriaValues& c) const {
  for (const Unsupported& u : unsupported) {
    bool all = true;
    for (const auto& [dim, vals] : u.when) {
      std::size_t d = static_cast<std::size_t>(
          std::find(kDimensionNames.begin(), kDimensionNames.end(), dim) - kDimensionNames.begin());
      all = all && std::find(vals.begin(), vals.end(), c[d]) != vals.end();
    }
    if (all) return u.reason;
  }
  return std::nullopt;
}

std::vector<LibraryFile> read_library_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InvalidInput("--data '" + dir +
                       "': not a readable directory; give a directory laid out "
                       "like data/recipes (registry.yaml, criteria.yaml, overlays/, mixins/)");
  }
  std::vector<LibraryFile> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".yaml") continue;
    // A *.yaml entry that is not a regular file (a FIFO, a directory, a device) is refused by
    // core::read_file, by name, rather than silently skipped.
    std::string text = core::read_file(it->path().string());
    files.push_back(
        {fs::relative(it->path(), dir).generic_string(), it->path().string(), std::move(text)});
  }
  if (ec) throw InvalidInput("--data '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end(),
            [](const LibraryFile& a, const LibraryFile& b) { return a.path < b.path; });
  return files;
}

std::vector<LibraryFile> overlay_files(std::vector<LibraryFile> base,
                                       const std::vector<LibraryFile>& extra) {
  for (const LibraryFile& f : extra) {
    auto it = std::find_if(base.begin(), base.end(),
                           [&](const LibraryFile& b) { return b.path == f.path; });
    if (it != base.end()) {
      *it = f;
    } else {
      base.push_back(f);
    }
  }
  std::sort(base.begin(), base.end(),
            [](const LibraryFile& a, const LibraryFile& b) { return a.path < b.path; });
  return base;
}

Library load_library(const std::vector<LibraryFile>& files) {
  Library lib;
  const LibraryFile* criteria = nullptr;
  const LibraryFile* registry = nullptr;
  std::vector<const LibraryFile*> overlays, mixins;
  for (const LibraryFile& f : files) {
    lib.file_sha256[f.path] = core::sha256_hex(f.content);
    if (f.path == "criteria.yaml") {
      criteria = &f;
    } else if (f.path == "registry.yaml") {
      registry = &f;
    } else if (f.path.rfind("overlays/", 0) == 0 && f.path.find('/', 9) == std::string::npos) {
      overlays.push_back(&f);
    } else if (f.path.rfind("mixins/", 0) == 0 && f.path.find('/', 7) == std::string::npos) {
      mixins.push_back(&f);
    } else if (f.path.rfind("manifests/", 0) == 0 && f.path.find('/', 10) != std::string::npos) {
      lib.manifest_files[f.path] = f.content;
    } else {
      throw InvalidInput(f.origin +
                         ": not a library file; the library holds registry.yaml, "
                         "criteria.yaml, overlays/*.yaml, mixins/*.yaml and "
                         "manifests/<component>/**.yaml");
    }
  }
  if (criteria == nullptr || registry == nullptr) {
    throw InvalidInput("recipe library: criteria.yaml and registry.yaml are both required");
  }
  load_criteria(lib, *criteria);
  load_registry(lib, *registry);
  {
    Value registry = Value::map();
    registry["components"] = lib.components;
    check_manifest_refs(registry, lib, lib.registry_origin);
  }
  for (const LibraryFile* f : mixins) {
    core::DocumentScope scope(f->origin, f->content);
    Value doc = core::parse_yaml(f->content, f->origin);
    detail::check_header(doc, "Mixin", f->origin);
    check_keys(doc.as_map(),
               {"apiVersion", "kind", "description", "components", "constraints", "nodePool"},
               f->origin);
    Mixin mx{stem_of(f->path), f->path, f->origin,
             detail::normalize_content(doc.as_map(), f->origin)};
    check_component_refs(mx.content, lib, f->origin);
    check_manifest_refs(mx.content, lib, f->origin);
    lib.mixins.emplace(mx.name, std::move(mx));
  }
  std::map<std::string, RawOverlay> raw;
  for (const LibraryFile* f : overlays) {
    RawOverlay r = parse_overlay(*f);
    check_component_refs(r.overlay.content, lib, f->origin);
    check_manifest_refs(r.overlay.content, lib, f->origin);
    for (const std::string& mx : r.overlay.mixins) {
      if (!lib.mixins.count(mx)) {
        throw InvalidInput(f->origin + ": mixins: no mixin named '" + mx + "' under mixins/");
      }
    }
    std::string name = r.overlay.name;
    raw.emplace(name, std::move(r));
  }
  link_overlays(lib, raw);
  return lib;
}

Library load_library_with(const std::vector<std::string>& data_dirs) {
  std::vector<LibraryFile> files = builtin_library_files();
  for (const std::string& dir : data_dirs)
    files = overlay_files(std::move(files), read_library_dir(dir));
  return load_library(files);
}

}  // namespace gpufleet::recipe
