#include "sentinel/maintenance.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "agent/nodehealth.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/field_reader.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/log.h"
#include "core/text.h"
#include "core/time.h"
#include "sentinel/maintenance_http.h"

namespace gpufleet::sentinel {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStateFile = "maintenance-state.json";
constexpr std::size_t kMaxDocument = std::size_t{1} << 20;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A string member of `m` ("" when absent or null); anything else is an error.
std::string text_field(const core::Value& m, std::string_view key, std::string_view source,
                       const std::string& path) {
  const core::Value* v = m.find(key);
  if (v == nullptr || v->is_null()) return "";
  if (!v->is_string())
    core::fail_field(source, path + "." + std::string(key),
                     "is " + core::describe_value(*v) + ", not a string",
                     "the provider's document is not in the expected format");
  return std::string(v->as_string());
}

// An HTTP date member in ms since the epoch; 0 when absent or empty.
std::int64_t date_field(const core::Value& m, std::string_view key, std::string_view source,
                        const std::string& path) {
  const std::string text = text_field(m, key, source, path);
  if (text.empty()) return 0;
  auto t = core::Timestamp::try_parse_http_date(text);
  if (!t)
    core::fail_field(source, path + "." + std::string(key), "\"" + text + "\" is not an HTTP date",
                     "expected e.g. \"Mon, 19 Sep 2016 18:29:47 GMT\"");
  return t->seconds * 1000;
}

std::string in_words(std::int64_t ms) {
  if (ms <= 0) return "now";
  return "in " + core::format_duration(std::chrono::milliseconds(ms / 1000 * 1000));
}

std::string at_text(std::int64_t ms) {
  return core::Timestamp{ms / 1000, 0}.to_rfc3339(core::TimestampPrecision::Seconds);
}

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace

std::vector<MaintenanceEvent> parse_azure_scheduled_events(std::string_view json,
                                                           std::string_view source) {
  std::vector<MaintenanceEvent> out;
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return out;
  const core::Value doc = core::parse_json(json, source);
  if (!doc.is_map())
    core::fail_field(source, "(document)", "is " + core::describe_value(doc) + ", not an object",
                     "expected {\"DocumentIncarnation\": N, \"Events\": [...]}");
  const core::Value* events = doc.find("Events");
  if (events == nullptr || events->is_null()) return out;
  if (!events->is_list())
    core::fail_field(source, "Events", "is " + core::describe_value(*events) + ", not a list",
                     "expected a list of scheduled events");
  std::size_t i = 0;
  for (const core::Value& e : events->as_list()) {
    const std::string path = "Events[" + std::to_string(i++) + "]";
    if (!e.is_map())
      core::fail_field(source, path, "is " + core::describe_value(e) + ", not an object",
                       "each event is an object with EventId, EventType, EventStatus, NotBefore");
    MaintenanceEvent m;
    m.id = text_field(e, "EventId", source, path);
    if (m.id.empty())
      core::fail_field(source, path + ".EventId", "is missing", "every event has an EventId");
    m.type = text_field(e, "EventType", source, path);
    m.status = text_field(e, "EventStatus", source, path);
    if (m.status.empty()) m.status = "Scheduled";
    m.not_before_ms = date_field(e, "NotBefore", source, path);
    m.description = text_field(e, "Description", source, path);
    if (const core::Value* d = e.find("DurationInSeconds"); d != nullptr && !d->is_null()) {
      if (!d->is_int())
        core::fail_field(source, path + ".DurationInSeconds",
                         "is " + core::describe_value(*d) + ", not an integer",
                         "seconds, or -1 when unknown");
      m.duration_s = d->as_int() >= 0 ? d->as_int() : -1;
    }
    if (m.not_before_ms > 0 && m.duration_s >= 0)
      m.not_after_ms = m.not_before_ms + m.duration_s * 1000;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<MaintenanceEvent> parse_aws_scheduled_events(std::string_view json,
                                                         std::string_view source) {
  std::vector<MaintenanceEvent> out;
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return out;
  const core::Value doc = core::parse_json(json, source);
  if (!doc.is_list())
    core::fail_field(source, "(document)", "is " + core::describe_value(doc) + ", not a list",
                     "expected a list of scheduled events");
  std::size_t i = 0;
  for (const core::Value& e : doc.as_list()) {
    const std::string path = "[" + std::to_string(i++) + "]";
    if (!e.is_map())
      core::fail_field(source, path, "is " + core::describe_value(e) + ", not an object",
                       "each event is an object with EventId, Code, State, NotBefore");
    MaintenanceEvent m;
    m.id = text_field(e, "EventId", source, path);
    if (m.id.empty())
      core::fail_field(source, path + ".EventId", "is missing", "every event has an EventId");
    m.type = text_field(e, "Code", source, path);
    const std::string state = text_field(e, "State", source, path);
    // EC2 says active (scheduled or under way), completed or canceled.
    m.status = state == "completed" ? "Completed" : state == "canceled" ? "Canceled" : "Scheduled";
    m.not_before_ms = date_field(e, "NotBefore", source, path);
    m.not_after_ms = date_field(e, "NotAfter", source, path);
    if (m.not_before_ms > 0 && m.not_after_ms >= m.not_before_ms)
      m.duration_s = (m.not_after_ms - m.not_before_ms) / 1000;
    m.description = text_field(e, "Description", source, path);
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// An RFC 3339 member in ms since the epoch; 0 when absent or empty.
std::int64_t rfc3339_field(const core::Value& m, std::string_view key, std::string_view source,
                           const std::string& path) {
  const std::string text = text_field(m, key, source, path);
  if (text.empty()) return 0;
  auto t = core::Timestamp::try_parse_rfc3339(text);
  if (!t)
    core::fail_field(source, path + "." + std::string(key),
                     core::quoted(text) + " is not an RFC 3339 time",
                     "expected e.g. \"2024-12-01T19:00:01Z\"");
  return t->seconds * 1000;
}

constexpr std::string_view kGcpEventValues =
    "expected NONE, MIGRATE_ON_HOST_MAINTENANCE or TERMINATE_ON_HOST_MAINTENANCE";

}  // namespace

std::vector<MaintenanceEvent> parse_gcp_maintenance(std::string_view maintenance_event,
                                                    std::string_view upcoming,
                                                    std::string_view source) {
  std::vector<MaintenanceEvent> out;
  // instance/maintenance-event: one word, changed about 60 s before the host event starts and
  // kept while it lasts.
  const std::string_view word = core::trim(maintenance_event);
  if (word.empty()) core::fail_field(source, "maintenance-event", "is empty", kGcpEventValues);
  if (word == "MIGRATE_ON_HOST_MAINTENANCE" || word == "TERMINATE_ON_HOST_MAINTENANCE") {
    MaintenanceEvent m;
    m.id = "maintenance-event";
    m.type = std::string(word);
    m.status = "Started";
    m.description = word == "MIGRATE_ON_HOST_MAINTENANCE"
                        ? "live migration to another host within 60 s"
                        : "the host's maintenance stops this VM within 60 s";
    out.push_back(std::move(m));
  } else if (word != "NONE") {
    core::fail_field(source, "maintenance-event", core::quoted(word) + " is not a known value",
                     kGcpEventValues);
  }

  // instance/upcoming-maintenance?alt=json: the scheduled window, if any.
  const std::string_view body = core::trim(upcoming);
  if (body.empty() || body == "NONE") return out;
  const core::Value doc = core::parse_json(body, std::string(source) + " upcoming-maintenance");
  if (!doc.is_map())
    core::fail_field(source, "upcoming-maintenance",
                     "is " + core::describe_value(doc) + ", not an object",
                     "expected {\"maintenance_status\": \"PENDING\", \"window_start_time\": ...} "
                     "or {} when nothing is scheduled");
  const core::Value* notice = &doc;
  std::string path = "upcoming-maintenance.";
  // The documentation shows the notice under "Upcoming maintenance"; accept both shapes.
  if (const core::Value* inner = doc.find("Upcoming maintenance");
      inner != nullptr && doc.size() == 1) {
    if (!inner->is_map())
      core::fail_field(source, "upcoming-maintenance.Upcoming maintenance",
                       "is " + core::describe_value(*inner) + ", not an object",
                       "expected the notice's fields (window_start_time, maintenance_status, ...)");
    notice = inner;
    path = "upcoming-maintenance.Upcoming maintenance.";
  }
  const bool has_notice =
      notice->find("window_start_time") != nullptr || notice->find("maintenance_status") != nullptr;
  if (!has_notice) {
    // {} is "nothing scheduled"; before its first notice the server answers {"error": "no
    // notifications have been received yet, try again later"}, which is the same.
    if (notice->size() == 0 || (notice->size() == 1 && notice->find("error") != nullptr &&
                                notice->find("error")->is_string()))
      return out;
    std::string keys;
    for (const auto& e : notice->as_map()) keys += (keys.empty() ? "" : ", ") + e.key;
    core::fail_field(source, "upcoming-maintenance",
                     "has neither window_start_time nor maintenance_status (fields: " + keys + ")",
                     "expected the metadata server's notice, or {} when nothing is scheduled");
  }
  const std::string where = path.substr(0, path.size() - 1);
  MaintenanceEvent m;
  m.id = "upcoming-maintenance";
  m.type = text_field(*notice, "type", source, where);
  const std::string status = text_field(*notice, "maintenance_status", source, where);
  if (status.empty() || status == "PENDING") {
    m.status = "Scheduled";
  } else if (status == "ONGOING") {
    m.status = "Started";
  } else if (status == "COMPLETE") {
    m.status = "Completed";
  } else {
    core::fail_field(source, path + "maintenance_status", core::quoted(status) + " is not known",
                     "expected PENDING, ONGOING or COMPLETE");
  }
  m.not_before_ms = rfc3339_field(*notice, "window_start_time", source, where);
  m.not_after_ms = rfc3339_field(*notice, "window_end_time", source, where);
  if (m.not_before_ms > 0 && m.not_after_ms >= m.not_before_ms)
    m.duration_s = (m.not_after_ms - m.not_before_ms) / 1000;
  const std::int64_t latest = rfc3339_field(*notice, "latest_window_start_time", source, where);
  std::string reasons;
  if (const core::Value* r = notice->find("maintenance_reasons"); r != nullptr && !r->is_null()) {
    if (!r->is_list())
      core::fail_field(source, path + "maintenance_reasons",
                       "is " + core::describe_value(*r) + ", not a list", "a list of reasons");
    for (const auto& x : r->as_list()) {
      if (!x.is_string())
        core::fail_field(source, path + "maintenance_reasons",
                         "holds " + core::describe_value(x) + ", not a string",
                         "reasons are words like PLANNED_UPDATE");
      reasons += (reasons.empty() ? "" : ", ") + x.as_string();
    }
  }
  bool reschedule = false;
  if (const core::Value* c = notice->find("can_reschedule"); c != nullptr && !c->is_null()) {
    // The metadata server writes it as a string ("true"), the Compute API as a bool.
    if (c->is_bool()) {
      reschedule = c->as_bool();
    } else if (c->is_string() && (c->as_string() == "true" || c->as_string() == "false")) {
      reschedule = c->as_string() == "true";
    } else {
      core::fail_field(source, path + "can_reschedule",
                       core::describe_value(*c) + " is not true or false",
                       "expected true, false, \"true\" or \"false\"");
    }
  }
  if (!reasons.empty()) m.description = reasons;
  if (reschedule)
    m.description += std::string(m.description.empty() ? "" : "; ") +
                     "can be started early (gcloud compute instances "
                     "perform-maintenance)";
  if (latest > 0)
    m.description +=
        std::string(m.description.empty() ? "" : "; ") + "starts by " + at_text(latest);
  out.push_back(std::move(m));
  return out;
}

MaintenanceProvider simulator_maintenance_provider(const agent::NodeContext& node) {
  const std::string path = node.host_path(kSimScheduledEventsPath).string();
  MaintenanceProvider p;
  p.name = "simulator";
  p.fetch = [path]() -> std::string {
    std::error_code ec;
    if (!fs::exists(path, ec)) return "";
    core::InputLimits limits;
    limits.max_bytes = kMaxDocument;
    return core::read_file(path, limits);
  };
  p.parse = [path](std::string_view text) { return parse_azure_scheduled_events(text, path); };
  return p;
}

MaintenanceProvider azure_maintenance_provider(std::string endpoint,
                                               std::chrono::milliseconds timeout) {
  MaintenanceProvider p;
  p.name = "azure";
  const std::string url = endpoint + "/metadata/scheduledevents?api-version=2020-07-01";
  p.fetch = [url, timeout] {
    MetadataRequest r;
    r.url = url;
    r.headers = {"Metadata: true"};
    r.timeout = timeout;
    r.max_bytes = kMaxDocument;
    return metadata_request(r);
  };
  p.parse = [url](std::string_view text) { return parse_azure_scheduled_events(text, url); };
  return p;
}

MaintenanceProvider aws_maintenance_provider(std::string endpoint,
                                             std::chrono::milliseconds timeout) {
  MaintenanceProvider p;
  p.name = "aws";
  const std::string url = endpoint + "/latest/meta-data/events/maintenance/scheduled";
  p.fetch = [endpoint, url, timeout] {
    // IMDSv2: a session token first (a PUT, which a forwarded request cannot make).
    MetadataRequest t;
    t.method = "PUT";
    t.url = endpoint + "/latest/api/token";
    t.headers = {"X-aws-ec2-metadata-token-ttl-seconds: 300"};
    t.timeout = timeout;
    t.max_bytes = 4096;
    const std::string token = metadata_request(t);
    MetadataRequest r;
    r.url = url;
    r.headers = {"X-aws-ec2-metadata-token: " + token};
    r.timeout = timeout;
    r.max_bytes = kMaxDocument;
    r.not_found_is_empty = true;  // no events: the path does not exist
    return metadata_request(r);
  };
  p.parse = [url](std::string_view text) { return parse_aws_scheduled_events(text, url); };
  return p;
}

MaintenanceProvider gcp_maintenance_provider(std::string endpoint,
                                             std::chrono::milliseconds timeout) {
  MaintenanceProvider p;
  p.name = "gcp";
  const std::string event_url = endpoint + "/computeMetadata/v1/instance/maintenance-event";
  const std::string upcoming_url =
      endpoint + "/computeMetadata/v1/instance/upcoming-maintenance?alt=json";
  // One document for the monitor: both answers, parsed together.
  p.fetch = [event_url, upcoming_url, timeout] {
    MetadataRequest r;
    r.url = event_url;
    r.headers = {"Metadata-Flavor: Google"};
    r.timeout = timeout;
    r.max_bytes = 4096;
    core::Value both = core::Value::map();
    both["maintenance-event"] = metadata_request(r);
    r.url = upcoming_url;
    r.max_bytes = kMaxDocument;
    r.not_found_is_empty = true;  // a machine type without announced windows has no such key
    both["upcoming-maintenance"] = metadata_request(r);
    return core::to_json(both);
  };
  p.parse = [endpoint](std::string_view text) {
    const core::Value both = core::parse_json(text, "gcp metadata");
    return parse_gcp_maintenance(both.get_string({"maintenance-event"}),
                                 both.get_string({"upcoming-maintenance"}),
                                 endpoint + "/computeMetadata/v1/instance");
  };
  return p;
}

MaintenanceProvider maintenance_provider(std::string_view name, const agent::NodeContext& node,
                                         const std::string& endpoint) {
  if (name == "simulator") return simulator_maintenance_provider(node);
  const std::string base = endpoint.empty() ? "http://169.254.169.254" : endpoint;
  if (name == "azure") return azure_maintenance_provider(base);
  if (name == "aws") return aws_maintenance_provider(base);
  if (name == "gcp")
    return gcp_maintenance_provider(endpoint.empty() ? "http://metadata.google.internal"
                                                     : endpoint);
  throw core::InvalidInput("maintenance provider \"" + std::string(name) +
                           "\" is not known; use azure, aws, gcp or simulator");
}

MaintenanceMonitor::MaintenanceMonitor(const agent::NodeContext& node, MaintenanceProvider provider,
                                       MaintenanceMonitorOptions options)
    : node_(node), provider_(std::move(provider)), options_(std::move(options)) {
  if (!options_.now_ms) options_.now_ms = wall_ms;
  load_state();
}

void MaintenanceMonitor::load_state() {
  const auto path = node_.state_dir / kStateFile;
  std::error_code ec;
  if (node_.state_dir.empty() || !fs::exists(path, ec)) return;
  try {
    core::InputLimits limits;
    limits.max_bytes = std::size_t{1} << 20;
    core::Value v = core::parse_json(core::read_file(path.string(), limits), path.string());
    if (const core::Value* r = v.find("reported"); r != nullptr && r->is_map())
      for (const auto& e : r->as_map())
        if (e.value.is_string()) reported_[e.key] = std::string(e.value.as_string());
  } catch (const std::exception& e) {
    // A damaged state file loses only the memory of what was reported: events still listed
    // are reported again, ended ones may stay Warning until the next event (logged).
    core::log::warn("cloud-maintenance: state file unreadable, starting afresh",
                    {{"file", path.string()}, {"error", e.what()}});
  }
}

void MaintenanceMonitor::save_state() const {
  if (node_.state_dir.empty()) return;
  core::Value v = core::Value::map();
  core::Value r = core::Value::map();
  for (const auto& [entity, key] : reported_) r[entity] = key;
  v["reported"] = std::move(r);
  fs::create_directories(node_.state_dir);
  core::write_file_if_changed((node_.state_dir / kStateFile).string(), core::to_json(v));
}

namespace {

// One health record of the maintenance check; an empty entity speaks for the whole check.
core::Value maintenance_health(const std::string& entity, std::string_view state,
                               std::string_view reason, const std::string& message) {
  core::Value h = core::Value::map();
  h["check"] = kMaintenanceCheck;
  if (!entity.empty()) {
    h["entity"] = entity;
    h["entityKind"] = "Host";
  }
  h["state"] = state;
  h["reason"] = reason;
  h["message"] = message;
  return h;
}

}  // namespace

void MaintenanceMonitor::report(const std::string& entity, std::string_view state,
                                std::string_view reason, const std::string& message,
                                agent::Emitter& out) {
  const std::string key = std::string(state) + "/" + std::string(reason);
  auto it = reported_.find(entity);
  if (it != reported_.end() && it->second == key) return;  // changes only
  out.emit(agent::kHealthKind, maintenance_health(entity, state, reason, message));
  reported_[entity] = key;
}

void MaintenanceMonitor::poll(agent::Emitter& out) {
  std::vector<MaintenanceEvent> events;
  try {
    events = provider_.parse(provider_.fetch());
  } catch (const std::exception& e) {
    // Keep what was reported: a metadata service that is briefly away must not release a
    // node whose maintenance is still ahead.
    if (!unreachable_) {
      out.emit(agent::kHealthKind, maintenance_health("", "Unknown", "ProviderUnreachable",
                                                      provider_.name + ": " + e.what()));
      unreachable_ = true;
    }
    return;
  }
  unreachable_ = false;
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.not_before_ms, a.id) < std::tie(b.not_before_ms, b.id);
  });
  if (events.size() > options_.max_events) events.resize(options_.max_events);

  const std::int64_t now = options_.now_ms();
  const std::int64_t lead_ms = options_.lead.count() * 1000;
  std::map<std::string, bool> listed;
  for (const MaintenanceEvent& e : events) {
    listed[e.id] = true;
    std::string what = e.type.empty() ? "maintenance" : e.type;
    if (!e.description.empty()) what += " (" + e.description + ")";
    const std::string window =
        e.not_before_ms > 0
            ? " at " + at_text(e.not_before_ms) +
                  (e.duration_s >= 0
                       ? " for " + core::format_duration(std::chrono::seconds(e.duration_s))
                       : "")
            : "";
    if (e.status == "Completed" || e.status == "Canceled") {
      if (reported_.contains(e.id))
        report(e.id, "Healthy",
               e.status == "Completed" ? "MaintenanceCompleted" : "MaintenanceCanceled",
               what + " " + (e.status == "Completed" ? "completed" : "canceled"), out);
      continue;
    }
    const bool started = e.status == "Started" || (e.not_before_ms > 0 && e.not_before_ms <= now);
    if (started) {
      report(e.id, "Warning", "MaintenanceInProgress", what + " in progress" + window, out);
    } else if (e.not_before_ms == 0 || e.not_before_ms - now <= lead_ms) {
      report(e.id, "Warning", "MaintenanceScheduled",
             what + window + " (" + in_words(e.not_before_ms - now) + ")", out);
    } else {
      report(e.id, "Healthy", "MaintenanceUpcoming",
             what + window + " (" + in_words(e.not_before_ms - now) + ")", out);
    }
  }
  // Gone from the document: over (the providers drop an event once it completed).
  for (auto it = reported_.begin(); it != reported_.end();) {
    if (listed.contains(it->first)) {
      ++it;
      continue;
    }
    const bool was_done = it->second.starts_with("Healthy/MaintenanceCompleted") ||
                          it->second.starts_with("Healthy/MaintenanceCanceled");
    if (!was_done)
      out.emit(agent::kHealthKind,
               maintenance_health(it->first, "Healthy", "MaintenanceCompleted",
                                  "maintenance " + it->first + " is no longer scheduled"));
    it = reported_.erase(it);
  }
  save_state();
}

std::unique_ptr<agent::Monitor> make_maintenance_monitor(const agent::NodeContext& node) {
  const bool simulated = !node.host_root.empty() && node.host_root != "/";
  const std::string name = env_or("GPUFLEET_MAINTENANCE_PROVIDER", simulated ? "simulator" : "");
  if (name.empty()) {
    // Not every cluster runs in a cloud: off unless a provider is named (the agent runs every
    // registered monitor by default).
    core::log::info(
        "cloud-maintenance: off (no provider: set GPUFLEET_MAINTENANCE_PROVIDER to "
        "azure, aws or gcp; chart value agent.maintenance.provider)",
        {{"node", node.identity.node_name}});
    return nullptr;
  }
  MaintenanceMonitorOptions o;
  auto duration = [](const char* var, std::chrono::milliseconds fallback) {
    const std::string text = env_or(var, "");
    if (text.empty()) return fallback;
    auto d = core::try_parse_duration(text);
    if (!d || *d <= std::chrono::nanoseconds::zero())
      throw core::InvalidInput(std::string(var) + " \"" + text +
                               "\" is not a positive duration (e.g. 30s, 1h)");
    return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  };
  o.interval = duration("GPUFLEET_MAINTENANCE_INTERVAL",
                        simulated ? std::chrono::seconds(1) : std::chrono::seconds(30));
  o.lead = std::chrono::duration_cast<std::chrono::seconds>(
      duration("GPUFLEET_MAINTENANCE_LEAD", std::chrono::hours(1)));
  return std::make_unique<MaintenanceMonitor>(
      node, maintenance_provider(name, node, env_or("GPUFLEET_MAINTENANCE_ENDPOINT", "")), o);
}

}  // namespace gpufleet::sentinel
