// The goodput controller: observe (caches) → decide_job (pure) → act (one ConfigMap per job).
#include "goodput/controller.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "api/resources.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "core/sha256.h"
#include "core/time.h"
#include "goodput/fleet.h"
#include "kube/api/meta.h"
#include "kube/api/names.h"
#include "kube/api/resource.h"
#include "kube/client.h"
#include "kube/events.h"

namespace gpufleet::goodput {

namespace {

constexpr std::string_view kFieldManager = "gpufleet-goodput";
constexpr std::string_view kJobIndex = "goodput.job";
constexpr std::string_view kNodeIndex = "goodput.node";

std::string clean_dns(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '-');
  }
  return out;
}

std::string trim_dashes(std::string s) {
  while (!s.empty() && s.back() == '-') s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && s[i] == '-') ++i;
  return s.substr(i);
}

// The request a pod maps to: {namespace, job name} of its gang (or of itself, a GPU pod
// without a gang label); nullopt for a pod that is no job.
std::optional<controller::Request> job_request_of_pod(const core::Value& pod,
                                                      const std::vector<std::string>& keys) {
  const std::string ns(kube::namespace_of(pod));
  const std::string name(kube::name_of(pod));
  if (name.empty()) return std::nullopt;
  if (auto g = gang_of(pod, keys)) return controller::Request{ns, g->second};
  try {
    if (pod_gpus(pod) > 0) return controller::Request{ns, name};
  } catch (const core::InvalidInput&) {
    // a bad quantity counts no GPUs (job.h)
  }
  return std::nullopt;
}

std::optional<controller::Request> job_request_of_configmap(const core::Value& cm) {
  std::string_view key = cm.get_string({"metadata", "annotations", kLedgerJobKeyAnnotation});
  if (key.find('/') == std::string_view::npos) return std::nullopt;
  return controller::Request::from_key(key);
}

std::vector<std::string> index_spec_node(const core::Value& obj) {
  std::string_view n = obj.get_string({"spec", "nodeName"});
  if (n.empty()) return {};
  return {std::string(n)};
}

std::string job_key_text(const JobKey& k) { return k.ns + "/" + k.name; }

class GoodputReconciler : public controller::Reconciler {
 public:
  GoodputReconciler(controller::Manager& m, controller::Cache& pods, controller::Cache& rems,
                    controller::Cache& cms, std::string ns, std::int64_t retention)
      : client_(m.client()),
        clock_(m.clock()),
        events_(m.event_recorder("goodput")),
        pods_(pods),
        rems_(rems),
        cms_(cms),
        ns_(std::move(ns)),
        retention_(retention) {
    auto& reg = *m.options().registry;
    ettr_ = &reg.gauge("gpufleet_goodput_ettr",
                       "Fleet effective training time ratio: productive over wall GPU-seconds "
                       "of every job with a ledger (1 when nothing ran)");
    lost_ = &reg.gauge("gpufleet_goodput_gpu_hours_lost",
                       "GPU-hours lost to interruptions, by cause", {"cause"});
    jobs_ = &reg.gauge("gpufleet_goodput_jobs", "Jobs with a ledger, by state", {"state"});
    interruptions_ = &reg.gauge("gpufleet_goodput_interruptions",
                                "Interruptions of jobs with a ledger, by cause", {"cause"});
    lemons_ = &reg.gauge("gpufleet_goodput_lemon_nodes",
                         "Nodes with at least 3 fault incidents in 30 days (LemonPolicy defaults)");
    ettr_->set(1.0);
    for (Cause c : kCauses) {
      lost_->with({cause_name(c)}).set(0);
      interruptions_->with({cause_name(c)}).set(0);
    }
    for (JobState s : {JobState::Pending, JobState::Running, JobState::Interrupted,
                       JobState::Succeeded, JobState::Failed})
      jobs_->with({state_name(s)}).set(0);
    lemons_->set(0);
  }

  controller::Result reconcile(const controller::Request& req, std::stop_token) override {
    const std::int64_t now = clock_.unix_seconds();
    const std::string jk = req.namespace_ + "/" + req.name;
    // observe: the job's pods, its ledger ConfigMaps (one per gang label with this name).
    std::vector<core::Value> pods;
    for (const auto& p : pods_.by_index(std::string(kJobIndex), jk)) pods.push_back(*p);
    std::map<JobKey, Job> jobs;
    for (Job& j : group_jobs(pods, options_)) {
      if (j.key.ns == req.namespace_ && j.key.name == req.name) jobs[j.key] = std::move(j);
    }
    std::map<std::string, kube::ObjectPtr> cms;  // by name
    for (const auto& c : cms_.by_index(std::string(kJobIndex), jk))
      cms[std::string(kube::name_of(*c))] = c;
    std::set<JobKey> keys;
    for (const auto& [k, _] : jobs) keys.insert(k);
    std::map<std::string, Ledger> read;  // ConfigMap name → its ledger
    std::set<std::string> bad;
    for (const auto& [name, cm] : cms) {
      try {
        const core::Value* data = cm->get({"data", kLedgerDataKey});
        if (data == nullptr || !data->is_string())
          throw core::InvalidInput("configmap " + ns_ + "/" + name + ": data." +
                                   std::string(kLedgerDataKey) + " is missing");
        Ledger l = Ledger::from_value(core::parse_json(data->as_string(), name),
                                      "configmap " + ns_ + "/" + name);
        if (ledger_configmap_name(l.key()) != name)
          throw core::InvalidInput("configmap " + ns_ + "/" + name + ": the ledger is of job " +
                                   l.key().display() + ", whose ConfigMap is " +
                                   ledger_configmap_name(l.key()));
        keys.insert(l.key());
        read.emplace(name, std::move(l));
      } catch (const core::InvalidInput& e) {
        bad.insert(name);
        report_bad(*cm, name, e.what());
      }
    }
    controller::Result result;
    std::optional<std::int64_t> next;
    for (const JobKey& key : keys) {
      const std::string cm_name = ledger_configmap_name(key);
      if (bad.count(cm_name) != 0) continue;  // left untouched: the evidence stays
      JobFacts f;
      f.key = key;
      if (auto it = jobs.find(key); it != jobs.end()) f.job = it->second;
      if (auto it = cms.find(cm_name); it != cms.end()) {
        f.persisted_json = std::string(it->second->get_string({"data", kLedgerDataKey}));
        f.persisted_digest = std::string(
            it->second->get_string({"metadata", "annotations", kLedgerObservedAnnotation}));
        f.persisted = read.at(cm_name);
      }
      {
        // What this process wrote last may not be in the cache yet: the newer one counts.
        std::lock_guard lock(mu_);
        if (auto it = written_.find(cm_name); it != written_.end()) {
          const auto& w = it->second;
          if (!f.persisted ||
              w.ledger.observed_at().value_or(0) > f.persisted->observed_at().value_or(0) ||
              (w.ledger.observed_at() == f.persisted->observed_at() &&
               w.json != f.persisted_json)) {
            f.persisted = w.ledger;
            f.persisted_json = w.json;
            f.persisted_digest = w.digest;
          }
        }
      }
      std::set<std::string> nodes;
      if (f.job) nodes.insert(f.job->nodes.begin(), f.job->nodes.end());
      if (f.persisted) {
        nodes.insert(f.persisted->nodes().begin(), f.persisted->nodes().end());
        if (f.persisted->open()) nodes.insert(f.persisted->open()->node);
      }
      for (const std::string& n : nodes) {
        for (const auto& r : rems_.by_index(std::string(kNodeIndex), n)) {
          try {
            if (auto e =
                    event_from_remediation(*r, "remediation " + std::string(kube::name_of(*r))))
              f.events.push_back(std::move(*e));
          } catch (const core::InvalidInput& e) {
            core::log::warn("goodput: remediation skipped", {{"error", e.what()}});
          }
        }
      }
      std::sort(f.events.begin(), f.events.end(), [](const auto& a, const auto& b) {
        return a.fault_at != b.fault_at ? a.fault_at < b.fault_at : a.incident < b.incident;
      });
      JobDecision d = decide_job(f, now, retention_);
      // act
      if (d.remove) {
        client_.remove(kube::resources::config_maps(), ns_, cm_name);
        core::log::info("goodput: ledger removed after its retention",
                        {{"job", key.display()}, {"configmap", cm_name}});
        std::lock_guard lock(mu_);
        written_.erase(cm_name);
        ledgers_.erase(cm_name);
        continue;
      }
      if (d.write) write(key, cm_name, d);
      {
        std::lock_guard lock(mu_);
        ledgers_.insert_or_assign(cm_name, d.ledger);
        written_.insert_or_assign(cm_name, Written{d.ledger, d.json, d.digest});
      }
      if (d.look_again_at) next = next ? std::min(*next, *d.look_again_at) : *d.look_again_at;
    }
    refresh_metrics(now);
    if (next) result.requeue_after = std::chrono::seconds(std::max<std::int64_t>(1, *next - now));
    return result;
  }

 private:
  struct Written {
    Ledger ledger;
    std::string json;
    std::string digest;
  };

  void write(const JobKey& key, const std::string& name, const JobDecision& d) {
    core::Value cm = core::Value::map();
    cm["apiVersion"] = "v1";
    cm["kind"] = "ConfigMap";
    core::Value& md = cm["metadata"];
    md["name"] = name;
    md["namespace"] = ns_;
    md["labels"][kLedgerJobNamespaceLabel] = label_value_safe(key.ns);
    md["labels"][kLedgerJobLabel] = label_value_safe(key.name);
    md["labels"]["app.kubernetes.io/managed-by"] = "gpufleet";
    md["annotations"][kLedgerJobKeyAnnotation] = job_key_text(key);
    md["annotations"][kLedgerObservedAnnotation] = d.digest;
    cm["data"][kLedgerDataKey] = d.json;
    client_.apply(
        kube::resources::config_maps(), cm,
        kube::ApplyOptions{
            .field_manager = std::string(kFieldManager), .force = true, .dry_run = false});
  }

  void report_bad(const core::Value& cm, const std::string& name, const std::string& error) {
    std::lock_guard lock(mu_);
    const std::string rv(kube::resource_version_of(cm));
    if (auto it = reported_.find(name); it != reported_.end() && it->second == rv) return;
    reported_[name] = rv;
    core::log::error("goodput: ledger ConfigMap cannot be read; left untouched, job skipped",
                     {{"configmap", ns_ + "/" + name}, {"error", error}});
    core::Value regarding = cm;
    regarding["apiVersion"] = "v1";
    regarding["kind"] = "ConfigMap";
    events_.record(regarding, kube::EventType::Warning, "BadLedger", "Skip",
                   error + " (fix or delete the ConfigMap; the job is not accounted until then)");
  }

  void refresh_metrics(std::int64_t now) {
    std::lock_guard lock(mu_);
    std::vector<Ledger> all;
    all.reserve(ledgers_.size());
    std::map<JobState, int> states;
    std::array<std::int64_t, kCauseCount> interrupted{};
    for (const auto& [_, l] : ledgers_) {
      all.push_back(l);
      states[l.state()]++;
      const Summary s = l.summary(now);
      for (Cause c : kCauses) interrupted[static_cast<std::size_t>(c)] += s.of(c).interruptions;
    }
    const FleetSummary fs = summarize_fleet(all, now);
    ettr_->set(fs.ettr);
    for (Cause c : kCauses) {
      lost_->with({cause_name(c)}).set(fs.gpu_hours_lost[static_cast<std::size_t>(c)]);
      interruptions_->with({cause_name(c)})
          .set(static_cast<double>(interrupted[static_cast<std::size_t>(c)]));
    }
    for (JobState s : {JobState::Pending, JobState::Running, JobState::Interrupted,
                       JobState::Succeeded, JobState::Failed})
      jobs_->with({state_name(s)}).set(states[s]);
    std::vector<IncidentRecord> records;
    for (const auto& r : rems_.list()) {
      try {
        if (auto rec = incident_from_remediation(*r, "remediation")) records.push_back(*rec);
      } catch (const core::InvalidInput&) {
        // logged where its event is read
      }
    }
    std::int64_t lemons = 0;
    for (const auto& n : node_reliability(records, now, LemonPolicy{})) lemons += n.lemon ? 1 : 0;
    lemons_->set(static_cast<double>(lemons));
  }

  kube::Client& client_;
  const controller::Clock& clock_;  // the Manager's: never the wall clock directly
  kube::EventRecorder& events_;
  controller::Cache& pods_;
  controller::Cache& rems_;
  controller::Cache& cms_;
  std::string ns_;
  std::int64_t retention_;
  GroupOptions options_;
  core::metrics::Gauge* ettr_ = nullptr;
  core::metrics::Gauge* lost_ = nullptr;
  core::metrics::Gauge* jobs_ = nullptr;
  core::metrics::Gauge* interruptions_ = nullptr;
  core::metrics::Gauge* lemons_ = nullptr;
  std::mutex mu_;
  std::map<std::string, Ledger> ledgers_;        // by ConfigMap name, for the metrics
  std::map<std::string, Written> written_;       // what this process wrote last
  std::map<std::string, std::string> reported_;  // bad ConfigMap → resourceVersion reported
};

}  // namespace

std::string ledger_configmap_name(const JobKey& key) {
  const std::string hash =
      core::sha256_hex(key.ns + "\n" + key.label + "\n" + key.name).substr(0, 8);
  std::string body = trim_dashes(clean_dns(key.ns + "-" + key.name));
  constexpr std::size_t kMax = 63;
  const std::size_t room = kMax - std::string_view("goodput-").size() - 1 - hash.size();
  if (body.size() > room) body = trim_dashes(body.substr(0, room));
  return "goodput-" + (body.empty() ? std::string() : body + "-") + hash;
}

std::string label_value_safe(std::string_view v) {
  if (kube::check_label_value(v).empty()) return std::string(v);
  const std::string hash = core::sha256_hex(v).substr(0, 8);
  std::string out;
  for (char c : v) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    out.push_back(ok ? c : '-');
  }
  if (out.size() > 54) out.resize(54);
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  std::size_t i = 0;
  while (i < out.size() && !std::isalnum(static_cast<unsigned char>(out[i]))) ++i;
  out = out.substr(i);
  return out.empty() ? hash : out + "-" + hash;
}

std::string observation_digest(const Observation& o) {
  std::string s(state_name(o.state));
  s += "|gpus=" + std::to_string(o.gpus) + "|nodes=";
  for (const auto& n : o.nodes) s += n + ",";
  s += "|ck=" + std::string(o.reports_checkpoints ? "1" : "0");
  if (o.last_checkpoint) s += ":" + std::to_string(*o.last_checkpoint);
  if (o.step_time_seconds) s += "|step=" + std::to_string(*o.step_time_seconds);
  return core::sha256_hex(s).substr(0, 16);
}

std::int64_t parse_retention(std::string_view text) {
  auto bad = [&] {
    return core::InvalidInput("goodput.retention: value \"" + std::string(text) +
                              "\" is not a duration (write whole days like \"7d\" or a Go "
                              "duration like \"36h\", at least 1s)");
  };
  std::int64_t s = 0;
  if (!text.empty() && text.back() == 'd') {
    const std::string_view digits = text.substr(0, text.size() - 1);
    if (digits.empty() || digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw bad();
    s = std::stoll(std::string(digits)) * 86400;
  } else {
    auto d = core::try_parse_duration(text);
    if (!d) throw bad();
    s = std::chrono::duration_cast<std::chrono::seconds>(*d).count();
  }
  if (s < 1) throw bad();
  return s;
}

JobDecision decide_job(const JobFacts& f, std::int64_t now, std::int64_t retention_seconds) {
  JobDecision d;
  d.ledger = f.persisted ? *f.persisted : Ledger(f.key);
  d.digest = f.persisted_digest;
  if (f.job) {
    Observation o = observation_of(*f.job, now);
    // A gang is not running while a member is missing: between an evicted pod's deletion and
    // its replacement's creation the pods left look Running on fewer GPUs. While interrupted
    // (or with an incident open) the job runs again only on as many GPUs as it ran with.
    if (o.state == JobState::Running && d.ledger.started_at() && o.gpus < d.ledger.gpus() &&
        (d.ledger.state() == JobState::Interrupted || d.ledger.open()))
      o.state = JobState::Interrupted;
    const std::string digest = observation_digest(o);
    // The same pods again: the state holds since the last observation, nothing to feed.
    if (digest != f.persisted_digest || !f.persisted) {
      d.ledger.observe(o);
      d.digest = digest;
    }
  }
  for (const InterruptionEvent& e : f.events) d.ledger.interruption(e);
  d.json = core::to_json(d.ledger.to_value());
  d.write = d.json != f.persisted_json || d.digest != f.persisted_digest;
  if (!f.job) {
    const std::int64_t since = d.ledger.observed_at().value_or(now);
    const std::int64_t until = since + retention_seconds;
    if (f.persisted && now >= until) {
      d.remove = true;
      d.write = false;
    } else {
      d.look_again_at = until;
    }
  }
  return d;
}

void setup_goodput(controller::Manager& manager, const controller::Context& ctx) {
  const std::string ns = ctx.setting("goodput.namespace", std::string(kDefaultNamespace));
  if (std::string err = kube::check_dns_label(ns); !err.empty())
    throw core::InvalidInput("goodput.namespace: value \"" + ns + "\": " + err +
                             " (name an existing namespace, e.g. gpufleet-system)");
  const std::int64_t retention = parse_retention(ctx.setting("goodput.retention", "7d"));
  const std::vector<std::string> keys = default_gang_label_keys();

  controller::SourceOptions pods_src;  // the default shape: shared with sentinel's
  controller::Cache& pods = manager.cache(kube::resources::pods(), pods_src.cache);
  pods.add_index(std::string(kJobIndex), [keys](const core::Value& pod) {
    auto r = job_request_of_pod(pod, keys);
    return r ? std::vector<std::string>{r->namespace_ + "/" + r->name} : std::vector<std::string>{};
  });
  pods.add_index(std::string(kNodeIndex), index_spec_node);
  controller::Cache& rems = manager.cache(api::remediations());
  rems.add_index(std::string(kNodeIndex), index_spec_node);

  controller::SourceOptions cm_src;
  cm_src.cache.namespace_ = ns;
  cm_src.cache.label_selector = std::string(kLedgerJobNamespaceLabel);
  controller::Cache& cms = manager.cache(kube::resources::config_maps(), cm_src.cache);
  cms.add_index(std::string(kJobIndex), [](const core::Value& cm) {
    auto r = job_request_of_configmap(cm);
    return r ? std::vector<std::string>{r->namespace_ + "/" + r->name} : std::vector<std::string>{};
  });

  // The reconcile key is the job ("<namespace>/<name>"), no API object: the ConfigMaps are
  // the primary resource, their own keys filtered out, and every source maps to job keys.
  controller::SourceOptions primary = cm_src;
  primary.predicates.push_back([](const controller::WatchEvent&) { return false; });
  controller::MapFunc cm_to_job = [](const core::Value& cm) {
    auto r = job_request_of_configmap(cm);
    return r ? std::vector<controller::Request>{*r} : std::vector<controller::Request>{};
  };
  controller::MapFunc pod_to_job = [keys](const core::Value& pod) {
    auto r = job_request_of_pod(pod, keys);
    return r ? std::vector<controller::Request>{*r} : std::vector<controller::Request>{};
  };
  // An incident: every job on its node, and every job with a ledger (it may have run there;
  // incidents are rare, a pass with nothing new writes nothing).
  controller::MapFunc rem_to_jobs = [&pods, &cms, keys](const core::Value& rem) {
    std::set<controller::Request> out;
    std::string_view node = rem.get_string({"spec", "nodeName"});
    if (!node.empty()) {
      for (const auto& p : pods.by_index(std::string(kNodeIndex), std::string(node)))
        if (auto r = job_request_of_pod(*p, keys)) out.insert(*r);
    }
    for (const auto& c : cms.list())
      if (auto r = job_request_of_configmap(*c)) out.insert(*r);
    return std::vector<controller::Request>(out.begin(), out.end());
  };
  auto rec = std::make_shared<GoodputReconciler>(manager, pods, rems, cms, ns, retention);
  manager.controller("goodput")
      .for_resource(kube::resources::config_maps(), "ConfigMap", primary)
      .watches(kube::resources::config_maps(), cm_to_job, cm_src)
      .watches(kube::resources::pods(), pod_to_job, pods_src)
      .watches(api::remediations(), rem_to_jobs)
      .max_concurrent_reconciles(2)
      .complete(rec);
  core::log::info("goodput: ledgers kept as ConfigMaps",
                  {{"namespace", ns}, {"retention_seconds", retention}});
}

}  // namespace gpufleet::goodput
