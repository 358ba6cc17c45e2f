// Images that operators create at run time from their own custom resources (the GPU
// Operator's driver, toolkit, device plugin, DCGM exporter, ...; the Network Operator's OFED
// init container, SR-IOV daemons). They are not in a chart's rendered objects, so `bundle
// --images` finds them through the value paths the registry declares per component
// (`operatorImages`), resolved against the chart's default values merged with the values the
// bundle installs. The recipe carries the declarations (components[].operatorImages), so
// `bundle` needs no library.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::recipe {

// One image an operator creates, as value paths into its chart's values: either the
// {repository, image, version} triple the operator joins (repository/image:version, or
// repository/image@sha256:... for a digest), or one path holding the whole reference.
struct OperatorImage {
  std::string name;        // "driver", "device-plugin", ...
  std::string repository;  // value paths ("driver.repository"); empty with `reference`
  std::string image;
  std::string version;
  std::string reference;             // a path to a whole image reference
  std::vector<std::string> enabled;  // paths that must not be false for the image to run
  // The chart's appVersion stands for an unset version (the operator's documented default).
  bool app_version_default = false;
  // The tag gets "-<os ID><os version>" of each node OS in use (the GPU Operator's driver).
  bool os_tag = false;
};

// Reads (and checks) an `operatorImages` map, {name: {repository, image, version, reference,
// enabled, defaultVersion, osTag}}, of a registry or a recipe. Throws core::InvalidInput naming
// `where`, the field and the fix (unknown key, wrong kind, malformed path, reference mixed with
// the triple). `values` (the component's own values, may be null) must agree with the paths:
// a path through a scalar, or a non-scalar where a string is expected, is an error.
std::vector<OperatorImage> operator_images_from_value(const core::Value& v, std::string_view where,
                                                      const core::Value& values = {});
core::Value operator_images_to_value(const std::vector<OperatorImage>& images);

// Helm's merge of a chart's default values with the values given: maps merge key by key,
// anything else replaces, null deletes the key.
core::Value merge_chart_values(const core::Value& defaults, const core::Value& given);

// A node OS the driver runs on, as the GPU Operator names it in driver tags: "ubuntu22.04".
// Derived from the recipe's node.os / node.osVersion constraints ("== X" or "in X, Y"),
// cluster-wide and per pool (a pool's own constraints win); `unknown` says why a pool's could
// not be enumerated ("rhel: node.osVersion matches 9.*").
struct NodeOsTags {
  std::set<std::string> tags;
  std::vector<std::string> unknown;
};

struct OperatorImagesResult {
  std::set<std::string> images;
  // Lines for images.txt's comment header: what was left to the operator, or could not be
  // listed, and how to settle it.
  std::vector<std::string> notes;
};

// The images of `declared` for component `component`: `values` are the chart's defaults
// merged with the bundle's (merge_chart_values), `app_version` the chart's appVersion, `os`
// the node OS tags for `osTag` images. An image whose `enabled` path is false contributes
// nothing. Throws core::InvalidInput when a declared path is in neither the chart's values nor
// the bundle's (the registry is stale for this chart version) or holds the wrong kind.
OperatorImagesResult resolve_operator_images(std::string_view component,
                                             const std::vector<OperatorImage>& declared,
                                             const core::Value& values,
                                             std::string_view app_version, const NodeOsTags& os);

}  // namespace gpufleet::recipe
