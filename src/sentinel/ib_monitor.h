// The NIC/InfiniBand monitor ("ib-port"): reads every port under
// /sys/class/infiniband/<dev>/ports/<n>/ (state, phys_state, counters/) below the node's host
// root and reports, per port (entity "<dev>/<n>", kind NIC):
// - port down / up (state "4: ACTIVE" and phys_state "5: LinkUp" is up; anything else down),
// - flapping: `flap_downs` or more down transitions within `flap_window_ms` (a link_downed
//   increase between two polls counts as one, so a flap faster than the poll is not missed),
// - error counters as deltas between polls. The IB counters are narrow (8/16/32 bit) and
//   SATURATE at their maximum rather than wrap: a counter stuck at its maximum has an unknown
//   delta and is reported as saturated once; a counter that went down was reset (perfquery -R)
//   and counts from zero.
// The first poll after a start is a baseline: states are reported, counter deltas are not.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/plugin.h"

namespace gpufleet::sentinel {

inline constexpr std::string_view kPortEventKind = "sentinel.port";
inline constexpr std::string_view kIbCheck = "ib-port";

struct IbMonitorOptions {
  std::chrono::milliseconds interval{1000};
  std::int64_t flap_window_ms = 10 * 60 * 1000;
  int flap_downs = 3;
  std::size_t max_ports = 256;           // devices x ports read per poll
  std::function<std::int64_t()> now_ms;  // default: the system clock
};

// The error counters watched and the value each saturates at.
struct IbCounter {
  std::string_view name;
  std::uint64_t max;
};
inline constexpr IbCounter kIbCounters[] = {{"link_downed", 0xff},
                                            {"link_error_recovery", 0xff},
                                            {"symbol_error", 0xffff},
                                            {"port_rcv_errors", 0xffff},
                                            {"port_xmit_discards", 0xffff},
                                            {"local_link_integrity_errors", 0xf},
                                            {"excessive_buffer_overrun_errors", 0xf}};

// Delta of a saturating counter from `prev` to `cur` with maximum `max`; `saturated` is set
// when the counter sits at its maximum (the delta is then a lower bound).
std::uint64_t counter_delta(std::uint64_t prev, std::uint64_t cur, std::uint64_t max,
                            bool& saturated) noexcept;

class IbMonitor final : public agent::Monitor {
 public:
  explicit IbMonitor(const agent::NodeContext& node, IbMonitorOptions options = {});
  [[nodiscard]] std::chrono::milliseconds interval() const override { return options_.interval; }
  void poll(agent::Emitter& out) override;

 private:
  struct Port {
    bool seen = false;
    bool up = false;
    std::string health;  // last reported: Healthy | Warning | Fatal
    std::map<std::string, std::uint64_t, std::less<>> counters;
    std::map<std::string, bool, std::less<>> saturated;
    std::deque<std::int64_t> downs;  // times of down transitions within the window
  };
  void poll_port(const std::string& id, const std::filesystem::path& dir, std::int64_t now,
                 agent::Emitter& out);
  void report(const std::string& id, Port& p, std::string_view state, std::string_view reason,
              const std::string& message, agent::Emitter& out);

  agent::NodeContext node_;
  IbMonitorOptions options_;
  std::map<std::string, Port> ports_;
};

std::unique_ptr<agent::Monitor> make_ib_monitor(const agent::NodeContext& node);

}  // namespace gpufleet::sentinel
