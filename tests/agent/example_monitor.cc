// The example monitor of docs/agent.md (docs_example test keeps the two identical). It is
// registered only in the test binaries; real monitors live in their subsystem (sentinel).
#include <filesystem>
#include <fstream>
#include <map>

#include "agent/nodehealth.h"
#include "agent/plugin.h"

namespace example {
// --- example begin ---
// Reports each InfiniBand port's state ("4: ACTIVE") as a health entity, once per change.
class IbPortMonitor final : public gpufleet::agent::Monitor {
 public:
  explicit IbPortMonitor(const gpufleet::agent::NodeContext& node)
      : root_(node.host_path("/sys/class/infiniband")) {}

  std::chrono::milliseconds interval() const override { return std::chrono::seconds(1); }

  void poll(gpufleet::agent::Emitter& out) override {
    std::error_code ec;
    for (const auto& dev : std::filesystem::directory_iterator(root_, ec)) {
      for (const auto& port : std::filesystem::directory_iterator(dev.path() / "ports", ec)) {
        std::string state;
        std::getline(std::ifstream(port.path() / "state"), state);
        const std::string id =
            dev.path().filename().string() + "/" + port.path().filename().string();
        if (last_[id] == state) continue;  // dedup at the source: report changes only
        last_[id] = state;
        gpufleet::core::Value v = gpufleet::core::Value::map();
        v["check"] = "ib-port";
        v["entity"] = id;
        v["entityKind"] = "NIC";
        v["state"] = state == "4: ACTIVE" ? "Healthy" : "Fatal";
        v["reason"] = state == "4: ACTIVE" ? "PortActive" : "PortNotActive";
        v["message"] = "port state " + state;
        out.emit(gpufleet::agent::kHealthKind, v);
      }
    }
  }

 private:
  std::filesystem::path root_;
  std::map<std::string, std::string> last_;
};

const gpufleet::agent::MonitorRegistration kIbPort("ib-port", [](const auto& node) {
  return std::make_unique<IbPortMonitor>(node);
});
// --- example end ---
}  // namespace example
