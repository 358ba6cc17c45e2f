#include "certify/run_limits.h"

#include <charconv>

#include "core/errors.h"
#include "core/time.h"

namespace gpufleet::certify {
namespace {

std::int64_t positive_count(std::string_view key, const std::string& text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || v < 1 || v > 10'000'000)
    throw core::InvalidInput("setting " + std::string(key) + ": value \"" + text +
                             "\" is not a whole number from 1 to 10000000 (e.g. 512)");
  return v;
}

}  // namespace

RunLimits parse_run_limits(
    const std::function<std::string(std::string_view key, std::string_view fallback)>& setting) {
  RunLimits l;
  l.max_nodes = positive_count("certify.max-nodes", setting("certify.max-nodes", "5000"));
  l.max_gpus = positive_count("certify.max-gpus", setting("certify.max-gpus", "40000"));
  const std::string d = setting("certify.max-duration", "24h");
  auto parsed = core::try_parse_duration(d);
  if (!parsed || *parsed < std::chrono::minutes(1))
    throw core::InvalidInput("setting certify.max-duration: value \"" + d +
                             "\" is not a duration of at least 1m (e.g. 24h, 90m)");
  l.max_duration = std::chrono::duration_cast<std::chrono::seconds>(*parsed);
  return l;
}

std::int64_t selection_gpus(const Selection& selection) {
  std::int64_t n = 0;
  for (const NodeInfo& node : selection.nodes)
    n += node.gpu_count > 0 ? node.gpu_count : std::max(0, node.gpu_allocatable);
  return n;
}

std::optional<std::string> footprint_refusal(const Selection& selection, const RunLimits& limits) {
  const auto nodes = static_cast<std::int64_t>(selection.nodes.size());
  const std::int64_t gpus = selection_gpus(selection);
  std::string over, setting;
  if (nodes > limits.max_nodes) {
    setting = "certify.max-nodes";
    over =
        std::to_string(nodes) + " nodes, over " + setting + " " + std::to_string(limits.max_nodes);
  } else if (gpus > limits.max_gpus) {
    setting = "certify.max-gpus";
    over = std::to_string(gpus) + " GPUs (" + std::to_string(nodes) + " nodes), over " + setting +
           " " + std::to_string(limits.max_gpus);
  }
  if (over.empty()) return std::nullopt;
  return "spec.targets selects " + over +
         ": narrow spec.targets (nodeSelector, nodeNames) or split the run into several within "
         "the limit (the certify controller's setting " +
         setting + ", chart value controllers.certify.settings)";
}

std::chrono::seconds run_duration_bound(const RunSpec& spec, const RunLimits& limits) {
  if (spec.max_duration.count() == 0) return limits.max_duration;
  if (spec.max_duration > limits.max_duration)
    throw SpecError("DurationExceedsPolicy",
                    "spec.maxDuration: " + duration_text(spec.max_duration) +
                        " is over this cluster's certify.max-duration " +
                        duration_text(limits.max_duration) +
                        ": ask for at most that, or split the run into several");
  return spec.max_duration;
}

std::string duration_text(std::chrono::seconds d) {
  auto s = d.count();
  std::string out;
  if (s >= 3600) out += std::to_string(s / 3600) + "h";
  if (s % 3600 >= 60) out += std::to_string(s % 3600 / 60) + "m";
  if (s % 60 != 0 || out.empty()) out += std::to_string(s % 60) + "s";
  return out;
}

}  // namespace gpufleet::certify
