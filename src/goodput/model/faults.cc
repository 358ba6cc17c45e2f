// The fault sampler: Poisson arrivals at the scenario's rates, drawn with the simulator's
// deterministic generator (no std:: distributions: their output differs between standard
// libraries, and a seed must give the same figures everywhere).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "core/xid_catalog.h"
#include "goodput/model/model.h"
#include "sim/rng.h"

namespace gpufleet::goodput::model {

std::string_view category_name(Category c) noexcept {
  switch (c) {
    case Category::Gpu: return "gpu";
    case Category::Network: return "network";
    case Category::Host: return "host";
    case Category::Software: return "software";
    case Category::LinkFlap: return "link-flap";
    case Category::Straggler: return "straggler";
  }
  return "gpu";
}

std::string_view scope_name(Scope s) noexcept {
  switch (s) {
    case Scope::None: return "none";
    case Scope::Gpu: return "gpu";
    case Scope::Node: return "node";
    case Scope::Link: return "link";
  }
  return "none";
}

Scope xid_scope(int code) {
  const core::XidInfo* x = core::XidCatalog::builtin().find(code);
  if (x == nullptr) {
    throw core::InvalidInput("Xid " + std::to_string(code) +
                             " is not in the Xid catalog (data/xid/catalog.yaml)");
  }
  switch (x->action) {
    case core::XidAction::RebootNode: return Scope::Node;
    case core::XidAction::ResetGpu:
    case core::XidAction::Decode:  // NVLink errors: decoded, usually a reset of the GPU
    case core::XidAction::FollowAction: return Scope::Gpu;
    case core::XidAction::RestartApp:  // the application's error: the GPU is fine
    case core::XidAction::Ignore: return Scope::None;
  }
  return Scope::None;
}

namespace {

// Exponential gaps at `per_second`, from 0 to `horizon`.
std::vector<std::int64_t> arrivals(sim::Rng& rng, double per_second, std::int64_t horizon) {
  std::vector<std::int64_t> out;
  if (per_second <= 0) return out;
  double t = 0;
  for (;;) {
    t += -std::log1p(-rng.unit()) / per_second;
    if (t >= static_cast<double>(horizon)) return out;
    out.push_back(static_cast<std::int64_t>(t));
  }
}

}  // namespace

std::vector<Fault> sample_faults(const Scenario& s) {
  const std::int64_t horizon = s.days * 86400;
  const double gpus = static_cast<double>(s.nodes * s.gpus_per_node);
  const double nodes = static_cast<double>(s.nodes);
  double xid_total = 0;
  for (const auto& x : s.xids) xid_total += x.weight;
  const double rest = s.network_share + s.host_share + s.software_share;
  std::vector<Fault> out;
  // One stream per kind, each from its own derived seed, so changing one rate leaves the
  // other kinds' faults where they were.
  sim::Rng irng(sim::derive_seed(s.seed, "interruptions"));
  for (std::int64_t at :
       arrivals(irng, s.interruptions_per_gpu_hour * s.rate_multiplier * gpus / 3600.0, horizon)) {
    Fault f;
    f.at = at;
    f.node = static_cast<std::int64_t>(irng.below(static_cast<std::uint64_t>(s.nodes)));
    f.gpu = static_cast<std::int64_t>(irng.below(static_cast<std::uint64_t>(s.gpus_per_node)));
    const double u = irng.unit();
    const double h = irng.unit();
    if (u < s.gpu_fraction && xid_total > 0) {
      f.category = Category::Gpu;
      double pick = irng.unit() * xid_total;
      f.xid = s.xids.back().code;
      for (const auto& x : s.xids) {
        if (pick < x.weight) {
          f.xid = x.code;
          break;
        }
        pick -= x.weight;
      }
      f.scope = xid_scope(f.xid);
      f.hardware = f.scope != Scope::None && h < s.hardware_fraction;
    } else {
      const double v = (u - s.gpu_fraction) / (1 - s.gpu_fraction) * rest;
      if (v < s.network_share) {
        f.category = Category::Network;
        f.scope = Scope::Link;
      } else if (v < s.network_share + s.host_share) {
        f.category = Category::Host;
        f.scope = Scope::Node;
        f.hardware = h < s.hardware_fraction;
      } else {
        f.category = Category::Software;
        f.scope = Scope::None;
      }
    }
    out.push_back(f);
  }
  sim::Rng frng(sim::derive_seed(s.seed, "link-flaps"));
  for (std::int64_t at : arrivals(frng, s.link_flaps_per_node_day * nodes / 86400.0, horizon)) {
    Fault f;
    f.at = at;
    f.category = Category::LinkFlap;
    f.scope = Scope::Link;
    f.node = static_cast<std::int64_t>(frng.below(static_cast<std::uint64_t>(s.nodes)));
    f.crashes_job = frng.unit() < s.link_flap_crash_fraction;
    out.push_back(f);
  }
  sim::Rng srng(sim::derive_seed(s.seed, "stragglers"));
  for (std::int64_t at : arrivals(srng, s.stragglers_per_node_day * nodes / 86400.0, horizon)) {
    Fault f;
    f.at = at;
    f.category = Category::Straggler;
    f.scope = Scope::Node;
    f.node = static_cast<std::int64_t>(srng.below(static_cast<std::uint64_t>(s.nodes)));
    f.crashes_job = false;
    out.push_back(f);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Fault& a, const Fault& b) { return a.at < b.at; });
  for (std::size_t i = 0; i < out.size(); ++i) out[i].id = static_cast<std::int64_t>(i);
  return out;
}

}  // namespace gpufleet::goodput::model
