// A process that campaigns for a Lease and, while leading, prints "leading" heartbeats:
//   kube_leader_helper KUBECONFIG NAMESPACE LEASE IDENTITY
// Used by the leader election test, which runs two of these and SIGKILLs the leader.
#include <cstdio>
#include <stop_token>
#include <thread>

#include "kube/leader_election.h"

int main(int argc, char** argv) {
  using namespace gpufleet::kube;
  using namespace std::chrono_literals;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s KUBECONFIG NAMESPACE LEASE IDENTITY\n", argv[0]);
    return 2;
  }
  Client client(load_kubeconfig({{argv[1]}, ""}));
  LeaderElectionConfig cfg;
  cfg.lease_namespace = argv[2];
  cfg.lease_name = argv[3];
  cfg.identity = argv[4];
  cfg.lease_duration = 4s;
  cfg.renew_deadline = 3s;
  cfg.retry_period = 500ms;
  LeaderCallbacks cb;
  cb.on_started_leading = [&](std::stop_token stop) {
    std::printf("leading %s\n", argv[4]);
    std::fflush(stdout);
    while (!stop.stop_requested()) std::this_thread::sleep_for(50ms);
  };
  cb.on_stopped_leading = [&] {
    std::printf("stopped %s\n", argv[4]);
    std::fflush(stdout);
  };
  LeaderElector elector(client, cfg, cb);
  std::stop_source never;
  elector.run(never.get_token());
  return 0;
}
