#include "recipe/performance.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/errors.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/time.h"
#include "recipe/schema_check.h"

namespace gpufleet::recipe {

using core::InvalidInput;
using core::Value;
using detail::check_keys;
using detail::expect_map;
using detail::field_path;

namespace {

double positive_number(const Value& v, const std::string& where) {
  if (!v.is_number() || !(v.as_double() > 0) || !std::isfinite(v.as_double())) {
    throw InvalidInput(
        where + ": " + core::to_json(v) +
        " is not a bandwidth; give a positive number of GB/s (10^9 bytes), e.g. 400");
  }
  return v.as_double();
}

// "400.0", "312.5": CEL compares a double with a double literal.
std::string cel_double(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", d);
  if (std::fabs(std::stod(buf) - d) > 1e-9) std::snprintf(buf, sizeof buf, "%.6g", d);
  return buf;
}

std::string gbps(double d) {
  std::string s = cel_double(d);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

std::string describe(const BandwidthFloor& f) {
  std::string s;
  if (f.node_gbps) s = ">= " + gbps(*f.node_gbps) + " GB/s on one node";
  if (f.fabric_gbps) {
    s += (s.empty() ? "" : ", ") + std::string(">= ") + gbps(*f.fabric_gbps) + " GB/s across nodes";
  }
  return s;
}

std::string dns_part(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) {
    out += (std::isalnum(static_cast<unsigned char>(c)) != 0)
               ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
               : '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

const Value* find_by_node(const Value* list, std::string_view node) {
  if (list == nullptr || !list->is_list()) return nullptr;
  for (const Value& e : list->as_list()) {
    if (e.get_string({"node"}) == node) return &e;
  }
  return nullptr;
}

std::int64_t int_or_zero(const Value& obj, std::initializer_list<std::string_view> path) {
  const Value* v = obj.get(path);
  return v != nullptr && v->is_number() ? static_cast<std::int64_t>(v->as_double()) : 0;
}

}  // namespace

std::vector<BandwidthFloor> performance_from_value(const Value& v, std::string_view where) {
  std::vector<BandwidthFloor> out;
  for (const auto& e : expect_map(v, where)) {
    std::string w = field_path(where, e.key);
    if (std::find(std::begin(kBandwidthCategories), std::end(kBandwidthCategories), e.key) ==
        std::end(kBandwidthCategories)) {
      throw InvalidInput(w + ": '" + e.key + "' is not an NCCL category of certify; use one of " +
                         core::join(kBandwidthCategories));
    }
    const core::Map& m = expect_map(e.value, w);
    check_keys(m, {"busBandwidthGBps"}, w);
    const Value* bw = m.find("busBandwidthGBps");
    if (bw == nullptr) {
      throw InvalidInput(w +
                         ": needs busBandwidthGBps: {node: GBPS, fabric: GBPS} (one node; "
                         "groups across nodes)");
    }
    std::string bw_where = field_path(w, "busBandwidthGBps");
    const core::Map& b = expect_map(*bw, bw_where);
    check_keys(b, {"node", "fabric"}, bw_where);
    BandwidthFloor f;
    f.category = e.key;
    if (const Value* n = b.find("node")) f.node_gbps = positive_number(*n, bw_where + ".node");
    if (const Value* n = b.find("fabric"))
      f.fabric_gbps = positive_number(*n, bw_where + ".fabric");
    if (!f.node_gbps && !f.fabric_gbps) {
      throw InvalidInput(bw_where +
                         ": empty; give node (one node, its NVLink) and/or fabric "
                         "(groups across nodes), in GB/s");
    }
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const BandwidthFloor& a, const BandwidthFloor& b) {
    return a.category < b.category;
  });
  return out;
}

Value performance_to_value(const std::vector<BandwidthFloor>& floors) {
  Value out = Value::map();
  for (const BandwidthFloor& f : floors) {
    Value bw = Value::map();
    if (f.node_gbps) bw["node"] = *f.node_gbps;
    if (f.fabric_gbps) bw["fabric"] = *f.fabric_gbps;
    out[f.category]["busBandwidthGBps"] = std::move(bw);
  }
  return out;
}

std::string bandwidth_threshold(const BandwidthFloor& f) {
  if (f.node_gbps && f.fabric_gbps) {
    return "value >= (groupSize > 1 ? " + cel_double(*f.fabric_gbps) + " : " +
           cel_double(*f.node_gbps) + ")";
  }
  if (f.node_gbps) return "groupSize > 1 || value >= " + cel_double(*f.node_gbps);
  return "groupSize == 1 || value >= " + cel_double(*f.fabric_gbps);
}

std::string certification_name(const Recipe& recipe, const NodePool& pool) {
  std::string pool_part = dns_part(pool.name, 30);
  return "validate-" + (pool_part.empty() ? std::string("pool") : pool_part) + "-" +
         core::sha256_hex(recipe.name + "/" + pool.name).substr(0, 8);
}

Value pool_certification(const Recipe& recipe, const NodePool& pool,
                         const std::vector<std::string>& nodes, const PerformanceOptions& options) {
  Value c = Value::map();
  c["apiVersion"] = "gpufleet.io/v1alpha1";
  c["kind"] = "Certification";
  Value& meta = c["metadata"];
  meta["name"] = certification_name(recipe, pool);
  meta["namespace"] = options.namespace_;
  meta["labels"]["app.kubernetes.io/managed-by"] = "gpufleet-validate";
  meta["labels"]["gpufleet.io/node-pool"] = dns_part(pool.name, 63);
  meta["annotations"]["gpufleet.io/recipe"] = recipe.name;
  if (!recipe.digest.empty()) meta["annotations"]["gpufleet.io/recipe-digest"] = recipe.digest;
  Value& spec = c["spec"];
  std::vector<std::string> sorted = nodes;
  std::sort(sorted.begin(), sorted.end());
  Value names = Value::list();
  for (const std::string& n : sorted) names.push_back(n);
  spec["targets"]["nodeNames"] = std::move(names);
  // GPU nodes are commonly tainted nvidia.com/gpu; an untolerated taint would exclude them.
  Value tol = Value::map();
  tol["key"] = "nvidia.com/gpu";
  tol["operator"] = "Exists";
  spec["targets"]["tolerations"].push_back(std::move(tol));
  Value cats = Value::list();
  for (const BandwidthFloor& f : pool.performance) {
    Value cat = Value::map();
    cat["name"] = "communication/" + f.category;
    cat["scale"] = "diagnose";
    cat["thresholds"]["busBandwidthGBps"] = bandwidth_threshold(f);
    cats.push_back(std::move(cat));
  }
  spec["categories"] = std::move(cats);
  return c;
}

void report_certification(ValidationReport& out, const NodePool& pool,
                          const std::vector<std::string>& nodes, const Value& cert, bool finished,
                          std::string_view waited) {
  std::string ref = std::string(cert.get_string({"metadata", "namespace"})) + "/" +
                    std::string(cert.get_string({"metadata", "name"}));
  std::string phase(cert.get_string({"status", "phase"}));
  std::string expected;
  for (const BandwidthFloor& f : pool.performance)
    expected += (expected.empty() ? "" : "; ") + f.category + " " + describe(f);
  std::string subject_pool = "pool " + pool.name;

  // The run itself: its phase and counts, or why it did not finish.
  std::string summary;
  if (!finished) {
    std::string cat(cert.get_string({"status", "currentCategory"}));
    summary = "not finished within " + std::string(waited) + " (phase " +
              (phase.empty() ? std::string("none: is the certify controller running? "
                                           "gpufleet controller --controllers=certify")
                             : phase) +
              (cat.empty() ? "" : ", category " + cat) +
              "); it keeps running: run validate again to wait for it, or gpufleet certify "
              "report " +
              std::string(cert.get_string({"metadata", "name"})) + " -n " +
              std::string(cert.get_string({"metadata", "namespace"}));
  } else {
    summary = phase + ": " + std::to_string(int_or_zero(cert, {"status", "passedCount"})) +
              " passed, " + std::to_string(int_or_zero(cert, {"status", "failedCount"})) +
              " failed, " + std::to_string(int_or_zero(cert, {"status", "excludedCount"})) +
              " excluded of " + std::to_string(int_or_zero(cert, {"status", "nodeCount"}));
    std::string msg(cert.get_string({"status", "message"}));
    if (!msg.empty()) summary += " (" + msg + ")";
  }
  out.results.push_back({"performance", "Certification " + ref, subject_pool, "Passed", summary,
                         finished && phase == "Passed", "error", ""});

  const Value* failed = cert.get({"status", "failedNodes"});
  const Value* excluded = cert.get({"status", "excluded"});
  // status lists the first 100 failed nodes; beyond that an unlisted node is not known good.
  std::size_t listed = failed != nullptr && failed->is_list() ? failed->as_list().size() : 0;
  bool all_listed =
      static_cast<std::size_t>(int_or_zero(cert, {"status", "failedCount"})) <= listed;
  bool rejected = false;
  if (const Value* conds = cert.get({"status", "conditions"}); conds && conds->is_list()) {
    for (const Value& c : conds->as_list()) {
      if (c.get_string({"type"}) == "Accepted" && c.get_string({"status"}) == "False")
        rejected = true;
    }
  }
  for (const std::string& node : nodes) {
    std::string subject = node + " (" + subject_pool + ")";
    std::string actual;
    bool passed = false;
    if (const Value* f = find_by_node(failed, node)) {
      actual = std::string(f->get_string({"reason"})) + " in " +
               std::string(f->get_string({"category"})) + ": " +
               std::string(f->get_string({"message"}));
    } else if (const Value* x = find_by_node(excluded, node)) {
      actual = "not tested: " + std::string(x->get_string({"reason"})) +
               (x->get_string({"message"}).empty()
                    ? ""
                    : " (" + std::string(x->get_string({"message"})) + ")");
    } else if (!finished) {
      actual = "not measured yet: Certification " + ref + " " +
               (phase.empty() ? std::string("has no status") : "is " + phase);
    } else if (rejected) {
      actual = "not tested: Certification " + ref + " was not accepted (" +
               std::string(cert.get_string({"status", "message"})) + ")";
    } else if (!all_listed) {
      actual = "unknown: more nodes failed than status lists; see gpufleet certify report " +
               std::string(cert.get_string({"metadata", "name"})) + " -n " +
               std::string(cert.get_string({"metadata", "namespace"}));
    } else {
      actual = "passed";
      passed = true;
    }
    out.results.push_back(
        {"performance", "NCCL bus bandwidth", subject, expected, actual, passed, "error", ""});
  }
}

}  // namespace gpufleet::recipe
