// The progress of one category of a Certification or WorkloadRun, kept in the API (a
// ConfigMap the run owns, data key state.json) so that a controller killed at any point
// resumes where it was: each group test with its result once recorded, the isolation
// planner's state for diagnose, and the failed nodes once the category ended. A group whose
// result is recorded is never run again; its Job is deleted only after the record is stored.
// Sized for 5,000 nodes: a group is a few node names and a short result, and only failed
// nodes are listed (every other tested node passed).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"

namespace gpufleet::certify {

struct GroupResult {
  bool passed = false;
  std::string reason;  // a Reason name; empty when passed
  std::string message;
  std::map<std::string, double> metrics;
  int attempts = 1;  // runs it took (retries, verdict.h should_retry)
};

struct GroupState {
  std::uint32_t id = 0;
  int round = 0;                   // diagnose: the planner round; else 0
  std::string purpose;             // diagnose: screen, isolate, ...; else the scale
  std::vector<std::string> nodes;  // every member, padding included
  std::optional<GroupResult> result;
  // The attempt whose Job runs now (1-based). Stored before that attempt's Job is created, and
  // the Job's name carries it, so a controller killed between the two neither loses nor
  // repeats an attempt.
  int attempt = 1;
  std::vector<std::string> earlier;  // "<reason>: <message>" of each retried attempt
};

struct NodeFailure {
  std::string node;
  std::string reason;
  std::string message;
};

struct Finding {
  std::vector<std::string> nodes;
  std::string message;
};

struct CategoryState {
  std::string name;
  std::string phase = "Running";  // Running, Passed, Failed
  std::string start_time;
  std::string completion_time;
  std::string message;
  std::vector<GroupState> groups;
  core::Value planner;  // diagnose: IsolationPlanner::to_value(); null otherwise
  int rounds = 0;
  std::vector<NodeFailure> failed;  // once ended: every node that did not pass
  std::vector<Finding> infrastructure;

  [[nodiscard]] bool done() const { return phase == "Passed" || phase == "Failed"; }
  [[nodiscard]] core::Value to_value() const;
  // Throws core::InvalidInput on a malformed state (naming the field).
  static CategoryState from_value(const core::Value& v);
};

}  // namespace gpufleet::certify
