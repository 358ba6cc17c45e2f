// Registers the hostpkg controller (src/hostpkg/controller) with `gpufleet controller`.
#include "controller/registry.h"
#include "hostpkg/controller/reconciler.h"

namespace gpufleet::cli {
namespace {

const controller::Registration kHostpkg({
    .name = "hostpkg",
    .description = "rolls HostPackageSets out node by node (cordon, drain, stage pods, verify)",
    .settings =
        {
            {"hostpkg.namespace",
             "namespace of stage pods (default: the controller's own, else gpufleet-system)"},
            {"hostpkg.runner-image", "image running `gpufleet pkg-step` in stage pods"},
            {"hostpkg.poll", "how often waiting nodes are looked at again (default 2s)"},
            {"hostpkg.max-unavailable",
             "cluster-wide budget shared by all sets: nodes (5) or percent (10%)"},
            {"hostpkg.topology-key", "label whose values are budget domains (rack, NVLink)"},
            {"hostpkg.max-unavailable-per-domain", "nodes out at once per topology domain"},
            {"hostpkg.reverify-max-in-flight",
             "verify pods of one set running at once (spec.reverify; default 50)"},
            {"hostpkg.reverify-interval",
             "tests and demos only: replaces every reverify interval (below the 1m minimum)"},
        },
    .setup = [](controller::Manager& m,
                const controller::Context& ctx) { hostpkg::setup_hostpkg(m, ctx); },
});

}  // namespace
}  // namespace gpufleet::cli
