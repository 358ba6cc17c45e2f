#include "sentinel/ib_monitor.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <vector>

#include "agent/nodehealth.h"
#include "core/file_reader.h"

namespace gpufleet::sentinel {
namespace {

namespace fs = std::filesystem;

// A sysfs attribute: a few bytes; "" when absent or unreadable (a port being torn down).
std::string read_attr(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return "";
  try {
    core::InputLimits limits;
    limits.max_bytes = 4096;
    std::string s = core::read_file(p.string(), limits);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  } catch (const std::exception&) {
    return "";
  }
}

std::optional<std::uint64_t> parse_counter(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<fs::path> sorted_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::uint64_t counter_delta(std::uint64_t prev, std::uint64_t cur, std::uint64_t max,
                            bool& saturated) noexcept {
  saturated = cur >= max;
  if (cur < prev) return cur;  // reset (perfquery -R) or a driver reload: counts from zero
  return cur - prev;           // at the maximum this is a lower bound (saturated says so)
}

IbMonitor::IbMonitor(const agent::NodeContext& node, IbMonitorOptions options)
    : node_(node), options_(std::move(options)) {
  if (!options_.now_ms) {
    options_.now_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
}

void IbMonitor::poll(agent::Emitter& out) {
  const std::int64_t now = options_.now_ms();
  std::size_t n = 0;
  for (const auto& dev : sorted_dirs(node_.host_path("/sys/class/infiniband"))) {
    for (const auto& port : sorted_dirs(dev / "ports")) {
      if (++n > options_.max_ports) return;
      poll_port(dev.filename().string() + "/" + port.filename().string(), port, now, out);
    }
  }
}

void IbMonitor::report(const std::string& id, Port& p, std::string_view state,
                       std::string_view reason, const std::string& message, agent::Emitter& out) {
  const std::string key = std::string(state) + "/" + std::string(reason);
  if (p.health == key) return;  // dedup: report changes only
  p.health = key;
  core::Value h = core::Value::map();
  h["check"] = kIbCheck;
  h["entity"] = id;
  h["entityKind"] = "NIC";
  h["state"] = state;
  h["reason"] = reason;
  h["message"] = message;
  out.emit(agent::kHealthKind, h);
}

void IbMonitor::poll_port(const std::string& id, const fs::path& dir, std::int64_t now,
                          agent::Emitter& out) {
  const std::string state = read_attr(dir / "state");
  const std::string phys = read_attr(dir / "phys_state");
  if (state.empty()) return;  // not a port (or gone mid-read): next poll sees it again
  const bool up = state.starts_with("4:") && (phys.empty() || phys.starts_with("5:"));
  Port& p = ports_[id];
  const bool baseline = !p.seen;

  core::Value deltas = core::Value::map();
  core::Value newly_saturated = core::Value::list();
  std::uint64_t link_downed = 0;
  for (const auto& c : kIbCounters) {
    auto v = parse_counter(read_attr(dir / "counters" / std::string(c.name)));
    if (!v) continue;
    auto prev = p.counters.find(c.name);
    if (prev != p.counters.end()) {
      bool saturated = false;
      const std::uint64_t d = counter_delta(prev->second, *v, c.max, saturated);
      if (d > 0) deltas[c.name] = d;
      if (c.name == "link_downed") link_downed = d;
      bool& was = p.saturated[std::string(c.name)];
      if (saturated && !was) newly_saturated.push_back(c.name);
      was = saturated;
    } else if (*v >= c.max) {
      p.saturated[std::string(c.name)] = true;
      newly_saturated.push_back(c.name);
    }
    p.counters[std::string(c.name)] = *v;
  }

  // Down transitions: the state change seen, or link_downed rising (a flap between polls).
  std::uint64_t downs = !baseline && p.up && !up ? 1 : 0;
  downs = std::max(downs, link_downed);
  downs = std::min<std::uint64_t>(downs, static_cast<std::uint64_t>(options_.flap_downs) + 1);
  for (std::uint64_t i = 0; i < downs; ++i) p.downs.push_back(now);
  while (!p.downs.empty() && now - p.downs.front() >= options_.flap_window_ms) p.downs.pop_front();
  while (p.downs.size() > static_cast<std::size_t>(options_.flap_downs) + 1) p.downs.pop_front();

  auto event = [&](std::string_view type) {
    core::Value e = core::Value::map();
    e["type"] = type;
    e["entity"] = id;
    e["state"] = state;
    e["physState"] = phys;
    if (deltas.size() > 0) e["deltas"] = deltas;
    if (newly_saturated.size() > 0) e["saturated"] = newly_saturated;
    e["downsInWindow"] = p.downs.size();
    out.emit(kPortEventKind, e);
  };
  if (!baseline && up != p.up) {
    event(up ? "PortUp" : "PortDown");
  } else if (!baseline && up && link_downed > 0) {
    event("PortFlap");
  } else if (!baseline && (deltas.size() > 0 || newly_saturated.size() > 0)) {
    event("Counters");
  }
  p.seen = true;
  p.up = up;

  const bool flapping = p.downs.size() >= static_cast<std::size_t>(options_.flap_downs);
  if (!up) {
    report(id, p, "Fatal", "PortDown", "port " + id + " state " + state + ", phys_state " + phys,
           out);
  } else if (flapping) {
    report(id, p, "Warning", "PortFlapping",
           "port " + id + " went down " + std::to_string(p.downs.size()) +
               " times within the flap window",
           out);
  } else {
    report(id, p, "Healthy", "PortActive", "port " + id + " " + state + ", " + phys, out);
  }
}

std::unique_ptr<agent::Monitor> make_ib_monitor(const agent::NodeContext& node) {
  return std::make_unique<IbMonitor>(node);
}

}  // namespace gpufleet::sentinel
