// The checks validate's deployment and conformance phases add to the constraint and health
// checks: Helm releases at their pins, operator resources ready, and what AI workloads rely
// on (DRA, gang scheduling, accelerator metrics, no hostPath GPU devices). Internal to the
// recipe module; validate.h is the interface.
#pragma once

#include "recipe/recipe.h"
#include "recipe/snapshot.h"
#include "recipe/validate.h"

namespace gpufleet::recipe::detail {

// Each component's Helm release: deployed, at the pinned chart version. An external component
// passes with a deployed release of its chart anywhere, at any version.
void check_releases(ValidationReport& out, const Recipe& recipe, const Snapshot& s);

// The custom resource of each operator the recipe installs (kOperatorResources): present and
// status.state "ready".
void check_operator_resources(ValidationReport& out, const Recipe& recipe, const Snapshot& s);

void check_conformance(ValidationReport& out, const Recipe& recipe, const Snapshot& s);

}  // namespace gpufleet::recipe::detail
