// The runtime-required taint on one node (the taint pass of node_marks.cc: observe -> decide ->
// act): lifted once every runtime-required set that selects the node is done there, put on a
// node that joined after an autoTaintNewNodes set and was never touched by it. Pure, so each
// case is unit-tested without an API server (tests/hostpkg/runtime_taint_test.cc).
#pragma once

#include <chrono>
#include <optional>

namespace gpufleet::hostpkg {

// What the taint pass saw of one node the (runtime-required) set selects.
struct TaintFacts {
  bool tainted = false;      // the node has the runtime-required taint
  bool has_record = false;   // this set's record is on the node
  bool done_here = false;    // that record is Done at the set's target
  bool others_done = false;  // every other runtime-required set selecting it is done there
  bool auto_taint = false;   // spec.autoTaintNewNodes
  std::optional<std::chrono::system_clock::time_point> set_created;
  std::optional<std::chrono::system_clock::time_point> node_joined;  // creationTimestamp
};

enum class TaintAction { Keep, Remove, Add };

// Remove: tainted and done here and for every other set; Add: autoTaintNewNodes, untainted,
// no record, and the node joined after the set was created; else Keep (a tainted node done
// here waits for the other sets, and is never re-tainted).
TaintAction runtime_taint_action(const TaintFacts& facts);

}  // namespace gpufleet::hostpkg
