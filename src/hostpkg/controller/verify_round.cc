#include "hostpkg/controller/verify_round.h"

#include "hostpkg/controller/node_step.h"

namespace gpufleet::hostpkg {

VerifyRound decide_verify_round(const std::vector<VerifyPodFacts>& pods, bool room,
                                std::chrono::system_clock::time_point now) {
  VerifyRound r;
  r.kind = VerifyRound::Kind::Record;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const VerifyPodFacts& p = pods[i];
    r.looked_at = i + 1;
    if (!p.exists) {
      r.kind = room ? VerifyRound::Kind::Create : VerifyRound::Kind::Wait;
      return r;
    }
    if (!p.outcome) {
      if (p.created && now > *p.created + p.limit + kStagePodGrace) {
        r.outcome = {false, p.package,
                     "verify pod " + p.pod_name + " did not finish within its timeout"};
        return r;
      }
      r.kind = VerifyRound::Kind::Wait;
      return r;
    }
    if (!p.outcome->ok) {
      r.outcome = {false, p.package, p.outcome->status + ": " + p.outcome->message};
      return r;
    }
  }
  return r;
}

}  // namespace gpufleet::hostpkg
