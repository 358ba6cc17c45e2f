#include "sim/kubelet/container_logs.h"
#include "core/text.h"

#include <charconv>
#include <vector>

#include "sim/kubelet/pod_run.h"

namespace gpufleet::sim {

namespace {

// strconv.ParseBool, which the query decoder uses for booleans.
std::optional<bool> parse_bool(std::string_view v) {
  if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") return true;
  if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" || v == "False")
    return false;
  return std::nullopt;
}

using core::parse_int;

LogAnswer bad(int status, std::string body) { return {status, std::move(body)}; }

const ContainerRun* find_container(const PodRun& run, std::string_view name) {
  for (const auto* list : {&run.main, &run.init})
    for (const auto& c : *list)
      if (c.name == name) return &c;
  return nullptr;
}

// The kubelet's CRI log reader: lines since the time, the last tailLines of them, each
// prefixed with its time when asked, the whole cut at limitBytes.
std::string render(const ContainerLog& log, const LogOptions& o, const core::Timestamp& now) {
  std::optional<core::Timestamp> since = o.since_time;
  if (o.since_seconds) since = now - std::chrono::seconds(*o.since_seconds);
  if (since && log.written < *since) return {};
  std::vector<std::string_view> lines;
  std::string_view rest = log.text;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl == std::string_view::npos ? rest.size() : nl + 1));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  std::size_t first = 0;
  if (o.tail_lines && static_cast<std::size_t>(*o.tail_lines) < lines.size())
    first = lines.size() - static_cast<std::size_t>(*o.tail_lines);
  const std::string stamp =
      o.timestamps ? log.written.to_rfc3339(core::TimestampPrecision::Nanos) + " " : "";
  std::string out;
  for (std::size_t i = first; i < lines.size(); ++i) {
    out += stamp;
    out += lines[i];
    if (out.back() != '\n') out += '\n';  // a CRI log line always ends in one
  }
  if (o.limit_bytes && static_cast<std::size_t>(*o.limit_bytes) < out.size())
    out.resize(static_cast<std::size_t>(*o.limit_bytes));
  return out;
}

}  // namespace

std::optional<LogAnswer> parse_log_options(
    const std::map<std::string, std::string, std::less<>>& query, LogOptions& out) {
  const LogAnswer undecodable = bad(400, R"({"message": "Unable to decode query."})");
  const LogAnswer invalid = bad(422, R"({"message": "Invalid request."})");
  out = {};
  for (const auto& [key, value] : query) {
    if (key == "follow" || key == "previous" || key == "timestamps" ||
        key == "insecureSkipTLSVerifyBackend") {
      auto b = parse_bool(value);
      if (!b) return undecodable;
      if (key == "follow") out.follow = *b;
      if (key == "previous") out.previous = *b;
      if (key == "timestamps") out.timestamps = *b;
    } else if (key == "sinceSeconds" || key == "tailLines" || key == "limitBytes" ||
               key == "tail") {
      std::optional<std::int64_t> n;
      // The old "tail" parameter: "all" is the same as leaving it out.
      if (key == "tail" && value == "all") continue;
      n = parse_int(value);
      if (!n) return undecodable;
      if (key == "sinceSeconds") out.since_seconds = n;
      if (key == "tailLines" || key == "tail") out.tail_lines = n;
      if (key == "limitBytes") out.limit_bytes = n;
    } else if (key == "sinceTime") {
      auto t = core::Timestamp::try_parse_rfc3339(value);
      if (!t) return undecodable;
      out.since_time = t;
    } else if (key == "stream") {
      if (value != "All") {
        return bad(400, "unable to return the given log stream: \"" + value +
                            "\". Please enable PodLogsQuerySplitStreams feature gate in kubelet");
      }
    }
    // Any other key is ignored, as the query decoder ignores unknown parameters.
  }
  // ValidatePodLogOptions.
  if ((out.tail_lines && *out.tail_lines < 0) || (out.limit_bytes && *out.limit_bytes < 1) ||
      (out.since_seconds && *out.since_seconds < 1) || (out.since_seconds && out.since_time)) {
    return invalid;
  }
  return std::nullopt;
}

bool split_log_path(std::string_view path, std::string& ns, std::string& pod,
                    std::string& container, LogAnswer& error) {
  constexpr std::string_view kPrefix = "/containerLogs/";
  if (path.starts_with(kPrefix)) path.remove_prefix(kPrefix.size());
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    auto slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  parts.resize(3);
  ns = parts[0];
  pod = parts[1];
  container = parts[2];
  if (pod.empty())
    error = bad(400, R"({"message": "Missing podID."})");
  else if (container.empty())
    error = bad(400, R"({"message": "Missing container name."})");
  else if (ns.empty())
    error = bad(400, R"({"message": "Missing podNamespace."})");
  else
    return true;
  return false;
}

LogAnswer container_log(const PodRun& run, std::string_view container, const LogOptions& options,
                        const core::Timestamp& now) {
  const std::string c_name(container);
  const ContainerRun* c = find_container(run, container);
  if (c == nullptr)
    return bad(404, "container \"" + c_name + "\" not found in pod \"" + run.name + "\"");
  // validateContainerLogStatus: which instance, by the container's state.
  const std::string in = "container \"" + c_name + "\" in pod \"" + run.name + "\"";
  std::string id;
  if (options.previous) {
    if (!c->last_state || c->last_state->container_id.empty())
      return bad(400, "previous terminated " + in + " not found");
    id = c->last_state->container_id;
  } else if (c->state == ContainerState::Running) {
    id = run.container_id(*c, c->instances - 1);
  } else if (c->state == ContainerState::Terminated && c->terminated) {
    id = c->terminated->container_id;
  } else if (c->last_state) {
    id = c->last_state->container_id;
  } else {
    std::string reason = c->waiting_reason;
    if (reason.empty()) reason = run.init.empty() ? "ContainerCreating" : "PodInitializing";
    return bad(400, in + " is waiting to start: " + reason);
  }
  for (const ContainerLog& log : c->logs)
    if (log.container_id == id) return {200, render(log, options, now)};
  return {200, ""};  // an instance that wrote nothing (yet)
}

}  // namespace gpufleet::sim
