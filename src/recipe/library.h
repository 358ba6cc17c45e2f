// The recipe data library: a component registry, a criteria catalog, overlays and mixins,
// loaded from data/recipes (built into the binary) plus optional --data directories whose
// files add to or replace the built-in ones by relative path.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"
#include "recipe/criteria.h"
#include "recipe/requirement.h"

namespace gpufleet::recipe {

// One library file: `path` relative to the library root ("overlays/eks.yaml"), `origin`
// where it came from (for error messages), `content` its text.
struct LibraryFile {
  std::string path;
  std::string origin;
  std::string content;
};

// A combination of criteria the library does not support, with the reason.
struct Unsupported {
  std::map<std::string, std::vector<std::string>> when;  // dimension -> values
  std::string reason;
};

// Overlay and mixin content, normalized so that one per-field merge covers all of it:
//   components.<name>.{enabled, chart.{repository,name,version}, manifests.{kind,path,version},
//                      namespace, values, dependencies.<dep>: true,
//                      health.<key>: {kind, namespace, name}, pinExemption}
//   constraints.<name>: {fact, requirement, severity, remediation}
//   nodePool: {driver, mig, ..., constraints.<name>: {fact, requirement, severity, remediation}}
// A registry component has either `chart` (a Helm chart) or `manifests` (raw manifests or a
// kustomize directory under manifests/ of the library, rendered into a local wrapper chart).
struct Overlay {
  std::string name;    // file stem, unique across overlays
  std::string path;    // relative path
  std::string origin;  // for messages
  std::string parent;  // empty for none
  std::vector<std::string> mixins;
  CriteriaValues criteria;  // effective: the parent's, refined by this file's
  std::optional<Requirement> node_count;
  int specificity = 0;                 // specific criteria (node count counts as one)
  int depth = 0;                       // inheritance depth
  std::vector<std::string> ancestors;  // parent first, then its parent...
  core::Value content;
};

struct Mixin {
  std::string name;
  std::string path;
  std::string origin;
  core::Value content;
};

struct Library {
  std::array<std::vector<std::string>, kDimensions> valid;  // catalog, per dimension
  std::vector<Unsupported> unsupported;
  core::Value components;  // registry, normalized like overlay components
  std::string registry_path, registry_origin, criteria_path, criteria_origin;
  std::map<std::string, Overlay> overlays;
  std::map<std::string, Mixin> mixins;
  std::map<std::string, std::string> file_sha256;  // relative path -> digest of its text
  // Files under manifests/ (raw manifests and kustomize directories): path -> text.
  std::map<std::string, std::string> manifest_files;

  // Every criteria combination the library claims to support (catalog minus unsupported).
  std::vector<CriteriaValues> supported_combinations() const;
  // The reason a combination is unsupported, or nullopt.
  std::optional<std::string> unsupported_reason(const CriteriaValues& c) const;
};

// Files of the library built into the binary (from data/recipes at build time).
std::vector<LibraryFile> builtin_library_files();
// Every *.yaml file under `dir`, with paths relative to it. Throws InvalidInput if `dir`
// is not a readable directory.
std::vector<LibraryFile> read_library_dir(const std::string& dir);
// Later files replace earlier ones with the same relative path.
std::vector<LibraryFile> overlay_files(std::vector<LibraryFile> base,
                                       const std::vector<LibraryFile>& extra);

// Parses and checks the whole library: schema, pins, references (parents, mixins,
// components, dependencies, criteria values, manifest directories), inheritance cycles. Throws
// InvalidInput naming the file and field.
Library load_library(const std::vector<LibraryFile>& files);

// Built-in files overlaid with each --data directory in order.
Library load_library_with(const std::vector<std::string>& data_dirs);

}  // namespace gpufleet::recipe
