#include "agent/remediation.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "core/json.h"
#include "core/log.h"
#include "core/text.h"
#include "core/time.h"
#include "kube/informer.h"

namespace gpufleet::agent {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMaxRequestBytes = 4096;

std::string quote_text(std::string_view s) {
  std::string out = "\"";
  out += s.size() > 200 ? std::string(s.substr(0, 200)) + "…" : std::string(s);
  out += "\"";
  return out;
}

const std::string& request_where() {
  static const std::string w = "annotation " + std::string(kRemediationRequestAnnotation);
  return w;
}

constexpr std::string_view kRequestShape =
    R"(sentinel writes {"incident":"<Remediation name>","attempt":N,)"
    R"("action":"reboot"|"gpu-reset","gpus":["GPU-..."] (gpu-reset only, optional)})";

[[noreturn]] void bad_request(const std::string& what) {
  throw core::InvalidInput(request_where() + ": " + what + "; " + std::string(kRequestShape));
}

// Writes `text` to dir/name durably: a temporary file, fsync, rename, fsync of the directory.
void write_durably(const std::filesystem::path& dir, const std::string& name,
                   std::string_view text) {
  std::filesystem::create_directories(dir);
  const std::string target = (dir / name).string();
  const std::string tmp = target + ".tmp";
  auto fail = [&](const std::string& what) {
    throw std::runtime_error("remediation ledger: " + what + ": " + std::strerror(errno));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create " + tmp);
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      fail("cannot write " + tmp);
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("cannot fsync " + tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), target.c_str()) != 0) fail("cannot rename " + tmp);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("cannot open " + dir.string());
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) fail("cannot fsync " + dir.string());
}

core::Value payload_of(const RemediationRequest& r, std::string_view message) {
  core::Value p = core::Value::map();
  p["incident"] = r.incident;
  p["attempt"] = r.attempt;
  p["action"] = r.action;
  if (!r.gpus.empty()) {
    core::Value g = core::Value::list();
    for (const auto& u : r.gpus) g.push_back(u);
    p["gpus"] = std::move(g);
  }
  p["message"] = std::string(message);
  return p;
}

}  // namespace

// ---- parsing ----

RemediationRequest parse_remediation_request(std::string_view text) {
  if (text.size() > kMaxRequestBytes)
    bad_request("the value is " + std::to_string(text.size()) + " bytes, over the " +
                std::to_string(kMaxRequestBytes) + "-byte bound");
  core::Value v;
  try {
    v = core::parse_json(text, request_where());
  } catch (const std::exception& e) {
    bad_request("value " + quote_text(text) + " is not JSON (" + e.what() + ")");
  }
  if (!v.is_map()) bad_request("value " + quote_text(text) + " is not a JSON object");
  for (const auto& e : v.as_map()) {
    if (e.key != "incident" && e.key != "attempt" && e.key != "action" && e.key != "gpus")
      bad_request("unknown field " + quote_text(e.key) +
                  "; only incident, attempt, action and gpus are allowed");
  }
  RemediationRequest r;
  const core::Value* incident = v.find("incident");
  if (incident == nullptr) bad_request("missing field \"incident\" (the Remediation's name)");
  if (!incident->is_string() || incident->as_string().empty())
    bad_request("field \"incident\" is " + core::to_json(*incident) +
                "; it must be the Remediation's name, a non-empty string");
  if (incident->as_string().size() > 253)
    bad_request("field \"incident\" is longer than 253 characters (a Kubernetes name)");
  r.incident = incident->as_string();
  const core::Value* attempt = v.find("attempt");
  if (attempt == nullptr) bad_request("missing field \"attempt\" (an integer from 1)");
  if (attempt->is_int()) {
    r.attempt = attempt->as_int();
  } else if (attempt->is_uint() && attempt->as_uint() <= static_cast<std::uint64_t>(INT64_MAX)) {
    r.attempt = static_cast<std::int64_t>(attempt->as_uint());
  } else {
    r.attempt = 0;
  }
  if (r.attempt < 1)
    bad_request("field \"attempt\" is " + core::to_json(*attempt) +
                "; it must be an integer from 1");
  const core::Value* action = v.find("action");
  if (action == nullptr) bad_request("missing field \"action\" (\"reboot\" or \"gpu-reset\")");
  if (!action->is_string() ||
      (action->as_string() != "reboot" && action->as_string() != "gpu-reset"))
    bad_request("field \"action\" is " + core::to_json(*action) +
                "; use \"reboot\" or \"gpu-reset\"");
  r.action = action->as_string();
  if (const core::Value* gpus = v.find("gpus")) {
    if (r.action != "gpu-reset")
      bad_request("field \"gpus\" is set for action \"" + r.action +
                  "\"; it applies only to \"gpu-reset\" (a reboot covers every GPU)");
    if (!gpus->is_list() || gpus->size() > kMaxRequestGpus)
      bad_request("field \"gpus\" is " + quote_text(core::to_json(*gpus)) +
                  "; it must be a list of at most " + std::to_string(kMaxRequestGpus) +
                  " GPU UUIDs");
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      const core::Value& g = gpus->as_list()[i];
      const bool ok =
          g.is_string() && g.as_string().starts_with("GPU-") && g.as_string().size() <= 64 &&
          g.as_string().find_first_not_of("0123456789abcdefABCDEF-", 4) == std::string::npos;
      if (!ok)
        bad_request("field \"gpus[" + std::to_string(i) + "]\" is " + core::to_json(g) +
                    "; it must be a GPU UUID as nvidia-smi prints it (GPU-3f1c2a9e-...)");
      if (std::find(r.gpus.begin(), r.gpus.end(), g.as_string()) == r.gpus.end())
        r.gpus.push_back(g.as_string());
    }
  }
  return r;
}

// ---- commands ----

std::vector<std::string> split_command(std::string_view text, std::string_view flag) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0)
    throw core::InvalidInput(std::string(flag) + " " + quote_text(text) + " has an unclosed " +
                             quote +
                             "; close the quote (the command is split into words, no shell)");
  if (in_word) out.push_back(std::move(word));
  if (out.empty())
    throw core::InvalidInput(std::string(flag) +
                             " is empty; give a command, e.g. \"systemctl reboot\"");
  return out;
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t tail_bytes) {
  core::SubprocessOptions o;
  o.timeout = timeout;
  o.max_output = tail_bytes;
  return core::run_subprocess(argv, o);
}

ExecResult HostCommandExecutor::execute(const NodeIdentity& /*node*/,
                                        const RemediationRequest& request) {
  if (request.action == "reboot" || request.gpus.empty()) {
    const auto& argv = request.action == "reboot" ? commands_.reboot : commands_.gpu_reset;
    CommandResult c = run_command(argv, commands_.timeout);
    return {.ok = c.ok(), .message = "`" + core::join(argv, " ") + "`: " + c.describe()};
  }
  // One reset per faulty GPU: nvidia-smi resets only the GPU -i names, the others keep running
  // (and keep whatever fault they have). The first failure stops: sentinel retries the attempt.
  ExecResult out{.ok = true, .message = ""};
  for (const auto& uuid : request.gpus) {
    std::vector<std::string> argv = commands_.gpu_reset;
    argv.push_back("-i");
    argv.push_back(uuid);
    CommandResult c = run_command(argv, commands_.timeout);
    if (!out.message.empty()) out.message += "; ";
    out.message += "`" + core::join(argv, " ") + "`: " + c.describe();
    if (!c.ok()) {
      out.ok = false;
      break;
    }
  }
  return out;
}

// ---- the ledger ----

RemediationLedger::RemediationLedger(std::filesystem::path dir) : dir_(std::move(dir)) {
  const auto file = dir_ / "requests.json";
  std::ifstream in(file);
  if (!in) return;
  std::stringstream ss;
  ss << in.rdbuf();
  core::Value v;
  try {
    v = core::parse_json(ss.str(), file.string());
  } catch (const std::exception& e) {
    // Written by rename, so never half a file; a broken one is someone else's doing. Acting
    // again could reboot a node twice: refuse to start rather than guess.
    throw core::InvalidInput(file.string() + " cannot be read (" + e.what() +
                             "); it records the remediation requests this node already took. "
                             "Restore it, or remove it only if no request on the Node is pending");
  }
  if (const core::Value* inc = v.find("incidents"); inc != nullptr && inc->is_map()) {
    for (const auto& e : inc->as_map()) {
      Entry en;
      if (const core::Value* a = e.value.find("attempt"); a != nullptr && a->is_int())
        en.attempt = a->as_int();
      en.action = std::string(e.value.get_string({"action"}));
      en.time = std::string(e.value.get_string({"time"}));
      if (const core::Value* s = e.value.find("seq"); s != nullptr && s->is_int())
        en.seq = static_cast<std::uint64_t>(s->as_int());
      seq_ = std::max(seq_, en.seq);
      incidents_[e.key] = std::move(en);
    }
  }
  rejected_ = std::string(v.get_string({"rejected"}));
}

RemediationLedger::Verdict RemediationLedger::check(const RemediationRequest& r) const {
  auto it = incidents_.find(r.incident);
  if (it == incidents_.end() || it->second.attempt < r.attempt) return Verdict::New;
  return it->second.attempt == r.attempt ? Verdict::AlreadyTaken : Verdict::Stale;
}

std::int64_t RemediationLedger::attempt_of(const std::string& incident) const {
  auto it = incidents_.find(incident);
  return it == incidents_.end() ? 0 : it->second.attempt;
}

void RemediationLedger::record(const RemediationRequest& r) {
  Entry& e = incidents_[r.incident];
  e.attempt = r.attempt;
  e.action = r.action;
  e.time = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Seconds);
  e.seq = ++seq_;
  while (incidents_.size() > kMaxIncidents) {
    auto oldest = std::min_element(incidents_.begin(), incidents_.end(),
                                   [](auto& a, auto& b) { return a.second.seq < b.second.seq; });
    incidents_.erase(oldest);
  }
  save();
}

void RemediationLedger::record_rejected(std::string_view text) {
  rejected_ = std::string(text.substr(0, kMaxRequestBytes));
  save();
}

void RemediationLedger::save() const {
  core::Value v = core::Value::map();
  core::Value inc = core::Value::map();
  for (const auto& [name, e] : incidents_) {
    core::Value x = core::Value::map();
    x["attempt"] = e.attempt;
    x["action"] = e.action;
    x["time"] = e.time;
    x["seq"] = static_cast<std::int64_t>(e.seq);
    inc[name] = std::move(x);
  }
  v["incidents"] = std::move(inc);
  v["rejected"] = rejected_;
  write_durably(dir_, "requests.json", core::to_json(v) + "\n");
}

// ---- one node ----

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::None: return "None";
    case Outcome::Rejected: return "Rejected";
    case Outcome::NotQuarantined: return "NotQuarantined";
    case Outcome::AlreadyTaken: return "AlreadyTaken";
    case Outcome::Stale: return "Stale";
    case Outcome::Disabled: return "Disabled";
    case Outcome::Succeeded: return "Succeeded";
    case Outcome::Failed: return "Failed";
  }
  return "?";
}

NodeRemediation::NodeRemediation(NodeIdentity node, const std::filesystem::path& state_dir,
                                 Executor* executor, Journaller journal)
    : node_(std::move(node)),
      executor_(executor),
      journal_(std::move(journal)),
      ledger_(state_dir / "remediation"),
      bundle_dir_(state_dir / "remediation" / "bundles") {}

void NodeRemediation::set_log_bundle(LogBundleSource source, LogBundleOptions options) {
  bundle_source_ = std::move(source);
  bundle_options_ = std::move(options);
}

Outcome NodeRemediation::handle(std::string_view request_text, std::string_view quarantine_text) {
  if (request_text.empty()) return Outcome::None;
  auto journal = [&](std::string_view kind, const core::Value& payload) {
    try {
      journal_(kind, payload);
    } catch (const std::exception& e) {
      // The ledger is what makes the action happen once; a journal that cannot be written
      // (disk full) must not stop a remediation the node needs.
      core::log::error("agent: cannot journal a remediation record",
                       {{"node", node_.node_name}, {"kind", kind}, {"error", e.what()}});
    }
  };
  RemediationRequest r;
  try {
    r = parse_remediation_request(request_text);
  } catch (const core::InvalidInput& e) {
    if (ledger_.rejected_before(request_text)) return Outcome::Rejected;  // reported already
    core::log::error("agent: remediation request rejected; nothing done",
                     {{"node", node_.node_name}, {"error", e.what()}});
    core::Value p = core::Value::map();
    p["annotation"] = std::string(request_text.substr(0, 1024));
    p["error"] = e.what();
    p["message"] = "remediation request rejected; nothing done";
    journal(kRemediationRejectedKind, p);
    ledger_.record_rejected(request_text);
    return Outcome::Rejected;
  }
  switch (ledger_.check(r)) {
    case RemediationLedger::Verdict::AlreadyTaken:
      return Outcome::AlreadyTaken;  // the normal case after a restart or the reboot itself
    case RemediationLedger::Verdict::Stale:
      if (last_ignored_ != request_text) {
        last_ignored_ = std::string(request_text);
        core::log::warn("agent: remediation request older than one already taken; ignored",
                        {{"node", node_.node_name},
                         {"incident", r.incident},
                         {"attempt", r.attempt},
                         {"taken", ledger_.attempt_of(r.incident)}});
      }
      return Outcome::Stale;
    case RemediationLedger::Verdict::New: break;
  }
  // Acted on only while sentinel's quarantine of the node names this incident: a request left
  // on the Node after its incident ended is never carried out (not even by an agent whose
  // state directory was lost).
  std::string quarantined_for;
  if (!quarantine_text.empty()) {
    try {
      quarantined_for = std::string(core::parse_json(quarantine_text).get_string({"incident"}));
    } catch (const std::exception&) {
      quarantined_for.clear();
    }
  }
  if (quarantined_for != r.incident) {
    if (last_ignored_ != request_text) {
      last_ignored_ = std::string(request_text);
      core::log::warn(
          "agent: remediation request ignored: the node's quarantine does not name its incident",
          {{"node", node_.node_name},
           {"incident", r.incident},
           {"quarantineIncident", quarantined_for},
           {"annotation", kQuarantineAnnotation}});
    }
    return Outcome::NotQuarantined;
  }
  // Before the incident's first action (and before it is recorded: a crash mid-collection
  // collects again), what the action will wipe: the kernel ring, the volatile GPU state.
  if (bundle_source_ && executor_ != nullptr && ledger_.attempt_of(r.incident) == 0) {
    const LogBundle b = collect_log_bundle(*bundle_source_, bundle_dir_, node_.node_name,
                                           r.incident, bundle_options_);
    core::Value p = payload_of(r, b.ok ? "log bundle collected before " + r.action
                                       : "log bundle not collected; " + r.action + " goes ahead");
    p["state"] = b.ok ? "Collected" : "Failed";
    auto list = [](const std::vector<std::string>& v) {
      core::Value l = core::Value::list();
      for (const auto& x : v)
        if (l.size() < 16) l.push_back(x.substr(0, 300));
      return l;
    };
    if (b.ok) {
      p["path"] = b.path;
      p["sha256"] = b.sha256;
      p["bytes"] = static_cast<std::int64_t>(b.bytes);
      p["uncompressedBytes"] = static_cast<std::int64_t>(b.raw_bytes);
    } else {
      p["error"] = b.error;
    }
    p["sections"] = list(b.sections);
    p["truncated"] = list(b.truncated);
    p["errors"] = list(b.errors);
    core::log::info("agent: log bundle", {{"node", node_.node_name},
                                          {"incident", r.incident},
                                          {"state", p.get_string({"state"})},
                                          {"path", b.path},
                                          {"bytes", static_cast<std::int64_t>(b.bytes)},
                                          {"error", b.error}});
    journal(kRemediationBundleKind, p);
  }
  // Recorded before anything is done: a reboot ends this process, and a restart must not do
  // it again.
  ledger_.record(r);
  if (executor_ == nullptr) {
    core::Value p = payload_of(r, "remediation is off on this agent (--remediation=off)");
    p["error"] = "remediation is off on this agent (--remediation=off); nothing done";
    core::log::warn("agent: remediation requested but off; nothing done",
                    {{"node", node_.node_name}, {"incident", r.incident}, {"action", r.action}});
    journal(kRemediationFailedKind, p);
    return Outcome::Disabled;
  }
  core::log::info("agent: remediation started", {{"node", node_.node_name},
                                                 {"incident", r.incident},
                                                 {"attempt", r.attempt},
                                                 {"action", r.action}});
  journal(kRemediationStartedKind, payload_of(r, r.action + " started"));
  ExecResult res;
  try {
    res = executor_->execute(node_, r);
  } catch (const std::exception& e) {
    res.ok = false;
    res.message = e.what();
  }
  if (res.ok) {
    core::log::info("agent: remediation action done", {{"node", node_.node_name},
                                                       {"incident", r.incident},
                                                       {"attempt", r.attempt},
                                                       {"action", r.action},
                                                       {"message", res.message}});
    journal(kRemediationSucceededKind, payload_of(r, res.message));
    return Outcome::Succeeded;
  }
  core::log::error("agent: remediation action failed; sentinel retries with a new attempt",
                   {{"node", node_.node_name},
                    {"incident", r.incident},
                    {"attempt", r.attempt},
                    {"action", r.action},
                    {"error", res.message}});
  core::Value p = payload_of(r, r.action + " failed");
  p["error"] = res.message;
  journal(kRemediationFailedKind, p);
  return Outcome::Failed;
}

// ---- the service ----

RemediationService::RemediationService(std::function<void(Outcome)> on_outcome)
    : on_outcome_(std::move(on_outcome)), thread_([this] { run(); }) {}

RemediationService::~RemediationService() { stop(); }

void RemediationService::add_node(const std::string& node_name, NodeRemediation* node) {
  std::lock_guard lock(mu_);
  Slot& s = slots_[node_name];
  s.node = node;
  // A request seen before the node was added (the watch can be ahead of the node list).
  if (!s.request.empty() && !s.queued) {
    s.queued = true;
    queue_.push_back(node_name);
    cv_.notify_one();
  }
}

void RemediationService::offer(const std::string& node_name, std::string request_text,
                               std::string quarantine_text) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(node_name);
  if (it == slots_.end()) {
    if (request_text.empty()) return;  // nothing to remember for a node not added yet
    it = slots_.emplace(node_name, Slot{}).first;
  }
  Slot& s = it->second;
  if (s.request == request_text && s.quarantine == quarantine_text) return;
  s.request = std::move(request_text);
  s.quarantine = std::move(quarantine_text);
  if (s.node == nullptr || s.queued) return;
  s.queued = true;
  queue_.push_back(node_name);
  cv_.notify_one();
}

void RemediationService::offer_node(const core::Value& node) {
  offer(std::string(node.get_string({"metadata", "name"})),
        std::string(node.get_string({"metadata", "annotations", kRemediationRequestAnnotation})),
        std::string(node.get_string({"metadata", "annotations", kQuarantineAnnotation})));
}

void RemediationService::drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || stopping_; });
}

void RemediationService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  idle_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<Outcome> RemediationService::last_outcome(const std::string& node_name) const {
  std::lock_guard lock(mu_);
  auto it = slots_.find(node_name);
  return it == slots_.end() ? std::nullopt : it->second.outcome;
}

void RemediationService::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::string name = std::move(queue_.front());
    queue_.pop_front();
    Slot& s = slots_[name];
    s.queued = false;
    NodeRemediation* node = s.node;
    const std::string request = s.request;
    const std::string quarantine = s.quarantine;
    busy_ = true;
    lock.unlock();
    std::optional<Outcome> outcome;
    try {
      outcome = node->handle(request, quarantine);
    } catch (const std::exception& e) {
      // The ledger could not be written: nothing was done. Sentinel asks again with a new
      // attempt when this one times out; the next change of the Node retries this one.
      core::log::error("agent: remediation request not handled",
                       {{"node", name}, {"error", e.what()}});
    }
    if (outcome && *outcome != Outcome::None && on_outcome_) on_outcome_(*outcome);
    lock.lock();
    Slot& after = slots_[name];
    if (outcome) after.outcome = outcome;
    if (!outcome) after.request.clear();  // so that the same annotation is offered again
    busy_ = false;
    idle_cv_.notify_all();
  }
}

std::unique_ptr<kube::Informer> watch_node_requests(kube::Client& client,
                                                    const std::string& node_name,
                                                    RemediationService& service) {
  kube::InformerOptions o;
  o.resource = kube::resources::nodes();
  if (!node_name.empty()) o.field_selector = "metadata.name=" + node_name;
  o.shape.prune = {"metadata.managedFields", "status.images"};
  o.project = {"metadata.annotations"};
  auto informer = std::make_unique<kube::Informer>(client, std::move(o));
  kube::EventHandlers h;
  h.on_add = [&service](const core::Value& obj) { service.offer_node(obj); };
  h.on_update = [&service](const core::Value&, const core::Value& obj) { service.offer_node(obj); };
  informer->add_handlers(std::move(h));
  informer->start();
  return informer;
}

}  // namespace gpufleet::agent
