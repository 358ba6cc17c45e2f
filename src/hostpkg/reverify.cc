#include "hostpkg/reverify.h"

namespace gpufleet::hostpkg {

std::int64_t reverify_jitter(std::string_view set, std::string_view node,
                             std::chrono::seconds interval) {
  std::int64_t span = interval.count() / 10;
  if (span <= 0) return 0;
  std::string id(set);
  id += '\n';
  id += node;
  std::string h = short_hash(id);  // 16 hex digits
  std::uint64_t v = std::stoull(h.substr(0, 15), nullptr, 16);
  return static_cast<std::int64_t>(v % static_cast<std::uint64_t>(span + 1));
}

std::int64_t reverify_due(const NodeRecord& record, std::string_view set, std::string_view node,
                          std::chrono::seconds interval) {
  if (record.verified <= 0) return 0;  // never verified: due now
  return record.verified + interval.count() + reverify_jitter(set, node, interval);
}

bool reverify_eligible(const NodeRecord& record, const DesiredState& desired) {
  return record.state == NodeState::Done && record.rollout == desired.target &&
         record.reapply.empty() && record.pending_interrupt.kind == InterruptKind::None;
}

std::vector<Stage> verify_stages(const Package& package) {
  std::vector<Stage> out{Stage::Apply};
  if (!package.config_map.empty()) out.push_back(Stage::Config);
  if (package.interrupt.kind != InterruptKind::None || !package.config_interrupts.empty())
    out.push_back(Stage::PostInterrupt);
  return out;
}

void record_verification(NodeRecord& record, std::int64_t now, const VerifyOutcome& outcome,
                         DriftAction on_drift) {
  record.verified = now;
  if (outcome.ok) {
    record.drift.reset();
    return;
  }
  std::int64_t since =
      record.drift && record.drift->package == outcome.package ? record.drift->since : now;
  record.drift = Drift{outcome.package, outcome.message.substr(0, 1000), since};
  if (on_drift == DriftAction::Reapply) record.reapply.insert(outcome.package);
}

bool reapply_drifted(NodeRecord& record, const HostPackageSet& set) {
  if (set.reverify.on_drift != DriftAction::Reapply || !record.drift) return false;
  if (set.find(record.drift->package) == nullptr) return false;
  return record.reapply.insert(record.drift->package).second;
}

std::string verify_key(const Package& package, const DesiredState& desired, std::int64_t round) {
  std::string hash;
  for (std::size_t i = 0; i < desired.set->packages.size(); ++i) {
    if (desired.set->packages[i].name == package.name) hash = desired.package_config_hash[i];
  }
  return package.name + "/verify/" + package.version_text + "/" + hash + "/r" +
         std::to_string(round);
}

}  // namespace gpufleet::hostpkg
