#include "kube/api/disruption_claims.h"

#include <charconv>
#include <climits>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/json.h"
#include "core/text.h"
#include "core/value.h"

namespace gpufleet::kube {
namespace {

using core::InvalidInput;

std::optional<std::int64_t> as_number(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

const std::string kWhere = std::string("annotation ") + std::string(kDisruptionClaimsAnnotation);
const std::string kFix =
    "; the controllers write it: delete the annotation (claims are re-made on the next look)";

}  // namespace

std::vector<DisruptionClaim> parse_disruption_claims(std::string_view text) {
  std::vector<DisruptionClaim> out;
  if (text.empty()) return out;
  core::Value v;
  try {
    v = core::parse_json(text, kWhere);
  } catch (const std::exception& e) {
    throw InvalidInput(kWhere + ": is not JSON (" + e.what() + ")" + kFix);
  }
  if (!v.is_list())
    throw InvalidInput(kWhere + ": " + core::describe_value(v) + " is not a list" + kFix);
  std::size_t i = 0;
  for (const core::Value& e : v.as_list()) {
    const std::string index = "[" + std::to_string(i++) + "]";
    const std::string at = kWhere + index;
    if (!e.is_map())
      throw InvalidInput(at + ": " + core::describe_value(e) + " is not an object" + kFix);
    core::check_keys(e.as_map(), {"node", "domain", "holder", "since", "rv"}, kWhere, index);
    DisruptionClaim c;
    auto str = [&](std::string_view key, bool required) {
      const core::Value* f = e.find(key);
      if (f == nullptr && !required) return std::string();
      if (f == nullptr || !f->is_string() || (required && f->as_string().empty())) {
        throw InvalidInput(at + "." + std::string(key) + ": " +
                           (f == nullptr ? std::string("missing") : core::describe_value(*f)) +
                           " is not a non-empty string" + kFix);
      }
      return f->as_string();
    };
    c.node = str("node", true);
    c.holder = str("holder", true);
    c.domain = str("domain", false);
    c.rv = str("rv", false);
    const core::Value* s = e.find("since");
    if (s == nullptr || !s->is_int() || s->as_int() < 0) {
      throw InvalidInput(
          at + ".since: " + (s == nullptr ? std::string("missing") : core::describe_value(*s)) +
          " is not unix seconds" + kFix);
    }
    c.since = s->as_int();
    out.push_back(std::move(c));
  }
  return out;
}

std::string disruption_claims_text(const std::vector<DisruptionClaim>& claims) {
  core::Value list = core::Value::list();
  for (const auto& c : claims) {
    core::Value e = core::Value::map();
    e["node"] = c.node;
    e["domain"] = c.domain;
    e["holder"] = c.holder;
    e["since"] = c.since;
    e["rv"] = c.rv;
    list.push_back(std::move(e));
  }
  return core::to_json(list);
}

bool claim_alive(const DisruptionClaim& c, const ClaimedNodeView& view, std::int64_t now,
                 std::int64_t grace_seconds) {
  if (view.present && view.out) return true;
  if (view.present) {
    auto cached = as_number(view.rv), claimed = as_number(c.rv);
    if (cached && claimed && *cached > *claimed) return false;
  }
  // A clock behind `since` (another replica's) keeps the claim: the safe side.
  return now - c.since < grace_seconds;
}

ClaimDecision decide_claims(const std::vector<DisruptionClaim>& current,
                            const std::vector<ClaimRequest>& requests,
                            const std::vector<CountedNode>& counted, const ClaimLimits& limits,
                            const ClaimedNodeLookup& lookup, std::int64_t now,
                            std::int64_t grace_seconds) {
  ClaimDecision d;
  std::set<std::string, std::less<>> total;
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> domains;
  for (const auto& n : counted) {
    total.insert(n.name);
    domains[n.domain].insert(n.name);
  }
  for (const auto& c : current) {
    if (!claim_alive(c, lookup(c.node), now, grace_seconds)) {
      d.changed = true;
      continue;
    }
    total.insert(c.node);
    domains[c.domain].insert(c.node);
    d.claims.push_back(c);
  }
  for (const auto& r : requests) {
    bool mine = false;
    for (auto& c : d.claims) {
      if (c.node != r.node || c.holder != r.holder) continue;
      mine = true;
      // The claimer decides again on a newer Node: the claim must carry that version, or
      // readers would take the Node's move for the end of the action.
      if (c.rv != r.rv) {
        c.rv = r.rv;
        c.since = now;
        d.changed = true;
      }
    }
    if (mine) {
      d.granted.push_back(true);
      d.why.emplace_back();
      continue;
    }
    auto& dom = domains[r.domain];
    const auto others_total = static_cast<std::int64_t>(total.size() - total.count(r.node));
    const auto others_domain = static_cast<std::int64_t>(dom.size() - dom.count(r.node));
    std::string why;
    if (others_total >= limits.total) {
      why = std::to_string(others_total) + " node(s) out or claimed in the cluster without " +
            r.node + ", maxUnavailable " + std::to_string(limits.total);
    } else if (others_domain >= limits.domain) {
      why = "domain " + core::quoted(r.domain) + " has " + std::to_string(others_domain) +
            " node(s) out or claimed without " + r.node + ", maxUnavailablePerDomain " +
            std::to_string(limits.domain);
    } else if (d.claims.size() >= kMaxDisruptionClaims) {
      why = std::to_string(d.claims.size()) + " live claims, the most the object holds";
    }
    if (!why.empty()) {
      d.granted.push_back(false);
      d.why.push_back(std::move(why));
      continue;
    }
    total.insert(r.node);
    dom.insert(r.node);
    d.claims.push_back(DisruptionClaim{r.node, r.domain, r.holder, now, r.rv});
    d.changed = true;
    d.granted.push_back(true);
    d.why.emplace_back();
  }
  return d;
}

}  // namespace gpufleet::kube
