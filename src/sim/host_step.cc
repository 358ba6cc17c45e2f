#include "sim/host_step.h"

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/json.h"
#include "core/text.h"

#include <algorithm>

namespace gpufleet::sim {
namespace {

using core::FieldReader;

std::vector<std::string> string_list(FieldReader& r, std::string_view key) {
  std::vector<std::string> out;
  const core::Value* v = r.get(key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_list())
    core::fail_field(r.source(), r.field(key), "is not a list", "list strings, e.g. [iommu=pt]");
  for (const auto& x : v->as_list()) {
    if (!x.is_string())
      core::fail_field(r.source(), r.field(key), "holds a value that is not a string",
                       "quote every item");
    out.push_back(x.as_string());
  }
  return out;
}

HostEffect parse_effect(const core::Value& v, const std::string& source, const std::string& path) {
  FieldReader r(v, source, path);
  HostEffect e;
  for (const auto& [k, val] : r.string_map("sysctls")) e.sysctls[k] = val.as_string();
  if (const core::Value* f = r.get("files")) {
    if (!f->is_map())
      core::fail_field(source, r.field("files"), "is not a map",
                       "map file paths to contents (null removes the file)");
    for (const auto& [k, val] : f->as_map()) {
      if (val.is_null()) {
        e.files[k] = std::nullopt;
      } else if (val.is_string()) {
        e.files[k] = val.as_string();
      } else {
        core::fail_field(source, r.field("files") + "." + k, "is not a string or null",
                         "give the file's content, or null to remove it");
      }
    }
  }
  if (const core::Value* ka = r.get("kernelArgs")) {
    FieldReader k(*ka, source, r.field("kernelArgs"));
    e.kernel_args_add = string_list(k, "add");
    e.kernel_args_remove = string_list(k, "remove");
    k.done();
  }
  if (const core::Value* p = r.get("package")) {
    FieldReader pr(*p, source, r.field("package"));
    e.package = pr.required_string("name", "name the package, e.g. nvidia-fabricmanager");
    e.package_reboot = pr.boolean("reboot", false);
    pr.done();
  }
  e.driver = r.string("driver", "");
  r.done();
  return e;
}

std::string replace_version(std::string s, const std::string& version) {
  const std::string tag = "{version}";
  for (auto pos = s.find(tag); pos != std::string::npos; pos = s.find(tag, pos + version.size()))
    s.replace(pos, tag.size(), version);
  return s;
}

bool history_has(const HostModel& host, const std::string& key, const std::string& status,
                 int* count) {
  auto text = host.read(kHostStepHistory);
  bool found = false;
  if (!text) return false;
  std::size_t start = 0;
  while (start < text->size()) {
    auto nl = text->find('\n', start);
    std::string line =
        text->substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    auto sp = line.rfind(' ');
    if (sp != std::string::npos && line.substr(0, sp) == key) {
      if (line.substr(sp + 1) == status) found = true;
      if (count != nullptr) ++*count;
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return found;
}

void append(HostModel& host, const std::string& path, const std::string& line) {
  std::string text = host.read(path).value_or("");
  host.write_file(path, text + line + "\n");
}

}  // namespace

HostStepBehaviour parse_host_step(const core::Value& v, const std::string& source,
                                  const std::string& path) {
  FieldReader r(v, source, path);
  HostStepBehaviour b;
  static const std::vector<std::string> kStages = {"apply",  "upgrade",   "uninstall",
                                                   "config", "interrupt", "post-interrupt"};
  if (const core::Value* eff = r.get("effects")) {
    if (!eff->is_map())
      core::fail_field(source, r.field("effects"), "is not a map", "map stage names to effects");
    for (const auto& [stage, ev] : eff->as_map()) {
      if (std::find(kStages.begin(), kStages.end(), stage) == kStages.end()) {
        core::fail_field(source, r.field("effects") + "." + stage, "is not a stage",
                         "use apply, upgrade, uninstall, config or post-interrupt");
      }
      b.effects[stage] = parse_effect(ev, source, r.field("effects") + "." + stage);
    }
  }
  if (const core::Value* fl = r.get("failures")) {
    if (!fl->is_list())
      core::fail_field(source, r.field("failures"), "is not a list",
                       "list failure modes, e.g. [{stage: apply, status: failed}]");
    for (std::size_t i = 0; i < fl->size(); ++i) {
      FieldReader f((*fl)[i], source, r.field("failures") + "[" + std::to_string(i) + "]");
      HostStepFailure hf;
      hf.stage =
          f.one_of("stage", "",
                   {"", "apply", "upgrade", "uninstall", "config", "interrupt", "post-interrupt"});
      hf.nodes = f.string("nodes", "");
      hf.status = f.one_of("status", "failed", {"failed", "check-failed", "timed-out"});
      hf.times = static_cast<int>(f.integer("times", 0, 0, 1000, "0 (always) .. 1000"));
      hf.message = f.string("message", "");
      hf.exit_code =
          static_cast<int>(f.integer("exitCode", 1, 1, 255, "the script's exit code, 1 to 255"));
      f.done();
      b.failures.push_back(std::move(hf));
    }
  }
  if (const core::Value* d = r.get("rebootDown")) {
    b.reboot_down_s = core::seconds_from(*d, source, r.field("rebootDown"));
  }
  r.done();
  return b;
}

std::optional<HostStepRequest> host_step_request(const core::Value& pod) {
  const core::Value* labels = pod.get({"metadata", "labels"});
  if (labels == nullptr || !labels->is_map()) return std::nullopt;
  const core::Value* stage = labels->find("hostpkg.gpufleet.io/stage");
  if (stage == nullptr || !stage->is_string()) return std::nullopt;
  HostStepRequest r;
  r.stage = stage->as_string();
  r.node = std::string(pod.get_string({"spec", "nodeName"}));
  if (const core::Value* p = labels->find("hostpkg.gpufleet.io/package"); p && p->is_string())
    r.package = p->as_string();
  auto ann = [&](std::string_view k) {
    const core::Value* a = pod.get({"metadata", "annotations"});
    if (a == nullptr || !a->is_map()) return std::string();
    const core::Value* v = a->find(k);
    return v != nullptr && v->is_string() ? v->as_string() : std::string();
  };
  r.key = ann("hostpkg.gpufleet.io/key");
  if (std::string v = ann("hostpkg.gpufleet.io/verify"); !v.empty()) {
    for (std::size_t pos = 0; pos <= v.size();) {
      auto comma = v.find(',', pos);
      if (comma == std::string::npos) comma = v.size();
      if (comma > pos) r.verify.push_back(v.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  r.version = ann("hostpkg.gpufleet.io/version");
  if (std::string i = ann("hostpkg.gpufleet.io/interrupt"); !i.empty()) {
    try {
      core::Value iv = core::parse_json(i, "interrupt annotation");
      r.interrupt = std::string(iv.get_string({"type"}));
      if (const core::Value* s = iv.find("services"); s && s->is_list()) {
        for (const auto& x : s->as_list())
          if (x.is_string()) r.services.push_back(x.as_string());
      }
    } catch (const std::exception&) {
      r.interrupt = "invalid";
    }
  }
  return r;
}

HostStepOutcome run_host_step(const HostStepRequest& req, const HostStepBehaviour* behaviour,
                              HostModel& host) {
  HostStepOutcome out;
  std::string status = "succeeded";
  std::string message;
  int script_exit = 1;  // a failure's exit code, reported in the result
  int attempts = 0;
  history_has(host, req.key, "", &attempts);
  // Failure modes count earlier runs of the same package, stage and version, whatever the
  // change id: a retry after a reset is a new key but the same work.
  int tries = 0;
  if (auto text = host.read(kHostStepHistory)) {
    std::string prefix = req.package + "/" + req.stage + "/" + req.version + "/";
    for (std::size_t pos = 0; (pos = text->find(prefix, pos)) != std::string::npos; ++pos)
      if (pos == 0 || (*text)[pos - 1] == '\n') ++tries;
  }
  const bool interrupt = req.stage == "interrupt";
  if (req.stage == "verify") {
    // Checks only: declared failures for "verify", then each stage's effects against the host.
    if (behaviour != nullptr) {
      for (const HostStepFailure& f : behaviour->failures) {
        if (f.stage != "verify") continue;
        if (!f.nodes.empty() && !core::glob_match(f.nodes, req.node)) continue;
        if (f.times > 0 && tries >= f.times) continue;
        status = f.status == "failed" ? "check-failed" : f.status;
        message = f.message.empty() ? "verification of " + req.package + " " + req.version + " " +
                                          status + " (simulated)"
                                    : f.message;
        break;
      }
    }
    for (const std::string& st : req.verify) {
      if (status != "succeeded" || behaviour == nullptr) break;
      auto it = behaviour->effects.find(st);
      if (it == behaviour->effects.end()) continue;
      const HostEffect& e = it->second;
      for (const auto& [k, v] : e.sysctls) {
        std::string want = replace_version(v, req.version);
        auto have = host.sysctls().find(k);
        std::string got = have == host.sysctls().end() ? "unset" : have->second;
        if (got != want) {
          status = "check-failed";
          message = "the " + st + " check of " + req.package + " " + req.version + " failed: " + k +
                    " is " + got + ", want " + want;
          break;
        }
      }
      for (const auto& [path, content] : e.files) {
        if (status != "succeeded") break;
        auto have = host.read(path);
        std::optional<std::string> want;
        if (content) want = replace_version(*content, req.version);
        if (have != want) {
          status = "check-failed";
          message = "the " + st + " check of " + req.package + " " + req.version +
                    " failed: " + path +
                    (want ? (have ? " differs from what the package wrote" : " is missing")
                          : " should not exist");
        }
      }
      // The running driver, not the staged one: a driver is only in use after the reboot.
      if (status == "succeeded" && !e.driver.empty()) {
        std::string want = replace_version(e.driver, req.version);
        if (host.driver_version() != want) {
          status = "check-failed";
          message = "the " + st + " check of " + req.package + " " + req.version +
                    " failed: the GPU driver in use is " + host.driver_version() + ", want " + want;
        }
      }
    }
    if (message.empty()) message = "verification of " + req.package + " " + req.version + " passed";
  } else if (history_has(host, req.key, "succeeded", nullptr)) {
    status = "skipped";
    message = req.stage + " of " + req.package + " " + req.version + " already done (skipped)";
  } else {
    if (behaviour != nullptr) {
      for (const HostStepFailure& f : behaviour->failures) {
        if (!f.stage.empty() && f.stage != req.stage) continue;
        if (!f.nodes.empty() && !core::glob_match(f.nodes, req.node)) continue;
        if (f.times > 0 && tries >= f.times) continue;
        status = f.status;
        script_exit = f.exit_code;
        message = f.message.empty()
                      ? req.stage + " of " + req.package + " " + req.version + " " + f.status +
                            ": exit code " + std::to_string(f.exit_code) + " (simulated)"
                      : f.message;
        break;
      }
    }
    if (status == "succeeded") {
      if (interrupt) {
        if (req.interrupt == "reboot") {
          out.reboot = true;
        } else if (req.interrupt == "restartServices") {
          append(host, kHostStepRestarts, "restartServices " + core::join(req.services, ","));
        } else if (req.interrupt == "restartAllServices") {
          append(host, kHostStepRestarts, "restartAllServices");
        } else if (req.interrupt != "none") {
          status = "failed";
          message = "interrupt \"" + req.interrupt + "\" is not an interrupt";
        }
      } else if (behaviour != nullptr) {
        if (auto it = behaviour->effects.find(req.stage); it != behaviour->effects.end()) {
          const HostEffect& e = it->second;
          for (const auto& [k, v] : e.sysctls)
            host.set_sysctl(k, replace_version(v, req.version), true);
          for (const auto& [path, content] : e.files) {
            if (content)
              host.write_file(path, replace_version(*content, req.version));
            else
              host.remove_file(path);
          }
          if (!e.kernel_args_add.empty() || !e.kernel_args_remove.empty())
            host.change_kernel_args(e.kernel_args_add, e.kernel_args_remove);
          if (!e.package.empty()) host.install_package(e.package, req.version, e.package_reboot);
          if (!e.driver.empty()) host.set_driver(replace_version(e.driver, req.version));
        }
      }
      if (message.empty())
        message = req.stage + " of " + req.package + " " + req.version + " " + status;
    }
  }
  append(host, kHostStepHistory, req.key + " " + status);
  out.exit_code = status == "succeeded" || status == "skipped" ? 0 : 1;
  core::Value r = core::Value::map();
  r["package"] = req.package;
  r["version"] = req.version;
  r["stage"] = req.stage;
  r["key"] = req.key;
  r["status"] = status;
  r["exitCode"] = out.exit_code == 0 ? 0 : script_exit;
  r["attempt"] = attempts + 1;
  r["seconds"] = 0.0;
  r["message"] = message;
  r["output"] = "";
  r["checkOutput"] = "";
  out.result_json = core::to_json(r);
  return out;
}

}  // namespace gpufleet::sim
