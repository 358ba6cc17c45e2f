#include "hostpkg/controller/stage_pod.h"
#include "core/text.h"

#include "core/json.h"
#include "hostpkg/reverify.h"
#include "kube/api/objects.h"

namespace gpufleet::hostpkg {
namespace {

std::string seconds(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

core::Value string_list(std::initializer_list<std::string> items) {
  core::Value l = core::Value::list();
  for (const auto& s : items) l.push_back(s);
  return l;
}

}  // namespace

std::string label_safe(const std::string& name) {
  if (name.size() <= 63) return name;
  std::string prefix = name.substr(0, 63 - 17);
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) prefix.pop_back();
  return prefix + "-" + short_hash(name);
}

std::string stage_pod_name(std::string_view set, std::string_view node, const PlannedStep& step) {
  std::string id(set);
  id += '\n';
  id += node;
  id += '\n';
  id += step.key();
  return "hp-" + short_hash(id);
}

std::string config_map_name(std::string_view set, std::string_view package,
                            std::string_view config_hash) {
  return "hp-" + short_hash(std::string(set) + "\n" + std::string(package)) + "-" +
         std::string(config_hash.substr(0, 16));
}

core::Value config_map(const HostPackageSet& set, const Package& package,
                       const std::string& config_hash, const std::string& namespace_) {
  core::Value cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"]["name"] = config_map_name(set.name, package.name, config_hash);
  cm["metadata"]["namespace"] = namespace_;
  cm["metadata"]["labels"][std::string(kSetLabel)] = set.name;
  cm["metadata"]["labels"][std::string(kPackageLabel)] = package.name;
  core::Value data = core::Value::map();
  for (const auto& [k, v] : package.config_map) data[k] = v;
  cm["data"] = std::move(data);
  return cm;
}

core::Value stage_pod(const HostPackageSet& set, const std::string& node, const PlannedStep& step,
                      const StagePodOptions& options) {
  const bool interrupt = step.stage == Stage::Interrupt;
  const Package* pkg = interrupt ? nullptr : set.find(step.package);  // null: left the set
  const std::string package = interrupt ? set.name : step.package;
  const std::string stage(stage_name(step.stage));

  core::Value pod;
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  core::Value& meta = pod["metadata"];
  meta["name"] = stage_pod_name(set.name, node, step);
  meta["namespace"] = options.namespace_;
  meta["labels"]["app.kubernetes.io/managed-by"] = "gpufleet-hostpkg";
  meta["labels"][std::string(kSetLabel)] = set.name;
  meta["labels"][std::string(kStageLabel)] = stage;
  if (!interrupt) meta["labels"][std::string(kPackageLabel)] = step.package;
  meta["annotations"][std::string(kNodeAnnotation)] = node;
  meta["annotations"][std::string(kKeyAnnotation)] = step.key();
  meta["annotations"][std::string(kVersionAnnotation)] = step.version;
  if (interrupt) {
    meta["annotations"][std::string(kInterruptAnnotation)] =
        core::to_json(interrupt_to_value(step.interrupt));
  }
  if (!step.changed_keys.empty()) {
    meta["annotations"][std::string(kChangedKeysAnnotation)] = core::join(step.changed_keys, ",");
  }

  core::Value& spec = pod["spec"];
  spec["nodeName"] = node;
  spec["restartPolicy"] = "Never";
  // The interrupt reaches systemd through the host's namespaces (nsenter -t 1).
  spec["hostPID"] = interrupt;
  spec["priorityClassName"] = "system-node-critical";
  // Past the stage timeout the runner has already killed the step; this is the backstop.
  spec["activeDeadlineSeconds"] = static_cast<std::int64_t>(step.timeout.count() + 120);
  // Stage pods must run on a cordoned, tainted, not-yet-ready-for-work node.
  core::Value tolerations = core::Value::list();
  core::Value all;
  all["operator"] = "Exists";
  tolerations.push_back(all);
  for (const auto& t : set.additional_tolerations.as_list()) tolerations.push_back(t);
  spec["tolerations"] = std::move(tolerations);

  core::Value volumes = core::Value::list();
  core::Value host;
  host["name"] = "host";
  host["hostPath"]["path"] = "/";
  host["hostPath"]["type"] = "Directory";
  volumes.push_back(host);
  core::Value work;
  work["name"] = "pkg";
  work["emptyDir"] = core::Value::map();
  volumes.push_back(work);

  core::Value args = string_list({"pkg-step", "--package", package, "--version", step.version,
                                  "--stage", stage, "--result", "/dev/termination-log", "--timeout",
                                  seconds(step.timeout), "--change", step.change()});
  if (!step.from_version.empty()) {
    args.push_back("--from-version");
    args.push_back(step.from_version);
  }
  if (!step.config_hash.empty()) {
    args.push_back("--config-hash");
    args.push_back(step.config_hash);
  }
  if (!step.changed_keys.empty()) {
    args.push_back("--changed-keys");
    args.push_back(core::join(step.changed_keys, ","));
  }
  core::Value mounts = core::Value::list();
  core::Value hm;
  hm["name"] = "host";
  hm["mountPath"] = "/host";
  mounts.push_back(hm);
  if (interrupt) {
    args.push_back("--host-pid");
    args.push_back("1");
    args.push_back("--interrupt");
    args.push_back(std::string(interrupt_name(step.interrupt.kind)));
    if (!step.interrupt.services.empty()) {
      args.push_back("--services");
      args.push_back(core::join(step.interrupt.services, ","));
    }
    args.push_back("--package-dir");
    args.push_back("/pkg");
  } else {
    args.push_back("--host-root");
    args.push_back("/host");
    args.push_back("--package-dir");
    args.push_back("/gpufleet/pkg");
    core::Value pm;
    pm["name"] = "pkg";
    pm["mountPath"] = "/gpufleet";
    mounts.push_back(pm);
    // The package image hands its /pkg over: it needs nothing but a shell and cp.
    core::Value init;
    init["name"] = "package";
    init["image"] = step.image.empty() && pkg != nullptr ? pkg->image : step.image;
    init["command"] = string_list({"/bin/sh", "-c", "cp -a /pkg/. /gpufleet/pkg/"});
    core::Value im = core::Value::list();
    im.push_back(pm);
    init["volumeMounts"] = std::move(im);
    spec["initContainers"].push_back(std::move(init));
    if (step.stage == Stage::Config && !options.config_map.empty()) {
      args.push_back("--config-dir");
      args.push_back("/gpufleet/config");
      core::Value cv;
      cv["name"] = "config";
      cv["configMap"]["name"] = options.config_map;
      volumes.push_back(cv);
      core::Value cm;
      cm["name"] = "config";
      cm["mountPath"] = "/gpufleet/config";
      cm["readOnly"] = true;
      mounts.push_back(cm);
    }
  }
  // The step's env: the package's, an uninstall's as recorded, the interrupt's merged.
  for (const auto& [k, v] : step.env) {
    args.push_back("--env");
    args.push_back(k + "=" + v);
  }
  spec["volumes"] = std::move(volumes);

  core::Value c;
  c["name"] = std::string(kStepContainer);
  c["image"] = options.runner_image;
  c["args"] = std::move(args);
  if (!step.resources.empty()) c["resources"] = pod_resources_to_value(step.resources);
  c["securityContext"]["privileged"] = true;
  c["terminationMessagePolicy"] = "File";
  c["volumeMounts"] = std::move(mounts);
  spec["containers"].push_back(std::move(c));
  return pod;
}

std::string verify_pod_name(std::string_view set, std::string_view node, std::string_view key) {
  std::string id(set);
  id += '\n';
  id += node;
  id += '\n';
  id += key;
  return "hp-" + short_hash(id);
}

core::Value verify_pod(const HostPackageSet& set, const DesiredState& desired,
                       const std::string& node, const Package& package, std::int64_t round,
                       const StagePodOptions& options) {
  // The same pod as the package's apply stage (image hand-over, host mount, env), with the
  // runner in verify mode.
  PlannedStep step;
  step.package = package.name;
  step.stage = Stage::Apply;
  step.version = package.version_text;
  step.image = package.image;
  step.env = package.env;
  step.resources = package.resources;
  std::vector<Stage> stages = verify_stages(package);
  std::chrono::seconds timeout{0};
  std::string list;
  for (Stage st : stages) {
    timeout = std::max(timeout, package.timeout(st));
    list += (list.empty() ? "" : ",") + std::string(stage_name(st));
  }
  step.timeout = timeout;
  core::Value pod =
      stage_pod(set, node, step, StagePodOptions{options.namespace_, options.runner_image, ""});
  const std::string key = verify_key(package, desired, round);
  core::Value& meta = pod["metadata"];
  meta["name"] = verify_pod_name(set.name, node, key);
  meta["labels"][std::string(kStageLabel)] = std::string(kVerifyStage);
  meta["annotations"][std::string(kKeyAnnotation)] = key;
  meta["annotations"][std::string(kVerifyAnnotation)] = list;
  core::Value& args = pod["spec"]["containers"].as_list().front()["args"];
  core::Value out = core::Value::list();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i].as_string();
    if (a == "--stage") {
      out.push_back("--verify");
      out.push_back(list);
      ++i;
    } else if (a == "--change") {
      out.push_back(a);
      out.push_back("r" + std::to_string(round));
      ++i;
    } else {
      out.push_back(a);
    }
  }
  for (std::size_t i = 0; i < desired.set->packages.size(); ++i) {
    if (desired.set->packages[i].name == package.name) {
      out.push_back("--config-hash");
      out.push_back(desired.package_config_hash[i]);
    }
  }
  args = std::move(out);
  return pod;
}

std::optional<StageOutcome> stage_outcome(const core::Value& pod) {
  std::string_view phase = kube::pod::phase(pod);
  if (phase != "Succeeded" && phase != "Failed") return std::nullopt;
  StageOutcome out;
  std::string message;
  int exit_code = -1;
  if (const core::Value* cs = pod.get({"status", "containerStatuses"}); cs && cs->is_list()) {
    for (const auto& c : cs->as_list()) {
      if (c.get_string({"name"}) != kStepContainer) continue;
      message = std::string(c.get_string({"state", "terminated", "message"}));
      if (const core::Value* e = c.get({"state", "terminated", "exitCode"}); e && e->is_int())
        exit_code = static_cast<int>(e->as_int());
    }
  }
  if (!message.empty()) {
    try {
      core::Value r = core::parse_json(message, "termination message");
      out.status = std::string(r.get_string({"status"}));
      out.message = std::string(r.get_string({"message"}));
      out.ok = out.status == "succeeded" || out.status == "skipped";
      if (!out.status.empty()) return out;
    } catch (const std::exception&) {
      // Not the runner's JSON: reported below as a pod failure with the text.
    }
  }
  out.ok = false;
  out.status = "pod-failed";
  std::string reason(pod.get_string({"status", "reason"}));
  out.message = "stage pod " + std::string(pod.get_string({"metadata", "name"})) + " ended " +
                std::string(phase) + (reason.empty() ? "" : " (" + reason + ")") +
                " with exit code " + std::to_string(exit_code) +
                " and no step result in its termination message" +
                (message.empty() ? "" : ": " + message.substr(0, 200));
  return out;
}

}  // namespace gpufleet::hostpkg
