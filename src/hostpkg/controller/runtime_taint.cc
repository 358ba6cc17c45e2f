#include "hostpkg/controller/runtime_taint.h"

namespace gpufleet::hostpkg {

TaintAction runtime_taint_action(const TaintFacts& f) {
  if (f.tainted && f.done_here) return f.others_done ? TaintAction::Remove : TaintAction::Keep;
  if (f.auto_taint && !f.tainted && !f.has_record && f.set_created) {
    // A node that joined after the set and has never been touched by it.
    if (!f.node_joined || *f.node_joined <= *f.set_created) return TaintAction::Keep;
    return TaintAction::Add;
  }
  return TaintAction::Keep;
}

}  // namespace gpufleet::hostpkg
