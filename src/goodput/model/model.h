// The goodput benchmark's fleet model (docs/goodput.md "The goodput benchmark"): a
// discrete-event model of a GPU fleet running synchronous multi-node jobs under faults drawn
// from published rates, run side by side under several configurations of what reacts to a
// fault. Time is a simulated clock in whole seconds; nothing sleeps, so weeks of fleet time
// take seconds of CPU.
//
// What decides is the real code, not a copy of it: a GPU fault's health state comes from the
// Xid catalog through the kernel-log monitor's mapping (sentinel::xid_health), the quarantine
// from the SentinelPolicy's rules (sentinel::RuleSet) and its circuit breaker
// (sentinel::CircuitBreaker), and the accounting from goodput's Ledger and summarize_fleet,
// fed the observations and incidents a controller would see. What a configuration decides
// about a fault is one function (Configuration::respond), so a configuration that is not built
// yet plugs in as one more implementation.
//
// Deterministic: the faults are a pure function of the scenario and its seed (sample_faults),
// every configuration meets the same faults, and the run draws nothing else. Not thread-safe;
// one run per thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"
#include "goodput/fleet.h"
#include "goodput/ledger.h"

namespace gpufleet::goodput::model {

// Simulated time 0 as unix seconds (the ledgers' and the circuit breaker's clock).
inline constexpr std::int64_t kEpoch = 1'767'225'600;  // 2026-01-01T00:00:00Z

// What broke, as the benchmark counts it (the ground truth, whatever a configuration saw).
enum class Category : std::uint8_t {
  Gpu,        // a GPU Xid (the Llama 3 run's GPU-related interruptions)
  Network,    // an InfiniBand link down long enough to kill the job
  Host,       // the node's own hardware (power, memory, CPU, disk): no GPU monitor sees it
  Software,   // the job's own crash (a bug, a NCCL watchdog): no node is at fault
  LinkFlap,   // an IB link flapping briefly: the job may survive it
  Straggler,  // a node running slow, dragging its synchronous job
};
inline constexpr std::size_t kCategoryCount = 6;
std::string_view category_name(Category c) noexcept;

// How much of the fleet a fault takes: one GPU, the whole node, one link, or nothing (the
// job's own fault).
enum class Scope : std::uint8_t { None, Gpu, Node, Link };
std::string_view scope_name(Scope s) noexcept;

// One GPU Xid in the mix, with its share of the GPU-related faults.
struct XidShare {
  int code = 0;
  double weight = 0;
};

struct JobSpec {
  std::string name;
  std::int64_t count = 1;            // jobs of this shape
  std::int64_t nodes = 1;            // nodes per job (all 8 GPUs of each)
  std::int64_t checkpoint_s = 1800;  // a checkpoint every this many seconds of running
  std::int64_t restart_s = 600;      // reschedule, image, init, load the checkpoint
};

struct ManualPolicy {
  std::int64_t crash_detect_s = 600;            // a hung job's watchdog (NCCL timeout) kills it
  std::int64_t triage_s = 3600;                 // a person finds the node the crash points at
  std::int64_t repair_s = 8 * 3600;             // a person repairs a node (reset, reboot, reseat)
  std::int64_t straggler_notice_s = 2 * 86400;  // a person notices a slow job's slow node
};

struct GpufleetTimes {
  std::int64_t detect_s = 5;  // monitor poll + journal + controller to the cordon
  std::int64_t drain_s = 30;  // eviction to the pods gone (the pods' grace period)
  std::int64_t gpu_reset_s = 120;
  std::int64_t reboot_s = 600;
  std::int64_t validate_s = 900;  // certify's categories on the repaired node
};

struct Scenario {
  std::uint64_t seed = 1;
  std::int64_t nodes = 1024;
  std::int64_t gpus_per_node = 8;
  std::int64_t days = 28;
  std::vector<JobSpec> jobs;
  // Unexpected interruptions per GPU-hour (Llama 3: 419 in 54 days on 16,384 GPUs) times
  // `rate_multiplier`, split into GPU-related (`gpu_fraction`) and the rest, which divides into
  // network / host / software by the three shares below.
  double interruptions_per_gpu_hour = 419.0 / (54.0 * 24.0 * 16384.0);
  double rate_multiplier = 1.0;
  double gpu_fraction = 0.587;
  double network_share = 0.2;
  double host_share = 0.4;
  double software_share = 0.4;
  std::vector<XidShare> xids;
  // Of the GPU and host faults, the share a reset or reboot does not fix (hardware to replace).
  double hardware_fraction = 0.25;
  std::int64_t hardware_repair_s = 3 * 86400;
  // Brief IB link flaps, per node-day; down this long; the share that kills the job.
  double link_flaps_per_node_day = 0.01;
  std::int64_t link_flap_down_s = 20;
  double link_flap_crash_fraction = 0.25;
  // Silent stragglers per node-day, each `straggler_slowdown` slow (0.2: the node runs at 80 %).
  double stragglers_per_node_day = 0.002;
  double straggler_slowdown = 0.2;
  ManualPolicy manual;
  GpufleetTimes gpufleet;
  core::Value policy;  // a SentinelPolicy spec (rules, breaker, remediation)

  // The default scenario: 1,024 nodes, one 768-node job, 16 of 8 nodes, 32 of 2, at the
  // Llama 3 rate (bench/goodput/llama3-1024.yaml is the same, written out).
  static Scenario defaults();
  // Reads a scenario document strictly (unknown keys, out-of-range values, jobs that do not
  // fit the fleet are errors naming the field). Throws core::InvalidInput.
  static Scenario from_value(const core::Value& v, std::string_view source);
};

struct Fault {
  std::int64_t at = 0;
  Category category = Category::Gpu;
  Scope scope = Scope::Node;
  std::int64_t node = 0;
  std::int64_t gpu = 0;   // GPU index on the node (Gpu scope, also recorded for Node)
  int xid = 0;            // Gpu category: the Xid code
  bool hardware = false;  // a reset or reboot does not fix it
  bool crashes_job = true;
  std::int64_t id = 0;  // its order in the sample
};

// The scope of a GPU Xid from the catalog's recommended action: reboot-node takes the node,
// reset-gpu / restart-app / decode one GPU, ignore nothing. Throws core::InvalidInput for a
// code the catalog does not know.
Scope xid_scope(int code);

// Every fault of the scenario's run, in time order: Poisson arrivals at the scenario's rates
// over its whole fleet (every GPU-hour counts, busy or idle), a uniformly drawn node and GPU.
std::vector<Fault> sample_faults(const Scenario& s);

// What a configuration sees when it decides.
struct FleetView {
  std::int64_t now = 0;
  std::int64_t nodes = 0;
  bool node_runs_job = false;
};

// What a configuration decides about one fault. Times are from the fault.
struct FaultResponse {
  // gpufleet acted (a quarantine): the ledger gets the incident with `acted_at`.
  bool gpufleet_acts = false;
  std::int64_t acted_after_s = 0;
  std::string incident_check;  // the incident's check ("xid", "ib-port"): its ledger cause
  // The job on the node stops (crash or drain) `stop_after_s` after the fault, and may run
  // again `resume_after_s` after it stopped (without the node while the node is out).
  bool stops_job = false;
  std::int64_t stop_after_s = 0;
  std::int64_t resume_after_s = 0;
  // The job checkpoints just before it stops (a job-aware drain): no work is redone.
  bool checkpoint_before_stop = false;
  // GPUs of the node taken out of service `out_after_s` after the fault, for `out_for_s`.
  // The job keeps the node until then (a straggler nobody noticed yet).
  std::int64_t out_gpus = 0;
  std::int64_t out_after_s = 0;
  std::int64_t out_for_s = 0;
  bool quarantined = false;      // sentinel quarantined the node
  bool breaker_refused = false;  // the circuit breaker refused the quarantine
  std::string action;            // what repaired it ("reboot", "manual", ...)
};

// A set of decision functions: one configuration of the benchmark.
class Configuration {
 public:
  virtual ~Configuration() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  virtual FaultResponse respond(const Fault& f, const FleetView& view) = 0;
};

// (a) no gpufleet: a fault is found when the job crashes (a straggler when a person notices),
// a person finds and repairs the node, the job restarts from its last checkpoint.
std::unique_ptr<Configuration> no_gpufleet(const Scenario& s);
// (b) gpufleet node-level, as built: the monitors' detection, the policy's rules, the
// circuit breaker, a whole-node cordon, drain, remediation and validation; the job restarts
// from its last checkpoint. Throws core::InvalidInput for a policy that does not compile.
std::unique_ptr<Configuration> gpufleet_node_level(const Scenario& s);

struct ConfigurationResult {
  std::string name;
  double ettr = 1.0;         // productive less straggler slowdown, over wall GPU-seconds
  double ledger_ettr = 1.0;  // the ledgers' own figure (slowdown is invisible to them)
  double wall_gpu_hours = 0;
  double productive_gpu_hours = 0;                        // less straggler slowdown: the goodput
  double capacity_gpu_hours = 0;                          // the fleet's GPUs × the run's length
  std::array<double, kCauseCount> lost_by_cause{};        // the ledgers' causes
  std::array<double, kCategoryCount> lost_by_category{};  // the true causes
  double straggler_gpu_hours = 0;
  double out_of_service_gpu_hours = 0;  // healthy-or-not GPUs held out by repairs
  std::int64_t faults = 0;              // applied (on a node in service)
  std::int64_t faults_on_jobs = 0;      // of those, on a node running a job
  std::int64_t gpu_faults_on_jobs = 0;
  std::int64_t disruptions = 0;  // (incident, job) pairs: a job stopped by a fault
  std::int64_t gpu_disruptions = 0;
  std::int64_t gpu_scoped_faults = 0;
  double gpu_scoped_lost_gpu_hours = 0;  // jobs' lost time + GPUs held out, of those faults
  std::int64_t quarantines = 0;
  std::int64_t breaker_refusals = 0;
  std::int64_t interruptions = 0;
  double mtbi_hours = 0;      // the run's length / faults applied
  double job_mtbi_hours = 0;  // the largest job's wall / its interruptions
  std::int64_t lemon_nodes = 0;
  [[nodiscard]] double jobs_disrupted_per_fault() const;
  [[nodiscard]] double jobs_disrupted_per_gpu_fault() const;
  [[nodiscard]] double lost_per_gpu_scoped_fault() const;
};

// Runs the scenario under one configuration.
ConfigurationResult run(const Scenario& s, const std::vector<Fault>& faults, Configuration& c);

// {scenario: {...}, configurations: [...]}; deterministic.
core::Value report_to_value(const Scenario& s, const std::vector<Fault>& faults,
                            const std::vector<ConfigurationResult>& results);
// The table printed on stdout.
std::string report_table(const Scenario& s, const std::vector<Fault>& faults,
                         const std::vector<ConfigurationResult>& results);

}  // namespace gpufleet::goodput::model
