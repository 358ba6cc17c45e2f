#include "test_library.h"
#include "support/source_paths.h"

namespace gpufleet::recipe::testing {

std::vector<LibraryFile> repo_library_files() {
  return read_library_dir(std::string(GPUFLEET_SOURCE_DIR) + "/data/recipes");
}

const Library& repo_library() {
  static const Library lib = load_library(repo_library_files());
  return lib;
}

LibraryFile file(std::string path, std::string content) {
  std::string origin = "test:" + path;
  return {std::move(path), std::move(origin), std::move(content)};
}

std::vector<LibraryFile> small_library(std::vector<LibraryFile> extra) {
  std::vector<LibraryFile> files = {
      file("criteria.yaml", R"(apiVersion: gpufleet.io/v1alpha1
kind: RecipeCriteria
values:
  service: [eks, gke]
  accelerator: [h100, b200]
  os: [ubuntu, cos]
  intent: [training, inference]
  platform: [dynamo]
unsupported:
  - when: {service: [eks], os: [cos]}
    reason: COS is GKE only
)"),
      file("registry.yaml", R"(apiVersion: gpufleet.io/v1alpha1
kind: ComponentRegistry
components:
  a:
    chart: {repository: https://charts.example.com, name: a, version: 1.0.0}
    namespace: ns-a
    values: {x: 1, nested: {keep: true}}
    health:
      - {kind: Deployment, name: a}
      - {kind: CustomResourceDefinition, name: as.example.com}
  b:
    chart: {repository: oci://registry.example.com/charts, name: b, version: v2.0.0}
    namespace: ns-b
    dependencies: [a]
  c:
    chart: {repository: https://charts.example.com, name: c, version: 3.0.0}
    namespace: ns-c
    dependencies: [a]
  d:
    chart: {repository: https://charts.example.com, name: d, version: 4.0.0}
    namespace: ns-d
    dependencies: [b, c]
)"),
  };
  return overlay_files(std::move(files), extra);
}

}  // namespace gpufleet::recipe::testing
