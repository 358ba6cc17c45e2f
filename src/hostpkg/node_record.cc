#include "hostpkg/node_record.h"

#include <exception>

#include "core/errors.h"
#include "hostpkg/strict.h"

namespace gpufleet::hostpkg {

std::string_view node_state_name(NodeState s) noexcept {
  switch (s) {
    case NodeState::Idle: return "Idle";
    case NodeState::InProgress: return "InProgress";
    case NodeState::Done: return "Done";
    case NodeState::Failed: return "Failed";
  }
  return "?";
}

core::Value record_to_value(const NodeRecord& r) {
  core::Value v = core::Value::map();
  v["format"] = NodeRecord::kFormat;
  v["set"] = r.set;
  v["generation"] = r.generation;
  core::Value inst = core::Value::map();
  for (const auto& [name, p] : r.installed) {
    core::Value pv = core::Value::map();
    pv["version"] = p.version;
    pv["image"] = p.image;
    core::Value ch = core::Value::map();
    for (const auto& [k, h] : p.config_hashes) ch[k] = h;
    pv["configHashes"] = std::move(ch);
    pv["uninstallSupported"] = p.uninstall_supported;
    pv["interrupt"] = interrupt_to_value(p.interrupt);
    if (!p.env.empty()) {
      core::Value env = core::Value::map();
      for (const auto& [k, val] : p.env) env[k] = val;
      pv["env"] = std::move(env);
    }
    if (!p.resources.empty()) pv["resources"] = pod_resources_to_value(p.resources);
    inst[name] = std::move(pv);
  }
  v["installed"] = std::move(inst);
  v["pendingInterrupt"] = interrupt_to_value(r.pending_interrupt);
  core::Value post = core::Value::list();
  for (const std::string& p : r.pending_post) post.push_back(p);
  v["pendingPost"] = std::move(post);
  v["interrupted"] = r.interrupted;
  v["state"] = std::string(node_state_name(r.state));
  v["rollout"] = r.rollout;
  v["batch"] = r.batch;
  v["epoch"] = r.epoch;
  v["bootID"] = r.boot_id;
  v["failure"] = r.failure;
  if (r.started != 0) v["started"] = r.started;
  if (!r.validation.empty()) v["validation"] = r.validation;
  if (r.verified != 0) v["verified"] = r.verified;
  if (r.drift) {
    core::Value d = core::Value::map();
    d["package"] = r.drift->package;
    d["message"] = r.drift->message;
    d["since"] = r.drift->since;
    v["drift"] = std::move(d);
  }
  if (!r.reapply.empty()) {
    core::Value l = core::Value::list();
    for (const std::string& p : r.reapply) l.push_back(p);
    v["reapply"] = std::move(l);
  }
  return v;
}

RecordRead record_from_value(const core::Value& v) noexcept {
  RecordRead out;
  try {
    const core::Map& m =
        strict_map(v, "record",
                   {"format", "set", "generation", "installed", "pendingInterrupt", "pendingPost",
                    "interrupted", "state", "rollout", "batch", "epoch", "bootID", "failure",
                    "started", "validation", "verified", "drift", "reapply"});
    std::int64_t format = optional_int(m, "record", "format", 0, 0, 1000);
    if (format != NodeRecord::kFormat) {
      throw core::InvalidInput("record.format: " + std::to_string(format) +
                               " is not a record format this version reads (expects " +
                               std::to_string(NodeRecord::kFormat) +
                               "); upgrade the controller or rewrite the record");
    }
    NodeRecord r;
    r.set = required_string(m, "record", "set");
    r.generation = optional_int(m, "record", "generation", 0, 0, INT64_MAX / 2);
    if (const core::Value* inst = m.find("installed"); inst && !inst->is_null()) {
      for (const auto& [name, pv] : strict_map(*inst, "record.installed", {})) {
        std::string f = "record.installed." + name;
        const core::Map& pm = strict_map(pv, f,
                                         {"version", "image", "configHashes", "uninstallSupported",
                                          "interrupt", "env", "resources"});
        InstalledPackage p;
        p.version = required_string(pm, f, "version");
        if (!core::is_exact_pin(p.version)) {  // 570.148.08 too, as in spec.cc
          throw core::InvalidInput(f + ".version: \"" + p.version + "\" is not a semantic version");
        }
        p.image = optional_string(pm, f, "image").value_or("");
        if (const core::Value* ch = pm.find("configHashes"); ch && !ch->is_null()) {
          for (const auto& [k, h] : strict_map(*ch, f + ".configHashes", {})) {
            if (!h.is_string())
              throw core::InvalidInput(f + ".configHashes." + k + ": expected a string");
            p.config_hashes[k] = h.as_string();
          }
        }
        p.uninstall_supported = optional_bool(pm, f, "uninstallSupported", false);
        if (const core::Value* i = pm.find("interrupt"))
          p.interrupt = parse_interrupt(*i, f + ".interrupt");
        if (const core::Value* env = pm.find("env"); env && !env->is_null()) {
          for (const auto& [k, val] : strict_map(*env, f + ".env", {})) {
            if (!val.is_string()) throw core::InvalidInput(f + ".env." + k + ": expected a string");
            p.env[k] = val.as_string();
          }
        }
        if (const core::Value* res = pm.find("resources"); res && !res->is_null())
          p.resources = parse_pod_resources(*res, f + ".resources");
        r.installed.emplace(name, std::move(p));
      }
    }
    if (const core::Value* i = m.find("pendingInterrupt")) {
      r.pending_interrupt = parse_interrupt(*i, "record.pendingInterrupt");
    }
    for (std::string& p : string_list(m.find("pendingPost"), "record.pendingPost")) {
      r.pending_post.insert(std::move(p));
    }
    r.interrupted = optional_bool(m, "record", "interrupted", false);
    std::string state = optional_string(m, "record", "state").value_or("Idle");
    if (state == "Idle")
      r.state = NodeState::Idle;
    else if (state == "InProgress")
      r.state = NodeState::InProgress;
    else if (state == "Done")
      r.state = NodeState::Done;
    else if (state == "Failed")
      r.state = NodeState::Failed;
    else
      throw core::InvalidInput("record.state: \"" + state +
                               "\" is not Idle, InProgress, Done or Failed");
    r.rollout = optional_string(m, "record", "rollout").value_or("");
    r.batch = optional_int(m, "record", "batch", -1, -1, INT64_MAX / 2);
    r.epoch = optional_int(m, "record", "epoch", 0, 0, INT64_MAX / 2);
    r.boot_id = optional_string(m, "record", "bootID").value_or("");
    r.failure = optional_string(m, "record", "failure").value_or("");
    r.started = optional_int(m, "record", "started", 0, 0, INT64_MAX / 2);
    r.validation = optional_string(m, "record", "validation").value_or("");
    r.verified = optional_int(m, "record", "verified", 0, 0, INT64_MAX / 2);
    if (const core::Value* d = m.find("drift"); d && !d->is_null()) {
      const core::Map& dm = strict_map(*d, "record.drift", {"package", "message", "since"});
      Drift drift;
      drift.package = required_string(dm, "record.drift", "package");
      drift.message = optional_string(dm, "record.drift", "message").value_or("");
      drift.since = optional_int(dm, "record.drift", "since", 0, 0, INT64_MAX / 2);
      r.drift = std::move(drift);
    }
    for (std::string& p : string_list(m.find("reapply"), "record.reapply")) {
      r.reapply.insert(std::move(p));
    }
    out.record = std::move(r);
  } catch (const std::exception& e) {
    out.record.reset();
    out.error = e.what();
  }
  return out;
}

void commit(NodeRecord& stored, NodeRecord update) {
  if (update.generation != stored.generation) {
    throw RecordConflict("node record of set " + stored.set + ": written from generation " +
                         std::to_string(update.generation) + " but the stored one is " +
                         std::to_string(stored.generation) + "; re-read the record and plan again");
  }
  update.generation = stored.generation + 1;
  stored = std::move(update);
}

}  // namespace gpufleet::hostpkg
