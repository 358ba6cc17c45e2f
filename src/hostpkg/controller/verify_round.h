// One node's re-verification round (the reverify pass of reverify_pass.cc: observe -> decide
// -> act): the pass observes the verify pod of each of the set's packages for the round; the
// decision says whether to create the next pod, wait, or record the round's outcome. One
// package at a time, in the set's order; the first failure decides. Pure: the clock is an
// argument (tests/hostpkg/verify_round_test.cc).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "hostpkg/controller/stage_pod.h"
#include "hostpkg/reverify.h"

namespace gpufleet::hostpkg {

// One package's verify pod of the round.
struct VerifyPodFacts {
  std::string package;
  std::string pod_name;
  bool exists = false;
  std::optional<StageOutcome> outcome;  // once it finished
  std::optional<std::chrono::system_clock::time_point> created;
  std::chrono::seconds limit{0};  // the longest timeout of the package's verify stages
};

struct VerifyRound {
  enum class Kind {
    Create,  // create the pod of package looked_at - 1, then wait
    Wait,    // a pod runs, or there is no room for another (spread: a later pass)
    Record,  // every package passed, or `outcome` names the first that failed
  };
  Kind kind = Kind::Wait;
  std::size_t looked_at = 0;  // how many packages' pods the round has reached (names wanted)
  VerifyOutcome outcome;      // Record
};

// `room`: fewer verify pods of the set run than --set hostpkg.reverify-max-in-flight allows.
// A pod past its limit plus the stage pod grace fails its package.
VerifyRound decide_verify_round(const std::vector<VerifyPodFacts>& pods, bool room,
                                std::chrono::system_clock::time_point now);

}  // namespace gpufleet::hostpkg
