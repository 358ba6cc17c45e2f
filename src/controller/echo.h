// The sample controller `echo` (runnable with `gpufleet controller --controllers=echo`, and
// the subject of the runtime's integration tests): for every ConfigMap labelled
// gpufleet.io/echo=source it keeps a copy "<name>-echo" (labelled gpufleet.io/echo=copy,
// owned by the source, so the garbage collector deletes it with the source) whose data equals
// the source's.
//
// Its side effect is idempotent by construction: the copy has a name derived from the
// source's, it is written with server-side apply (the same apply twice is one object, and an
// unchanged apply stores nothing), and the reconciler writes nothing when the cached copy
// already matches. A crash at any point therefore leaves either no copy, or a copy the next
// reconcile completes; never two.
#pragma once

#include <chrono>

#include "controller/cache.h"
#include "controller/reconciler.h"
#include "kube/client.h"

namespace gpufleet::controller {

class Manager;
struct Context;

inline constexpr const char* kEchoLabel = "gpufleet.io/echo";

class EchoReconciler : public Reconciler {
 public:
  // `delay`: a pause between deciding and writing, so tests can kill the process mid-reconcile.
  EchoReconciler(kube::Client& client, const Cache& sources, const Cache& copies,
                 std::chrono::milliseconds delay = {});
  Result reconcile(const Request& request, std::stop_token stop) override;

  // The copy's name for a source.
  static std::string copy_name(std::string_view source) { return std::string(source) + "-echo"; }

 private:
  kube::Client& client_;
  const Cache& sources_;
  const Cache& copies_;
  std::chrono::milliseconds delay_;
};

// Adds the echo controller to `manager` (settings: echo.delay, a duration).
void setup_echo(Manager& manager, const Context& context);

}  // namespace gpufleet::controller
