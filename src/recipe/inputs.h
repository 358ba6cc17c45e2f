// Where a recipe's criteria come from, lowest precedence first: the cluster (`--snapshot`,
// `--from-cluster`), a criteria file (`--criteria`) or the criteria of a config file
// (`--config`), and the command-line flags, which always win. A config file also drives
// `bundle` and `validate`, so one file describes a cluster's whole pipeline.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/criteria.h"
#include "recipe/detect.h"
#include "recipe/library.h"

namespace gpufleet::recipe {

// One source's criteria: only what it sets.
struct CriteriaInput {
  std::array<std::optional<std::string>, kDimensions> values;
  std::array<std::string, kDimensions> where;  // "criteria.yaml:4:12: spec.os", "--os"
  std::optional<std::int64_t> nodes;
  std::optional<std::vector<PoolQuery>> pools;
  std::string pools_origin;  // the source that gave the pools, for messages
  std::optional<std::vector<std::string>> mixins;
  std::map<std::string, std::string> external;  // component -> why; adds up across sources
  // Detection problems (see DetectedCriteria); a later source that sets the dimension clears it.
  std::array<std::string, kDimensions> problems;
  std::string origin;  // for messages: "--snapshot s.yaml", "criteria.yaml", "flags"
};

CriteriaInput input_from_detected(const DetectedCriteria& d, std::string origin);

// Lays `top` over `base`. The hardware a recipe is for is one choice: when `top` gives an
// accelerator or pools, base's accelerator, pools and node count go (a detected pool layout
// is replaced, not mixed with a flag). Throws core::InvalidInput when `top` gives a node count
// for a cluster `base` describes as pools.
void layer_criteria(CriteriaInput& base, const CriteriaInput& top);

// Throws core::InvalidInput naming where a value came from (file:line:column and field, or
// the flag) when it is not one of the library's values.
void check_criteria_values(const Library& lib, const CriteriaInput& in);

// The query to resolve. Throws the problem of a dimension no source settled.
Query query_from_input(const CriteriaInput& in);

// The `bundle` part of a config file; empty strings are unset.
struct BundleConfig {
  std::string deployer, output, repo_url, repo_path, revision, argocd_namespace, flux_namespace;
};

// The `validate` part of a config file.
struct ValidateConfig {
  std::vector<std::string> phases;
  std::string output;  // table | json | ctrf
  std::string kubeconfig, context;
};

// A config file (kind RecipeConfig). Paths in it are relative to the file's directory and
// are returned resolved against it.
struct RecipeConfig {
  CriteriaInput criteria;
  std::vector<std::string> data;  // --data directories
  std::string recipe;             // recipe file: written by `recipe`, read by bundle/validate
  std::string snapshot;           // read by `recipe` (criteria) and `validate`
  BundleConfig bundle;
  ValidateConfig validate;
};

// Parse strictly (unknown keys fail with line:column and the near miss; a bad value names the
// field, the value and the valid ones). `path` is read from disk; the *_text forms take text.
CriteriaInput criteria_file_from_text(std::string_view text, std::string_view source);
CriteriaInput load_criteria_file(const std::string& path);
RecipeConfig config_from_text(std::string_view text, std::string_view source,
                              const std::string& base_dir);
RecipeConfig load_config(const std::string& path);

}  // namespace gpufleet::recipe
