// The workload catalog: templates of what certify runs, as data under data/certify/
// (compiled into the binary, see cmake/embed_tree.cmake). One YAML file per template, at
// <category>/<name>.yaml; its id is "<category>/<name>" (communication/nccl-all-reduce).
//
//   name: nccl-all-reduce            # = the file name
//   category: communication          # communication | diagnostics | training (= the folder)
//   description: ...
//   output: nccl                     # nccl | dcgm | training | result: which parser reads it
//   scale: nvlinkDomain              # perNode | nvlinkDomain | wholeSet | diagnose
//   launcher: mpi                    # mpi: an MPI program, one rank per GPU (indexed Job +
//                                    # headless Service, or an MPIJob: docs/certify.md)
//                                    # none: one pod per node runs `command` itself
//   image: ghcr.io/...:tag
//   command: [all_reduce_perf, -b, 8, -e, 8G, -f, "2", -g, "1"]
//   env: {NCCL_DEBUG: WARN}
//   statistic: largestSize           # nccl only: what busBandwidthGBps means
//   expectTransport: rdma            # nccl only: what a run across nodes must use between
//                                    # them: rdma (IB, RoCE or EFA; the default), ib, roce,
//                                    # efa, or any (not checked); see nccl_transport.h
//   timeout: 15m                     # Go duration; per job
//   retries: 1                       # a WorkloadFailed, MeasurementTimeout or Infrastructure
//                                    # group is re-run this often (verdict.h should_retry)
//   maxConcurrentJobs: 16
//   minNodes: 2                      # smallest group the workload can run on
//   expected: {busBandwidthGBps: 360}  # what healthy hardware reaches (informational)
//   overrides:                       # per GPU family (label nvidia.com/gpu.family)
//     - gpuFamily: blackwell
//       image: ... / env: {...} / expected: {...} / timeout: ...
// Unknown keys are errors naming the file, the key path and the allowed keys.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certify/judge.h"
#include "certify/nccl_parser.h"

namespace gpufleet::certify {

enum class Scale { PerNode, NvlinkDomain, WholeSet, Diagnose };
std::string_view scale_name(Scale s) noexcept;

struct FamilyOverride {
  std::string gpu_family;
  std::optional<std::string> image;
  std::map<std::string, std::string> env;  // merged over the template's
  std::map<std::string, double> expected;  // merged over the template's
  std::optional<std::chrono::seconds> timeout;
};

struct WorkloadTemplate {
  std::string id;  // "communication/nccl-all-reduce"
  std::string name;
  std::string category;
  std::string description;
  OutputKind output = OutputKind::Result;
  Scale scale = Scale::PerNode;
  bool mpi = false;
  std::string image;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  NcclStatistic statistic = NcclStatistic::LargestSize;
  TransportExpectation transport = TransportExpectation::Rdma;  // nccl only
  std::chrono::seconds timeout{600};
  int retries = 0;
  int max_concurrent_jobs = 8;
  int min_nodes = 1;
  std::map<std::string, double> expected;
  std::vector<FamilyOverride> overrides;

  // The template with the override for `gpu_family` applied (itself when none matches).
  [[nodiscard]] WorkloadTemplate for_family(std::string_view gpu_family) const;
};

struct CatalogFile {
  std::string path;    // relative: "communication/nccl-all-reduce.yaml"
  std::string source;  // for messages: "builtin:data/certify/..." or a file path
  std::string content;
};

class Catalog {
 public:
  // Throws core::InvalidInput naming the file and field on any invalid template, a
  // duplicated id, or a name/category that disagrees with the path.
  static Catalog load(const std::vector<CatalogFile>& files);
  // The catalog compiled into the binary (data/certify).
  static const Catalog& builtin();

  [[nodiscard]] const WorkloadTemplate* find(std::string_view id) const noexcept;
  // Like find(); throws core::InvalidInput listing the known ids.
  [[nodiscard]] const WorkloadTemplate& get(std::string_view id) const;
  [[nodiscard]] const std::vector<WorkloadTemplate>& templates() const noexcept {
    return templates_;
  }

 private:
  std::vector<WorkloadTemplate> templates_;  // sorted by id
};

// Parses one template document. Throws core::InvalidInput naming `source` and the field.
WorkloadTemplate parse_template(std::string_view yaml, std::string_view source,
                                std::string_view path);

std::vector<CatalogFile> builtin_catalog_files();  // generated

}  // namespace gpufleet::certify
