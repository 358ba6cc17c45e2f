// `gpufleet hostpkg status [NAME]`: HostPackageSets as a table, then one progress bar per
// compartment, the conditions that are not as they should be, and the nodes named in status.
// A pure function of the set objects (as the API returns them), so it is tested without a
// cluster.
#pragma once

#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::hostpkg {

// "[##########----------]" for done of total, `width` cells.
std::string progress_bar(std::int64_t done, std::int64_t total, int width = 20);

// The table and the per-compartment bars of `sets` (each a whole HostPackageSet object).
std::string render_status(const std::vector<core::Value>& sets);

// What -o json|yaml prints: name, spec summary and status of each set.
core::Value status_document(const std::vector<core::Value>& sets);

}  // namespace gpufleet::hostpkg
