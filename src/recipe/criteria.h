// Criteria that select overlays: service, accelerator, os, intent, platform (+ node count).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::recipe {

// The wildcard value. On an overlay it matches any query value; in a query it matches only
// overlays that are wildcards themselves, so a generic query never pulls specific settings.
inline constexpr std::string_view kAny = "any";

inline constexpr std::size_t kDimensions = 5;
enum Dimension : std::size_t { kService = 0, kAccelerator, kOs, kIntent, kPlatform };
inline constexpr std::array<std::string_view, kDimensions> kDimensionNames = {
    "service", "accelerator", "os", "intent", "platform"};

using CriteriaValues = std::array<std::string, kDimensions>;

inline CriteriaValues any_criteria() {
  return {std::string(kAny), std::string(kAny), std::string(kAny), std::string(kAny),
          std::string(kAny)};
}

// One node pool of a (possibly heterogeneous) cluster.
struct PoolQuery {
  std::string name;
  std::string accelerator;                 // a library accelerator or "any"
  std::optional<std::int64_t> node_count;  // matches overlays with a nodeCount criterion
  // Labels that pick the pool's nodes; empty: gpufleet.io/node-pool=<name>. Pools detected
  // from a cluster use the node group label they were found by (eks.amazonaws.com/nodegroup).
  core::Value node_selector = core::Value::map();
};

// What the user asks for. With no pools, one pool "default" with criteria[kAccelerator].
struct Query {
  CriteriaValues criteria = any_criteria();
  std::optional<std::int64_t> node_count;
  std::vector<PoolQuery> pools;
  std::vector<std::string> mixins;  // opt-in fragments applied above every overlay
  // Components someone else runs in the cluster: component -> what was found (or why).
  std::map<std::string, std::string> external;
};

// Parses "NAME=ACCELERATOR[:COUNT]" (the --pool flag); throws core::InvalidInput.
PoolQuery parse_pool_flag(std::string_view text);

}  // namespace gpufleet::recipe
