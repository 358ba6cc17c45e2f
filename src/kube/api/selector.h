// metav1.LabelSelector matching: matchLabels and matchExpressions (In, NotIn, Exists,
// DoesNotExist), ANDed, as Deployments, PDBs and gpufleet's own sets select objects.
#pragma once

#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::kube {

// Throws core::InvalidInput naming the field and the fix for a malformed selector (unknown
// operator, values on Exists, no values on In/NotIn, a bad label key).
void validate_label_selector(const core::Value& selector, std::string_view field = "selector");

// True when `labels` (a metadata.labels map; null for none) satisfies the selector. A null or
// empty selector ({}) matches everything, as in the API. A malformed selector matches nothing
// (validate it when it is read).
bool selector_matches(const core::Value& selector, const core::Value& labels) noexcept;

}  // namespace gpufleet::kube
