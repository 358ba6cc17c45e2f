#include "sim/dcgm_output.h"

#include <vector>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::sim {
namespace {

// DCGM error ids and severities (dcgm_errors.h).
constexpr int kErrVolatileDbe = 4;
constexpr int kErrNvlinkThreshold = 13;
constexpr int kErrRowRemapFailure = 80;
constexpr int kErrPendingRowRemap = 85;
constexpr int kErrXid = 101;
constexpr int kSeverityIsolate = 2;
constexpr int kSeverityTriage = 4;
constexpr int kSeverityReset = 6;

struct Issue {
  const char* status;  // "Fail" or "Warn"
  std::string text;
  int error_id = 0;  // 0: none
  int severity = 0;
};

struct TestDef {
  const char* category;  // 3.x category
  const char* name3;     // 3.x test name
  const char* name4;     // 4.x test name
  int level;             // lowest -r level that runs it
  bool per_gpu;          // false: one result for all GPUs (deployment)
};

constexpr TestDef kTests[] = {
    {"Deployment", "", "software", 1, false},  // 3.x: kDeploymentChecks3
    {"Integration", "PCIe", "pcie", 2, true},
    {"Hardware", "GPU Memory", "memory", 2, true},
    {"Hardware", "Diagnostic", "diagnostic", 3, true},
    {"Stress", "Targeted Stress", "targeted_stress", 3, true},
    {"Stress", "Targeted Power", "targeted_power", 3, true},
    {"Stress", "Memory Bandwidth", "memory_bandwidth", 3, true},
    {"Stress", "Memtest", "memtest", 4, true},
    {"Stress", "Pulse Test", "pulse_test", 4, true},
};

// The deployment checks as DCGM 3.x names them, one test each in the "Deployment" category
// with one result for all GPUs (as dcgmi/Diag.cpp lists them); 4.x folds them into one
// "software" test.
constexpr const char* kDeploymentChecks3[] = {
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS Blocks",
    "Persistence Mode",
    "Environment Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
};

// Seconds each level takes on real hosts, roughly (r3 ~ 12 min, r4 ~ 1 h+).
constexpr double kLevelSeconds[] = {0, 30, 120, 720, 3600};

std::vector<Issue> issues_for(const NodeModel& node, const GpuState& g, std::string_view test) {
  std::vector<Issue> out;
  const int links = node.pool().gpu->nvlinks_per_gpu;
  if (!g.present || g.fallen_off) {
    if (test != "software") {
      out.push_back(
          {"Fail", "Detected XID 79: GPU has fallen off the bus", kErrXid, kSeverityReset});
    }
    return out;
  }
  if (test == "memory") {
    if (g.ecc_uncorrected > 0) {
      out.push_back(
          {"Fail",
           "Detected " + std::to_string(g.ecc_uncorrected) +
               " volatile double-bit ECC error(s). Drain the GPU and reset it or reboot the node",
           kErrVolatileDbe, kSeverityReset});
    }
    if (g.remap_failure) {
      out.push_back({"Fail", "GPU had a row remap failure and should be serviced",
                     kErrRowRemapFailure, kSeverityIsolate});
    } else if (g.remap_pending) {
      out.push_back({"Warn", "GPU has a pending row remap; reset the GPU to apply it",
                     kErrPendingRowRemap, kSeverityReset});
    }
  }
  if (test == "pcie" && links > 0 && g.nvlinks_active < links) {
    out.push_back({"Fail",
                   std::to_string(links - g.nvlinks_active) + " of " + std::to_string(links) +
                       " NVLink links are down",
                   kErrNvlinkThreshold, kSeverityTriage});
  }
  if (test == "targeted_power" && g.thermal_slowdown) {
    out.push_back({"Warn", "clocks throttled: HW thermal slowdown is active", 0, 0});
  }
  // Level 4: memtest writes and reads back every page, so a part with uncorrected errors or
  // rows it could not remap returns wrong data; pulse swings power fast, which a GPU already
  // in thermal slowdown cannot follow at full clocks.
  if (test == "memtest" && (g.ecc_uncorrected > 0 || g.remap_failure)) {
    out.push_back({"Fail",
                   g.ecc_uncorrected > 0
                       ? "memtest: data read back differs from data written (" +
                             std::to_string(g.ecc_uncorrected) + " uncorrectable error(s))"
                       : std::string("memtest: data read back differs from data written in a "
                                     "row that could not be remapped"),
                   0, 0});
  }
  if (test == "pulse_test" && g.thermal_slowdown) {
    out.push_back(
        {"Warn", "pulse test: clocks throttled by HW thermal slowdown during power pulses", 0, 0});
  }
  return out;
}

core::Value warnings_value(const std::vector<Issue>& issues, int major) {
  core::List list;
  for (const Issue& i : issues) {
    if (major == 3) {
      list.emplace_back(i.text);
      continue;
    }
    core::Value w = core::Value::map();
    w["warning"] = i.text;
    if (i.error_id != 0) {
      w["error_id"] = i.error_id;
      w["error_severity"] = i.severity;
    }
    list.push_back(std::move(w));
  }
  return core::Value(std::move(list));
}

}  // namespace

int dcgm_major_from_image(std::string_view image) {
  std::size_t slash = image.rfind('/');
  std::size_t colon = image.rfind(':');
  if (colon == std::string_view::npos || (slash != std::string_view::npos && colon < slash))
    return 4;
  return image.substr(colon + 1).starts_with("3.") ? 3 : 4;
}

DcgmDiagResult run_dcgm_diag(const NodeModel& node, const DcgmDiagConfig& config) {
  if (config.level < 1 || config.level > 4) {
    throw core::InvalidInput("dcgmi diag -r " + std::to_string(config.level) +
                             " is not a level (use 1, 2, 3 or 4)");
  }
  if (config.major_version != 3 && config.major_version != 4) {
    throw core::InvalidInput("DCGM version " + std::to_string(config.major_version) +
                             " has no JSON layout here (use 3 or 4)");
  }
  const int major = config.major_version;
  const auto& gpus = node.gpus();
  core::List categories;
  auto category_for = [&](const char* name) -> core::Value& {
    for (core::Value& c : categories) {
      if (c.get_string({"category"}) == name) return c;
    }
    core::Value c = core::Value::map();
    c["category"] = name;
    c["tests"] = core::Value::list();
    categories.push_back(std::move(c));
    return categories.back();
  };
  for (const TestDef& t : kTests) {
    if (t.level > config.level) continue;
    if (!t.per_gpu && major == 3) {
      std::string ids;
      for (std::size_t g = 0; g < gpus.size(); ++g) ids += (g ? "," : "") + std::to_string(g);
      for (const char* name : kDeploymentChecks3) {
        core::Value r = core::Value::map();
        r["gpu_ids"] = ids;
        r["status"] = "Pass";
        core::Value test = core::Value::map();
        test["name"] = name;
        test["results"].push_back(std::move(r));
        category_for(t.category)["tests"].push_back(std::move(test));
      }
      continue;
    }
    core::Value test = core::Value::map();
    test["name"] = major == 3 ? t.name3 : t.name4;
    core::List results;
    bool any_fail = false, any_warn = false;
    auto add = [&](int gpu_or_all, const std::vector<Issue>& issues) {
      core::Value r = core::Value::map();
      const char* status = "Pass";
      for (const Issue& i : issues) {
        if (std::string_view(i.status) == "Fail") status = "Fail";
        if (std::string_view(i.status) == "Warn" && std::string_view(status) == "Pass")
          status = "Warn";
      }
      any_fail |= std::string_view(status) == "Fail";
      any_warn |= std::string_view(status) == "Warn";
      if (major == 3) {
        std::string ids;
        if (gpu_or_all < 0) {
          for (std::size_t g = 0; g < gpus.size(); ++g) ids += (g ? "," : "") + std::to_string(g);
        } else {
          ids = std::to_string(gpu_or_all);
        }
        r["gpu_ids"] = ids;
      } else {
        r["entity_group"] = "GPU";
        r["entity_group_id"] = 1;
        r["entity_id"] = gpu_or_all < 0 ? 0 : gpu_or_all;
      }
      r["status"] = status;
      if (!issues.empty()) r["warnings"] = warnings_value(issues, major);
      results.push_back(std::move(r));
    };
    if (!t.per_gpu) {
      add(-1, {});
    } else {
      for (std::size_t g = 0; g < gpus.size(); ++g)
        add(static_cast<int>(g), issues_for(node, gpus[g], t.name4));
    }
    test["results"] = core::Value(std::move(results));
    if (major == 4) {
      // 4.x summarises a test; a warning shows as "Fail" there, as the real tool does.
      test["test_summary"]["status"] = any_fail || any_warn ? "Fail" : "Pass";
    }
    category_for(t.category)["tests"].push_back(std::move(test));
  }
  core::Value doc = core::Value::map();
  core::Value& root = doc[major == 3 ? "DCGM GPU Diagnostic" : "DCGM Diagnostic"];
  root["test_categories"] = core::Value(std::move(categories));
  root["version"] = major == 3 ? "3.3.9" : "4.2.3";
  DcgmDiagResult r;
  r.output = core::to_json(doc, core::JsonStyle::Pretty) + "\n";
  r.seconds = kLevelSeconds[config.level];
  return r;
}

std::string compact_json_output(const std::string& output) {
  auto brace = output.find('{');
  if (brace == std::string::npos) return output;
  try {
    return output.substr(0, brace) + core::to_json(core::parse_json(output.substr(brace))) + "\n";
  } catch (const core::ParseError&) {
    return output;  // not JSON after all: leave it for the reader to reject
  }
}

}  // namespace gpufleet::sim
