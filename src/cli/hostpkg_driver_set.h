// `gpufleet hostpkg driver-set`, added to the `hostpkg` command group.
#pragma once

namespace CLI {
class App;
}

namespace gpufleet::cli {

void add_hostpkg_driver_set(CLI::App& hostpkg);

}  // namespace gpufleet::cli
