// Leader election on a coordination.k8s.io/v1 Lease, as client-go does it:
//  - a candidate takes the lease when it is free or when its holder has not renewed it for
//    leaseDurationSeconds, measured on the candidate's own clock from when it last saw the
//    record change (so clocks need not agree);
//  - the leader renews every retry_period; if it has not renewed for renew_deadline
//    (< lease_duration) it stops its work at once, before any other candidate may take over;
//  - on a clean stop the leader releases the lease so that a successor need not wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>

#include "kube/client.h"

namespace gpufleet::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per process, e.g. the pod name plus a random suffix
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_stop = true;
};

struct LeaderCallbacks {
  // Runs on its own thread while this process leads; must return soon after `stop` is
  // requested (leadership lost or the elector stopped).
  std::function<void(std::stop_token stop)> on_started_leading;
  // After the work has returned.
  std::function<void()> on_stopped_leading;
  // Whenever the observed holder changes (including to this process).
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  // Throws core::InvalidInput unless lease_duration > renew_deadline > retry_period > 0 and
  // the names are set.
  LeaderElector(Client& client, LeaderElectionConfig config, LeaderCallbacks callbacks);

  // Blocks: campaigns until elected, leads until leadership is lost or `stop` is requested,
  // then returns (a process normally exits then; calling run() again campaigns anew).
  void run(std::stop_token stop);

  [[nodiscard]] bool is_leader() const;
  [[nodiscard]] std::string observed_leader() const;

 private:
  bool try_acquire_or_renew();
  void release();
  bool sleep(std::stop_token& stop, std::chrono::milliseconds d);

  Client& client_;
  LeaderElectionConfig config_;
  LeaderCallbacks callbacks_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool leader_ = false;
  std::string observed_holder_;
  std::string observed_record_;  // holder|renewTime|resourceVersion last seen
  std::chrono::steady_clock::time_point observed_at_{};
};

}  // namespace gpufleet::kube
