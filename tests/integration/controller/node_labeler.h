// The example controller of docs/controller.md (kept identical by controller_test's
// DocsExample), run against kube-local by node_labeler_test.cc.
#pragma once

namespace gpufleet::controller {
class Manager;
}

void add_node_labeler(gpufleet::controller::Manager& manager);
