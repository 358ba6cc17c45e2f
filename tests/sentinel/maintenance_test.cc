#include "sentinel/maintenance.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "agent/nodehealth.h"
#include "core/errors.h"
#include "core/http_server.h"
#include "core/json.h"
#include "core/time.h"
#include "core/yaml.h"
#include "sim/fault.h"
#include "sim/fleet_spec.h"
#include "sim/node_model.h"
#include "support/source_paths.h"

namespace gpufleet::sentinel {
namespace {

namespace fs = std::filesystem;

// The documents as the providers publish them (Azure IMDS Scheduled Events, api-version
// 2020-07-01; EC2 instance metadata events/maintenance/scheduled).
constexpr std::string_view kAzure = R"({
  "DocumentIncarnation": 3,
  "Events": [
    {"EventId": "602d9444-d2cd-49c7-8624-8643e7171297", "EventType": "Reboot",
     "ResourceType": "VirtualMachine", "Resources": ["gpu-node-7"], "EventStatus": "Scheduled",
     "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "Description": "Host server is undergoing maintenance.",
     "EventSource": "Platform", "DurationInSeconds": 600},
    {"EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "EventType": "Freeze",
     "ResourceType": "VirtualMachine", "Resources": ["gpu-node-7"], "EventStatus": "Started",
     "NotBefore": "", "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}
  ]
})";
constexpr std::string_view kAws = R"([
  {"NotBefore": "21 Jan 2019 09:00:43 GMT", "Code": "system-reboot",
   "Description": "scheduled reboot", "EventId": "instance-event-0d59937288b749b32",
   "NotAfter": "21 Jan 2019 09:17:23 GMT", "State": "active"},
  {"NotBefore": "01 Jan 2019 09:00:00 GMT", "Code": "instance-stop",
   "Description": "[Completed] instance stop", "EventId": "instance-event-1",
   "NotAfter": "01 Jan 2019 10:00:00 GMT", "State": "completed"}
])";

std::int64_t ms_of(std::string_view http_date) {
  return core::Timestamp::try_parse_http_date(http_date)->seconds * 1000;
}

TEST(MaintenanceParse, AzureScheduledEvents) {
  auto events = parse_azure_scheduled_events(kAzure, "imds");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "602d9444-d2cd-49c7-8624-8643e7171297");
  EXPECT_EQ(events[0].type, "Reboot");
  EXPECT_EQ(events[0].status, "Scheduled");
  EXPECT_EQ(events[0].not_before_ms, ms_of("Mon, 19 Sep 2016 18:29:47 GMT"));
  EXPECT_EQ(events[0].duration_s, 600);
  EXPECT_EQ(events[0].not_after_ms, events[0].not_before_ms + 600'000);
  EXPECT_EQ(events[1].status, "Started");
  EXPECT_EQ(events[1].not_before_ms, 0);
  EXPECT_EQ(events[1].duration_s, -1);
  EXPECT_TRUE(parse_azure_scheduled_events("", "imds").empty());
  EXPECT_TRUE(
      parse_azure_scheduled_events(R"({"DocumentIncarnation": 1, "Events": []})", "imds").empty());
}

TEST(MaintenanceParse, AwsScheduledEvents) {
  auto events = parse_aws_scheduled_events(kAws, "imds");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "instance-event-0d59937288b749b32");
  EXPECT_EQ(events[0].type, "system-reboot");
  EXPECT_EQ(events[0].status, "Scheduled");
  EXPECT_EQ(events[0].duration_s, 1000);  // 09:00:43 .. 09:17:23
  EXPECT_EQ(events[1].status, "Completed");
  EXPECT_TRUE(parse_aws_scheduled_events("[]", "imds").empty());
}

TEST(MaintenanceParse, BadDocumentsNameTheField) {
  auto message = [](auto parse, std::string_view text) {
    try {
      parse(text, "imds");
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto azure = [](std::string_view t, std::string_view s) { parse_azure_scheduled_events(t, s); };
  auto aws = [](std::string_view t, std::string_view s) { parse_aws_scheduled_events(t, s); };
  EXPECT_NE(message(azure, "{not json").find("imds"), std::string::npos);
  EXPECT_NE(message(azure, "[]").find("not an object"), std::string::npos);
  EXPECT_NE(message(azure, R"({"Events": {}})").find("Events"), std::string::npos);
  EXPECT_NE(message(azure, R"({"Events": [{"EventType": "Reboot"}]})").find("Events[0].EventId"),
            std::string::npos);
  EXPECT_NE(message(azure, R"({"Events": [{"EventId": "a", "NotBefore": "tomorrow"}]})")
                .find("Events[0].NotBefore: \"tomorrow\" is not an HTTP date"),
            std::string::npos);
  EXPECT_NE(message(azure, R"({"Events": [{"EventId": "a", "DurationInSeconds": "10"}]})")
                .find("DurationInSeconds"),
            std::string::npos);
  EXPECT_NE(message(aws, "{}").find("not a list"), std::string::npos);
  EXPECT_NE(message(aws, R"([{"EventId": 7}])").find("[0].EventId"), std::string::npos);
}

struct Collect final : agent::Emitter {
  std::vector<core::Value> health;
  void emit(std::string_view kind, const core::Value& payload) override {
    if (kind == agent::kHealthKind) health.push_back(payload);
  }
  std::string last(std::string_view entity) const {
    for (auto it = health.rbegin(); it != health.rend(); ++it)
      if (it->get_string({"entity"}) == entity)
        return std::string(it->get_string({"state"})) + "/" +
               std::string(it->get_string({"reason"}));
    return "";
  }
};

class MaintenanceMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sentinel-maint-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    node_.state_dir = dir_;
    opts_.lead = std::chrono::seconds(600);
    opts_.now_ms = [this] { return now_; };
  }
  void TearDown() override { fs::remove_all(dir_); }
  MaintenanceProvider provider() {
    MaintenanceProvider p;
    p.name = "test";
    p.fetch = [this] {
      if (down_) throw std::runtime_error("connection refused");
      return doc_;
    };
    p.parse = [](std::string_view t) { return parse_azure_scheduled_events(t, "test"); };
    return p;
  }
  void schedule(std::string_view status, std::int64_t not_before_ms) {
    doc_ = R"({"DocumentIncarnation": 1, "Events": [{"EventId": "ev-1", "EventType": "Reboot", )"
           R"("EventStatus": ")" +
           std::string(status) + R"(", "NotBefore": ")" +
           (not_before_ms > 0 ? core::Timestamp{not_before_ms / 1000, 0}.to_http_date() : "") +
           R"(", "DurationInSeconds": 300}]})";
  }

  fs::path dir_;
  agent::NodeContext node_;
  MaintenanceMonitorOptions opts_;
  std::int64_t now_ = 1'700'000'000'000;
  std::string doc_;
  bool down_ = false;
};

TEST_F(MaintenanceMonitorTest, ReportsAheadOfTheWindowThenInProgressThenCompleted) {
  MaintenanceMonitor m(node_, provider(), opts_);
  Collect out;
  m.poll(out);
  EXPECT_TRUE(out.health.empty());  // nothing scheduled: nothing to say

  schedule("Scheduled", now_ + 3600'000);  // an hour ahead, lead is 10 minutes
  m.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Healthy/MaintenanceUpcoming");
  const std::size_t n = out.health.size();
  m.poll(out);
  EXPECT_EQ(out.health.size(), n);  // changes only

  now_ += 3000'000;  // 10 minutes before the window
  m.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Warning/MaintenanceScheduled");
  EXPECT_NE(std::string(out.health.back().get_string({"message"})).find("Reboot at "),
            std::string::npos)
      << core::to_json(out.health.back());
  EXPECT_EQ(out.health.back().get_string({"check"}), "maintenance");
  EXPECT_EQ(out.health.back().get_string({"entityKind"}), "Host");

  schedule("Started", 0);
  m.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Warning/MaintenanceInProgress");

  doc_ = R"({"DocumentIncarnation": 2, "Events": []})";
  m.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Healthy/MaintenanceCompleted");
  const std::size_t after = out.health.size();
  m.poll(out);
  EXPECT_EQ(out.health.size(), after);  // reported once
}

TEST_F(MaintenanceMonitorTest, WindowOpeningWithoutAStatusChangeIsInProgress) {
  MaintenanceMonitor m(node_, provider(), opts_);
  Collect out;
  schedule("Scheduled", now_ + 60'000);
  m.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Warning/MaintenanceScheduled");
  now_ += 61'000;  // the provider has not said Started yet; the window is open
  m.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Warning/MaintenanceInProgress");
}

TEST_F(MaintenanceMonitorTest, AnEventThatEndedWhileTheAgentWasDownIsStillCompleted) {
  {
    MaintenanceMonitor m(node_, provider(), opts_);
    Collect out;
    schedule("Scheduled", now_ + 60'000);
    m.poll(out);
    EXPECT_EQ(out.last("ev-1"), "Warning/MaintenanceScheduled");
  }
  doc_.clear();  // over by the time the agent is back
  MaintenanceMonitor restarted(node_, provider(), opts_);
  Collect out;
  restarted.poll(out);
  EXPECT_EQ(out.last("ev-1"), "Healthy/MaintenanceCompleted");
}

TEST_F(MaintenanceMonitorTest, AnUnreachableProviderKeepsTheStateAndSaysSoOnce) {
  MaintenanceMonitor m(node_, provider(), opts_);
  Collect out;
  schedule("Scheduled", now_ + 60'000);
  m.poll(out);
  down_ = true;
  m.poll(out);
  m.poll(out);
  ASSERT_EQ(out.health.size(), 2u);
  EXPECT_EQ(out.health.back().get_string({"state"}), "Unknown");
  EXPECT_EQ(out.health.back().get_string({"reason"}), "ProviderUnreachable");
  EXPECT_EQ(out.health.back().find("entity"), nullptr);
  EXPECT_NE(std::string(out.health.back().get_string({"message"})).find("connection refused"),
            std::string::npos);
  down_ = false;
  m.poll(out);
  EXPECT_EQ(out.health.size(), 2u);           // ev-1 unchanged: still Warning, nothing new
  doc_ = "{\"Events\": [{\"EventId\": 5}]}";  // a broken document is the provider's fault too
  m.poll(out);
  EXPECT_EQ(out.health.back().get_string({"reason"}), "ProviderUnreachable");
}

TEST(MaintenanceHttp, AzureProviderAgainstALoopbackMetadataService) {
  core::HttpServerOptions o;
  o.registry = nullptr;
  o.handlers["/metadata/scheduledevents"] = [] {
    core::HttpResponse r;
    r.content_type = "application/json";
    r.body = std::string(kAzure);
    return r;
  };
  core::HttpServer server(o);
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  MaintenanceProvider azure = azure_maintenance_provider(base);
  auto events = azure.parse(azure.fetch());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].type, "Freeze");

  // EC2's IMDSv2 begins with a PUT for a token; this server answers 405: a clear failure.
  MaintenanceProvider aws = aws_maintenance_provider(base);
  try {
    aws.fetch();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/latest/api/token: HTTP status 405"), std::string::npos)
        << e.what();
  }
  // Nothing listening: the URL and the reason, within the timeout.
  MaintenanceProvider gone =
      azure_maintenance_provider("http://127.0.0.1:1", std::chrono::milliseconds(500));
  EXPECT_THROW(gone.fetch(), std::runtime_error);
}

// GCE's metadata server (docs.cloud.google.com/ai-hypercomputer/docs/manage/host-events,
// "View the maintenance state"; cloud.google.com/compute/docs/metadata/
// getting-live-migration-notice): instance/maintenance-event is one word, instance/
// upcoming-maintenance?alt=json the scheduled window ({} when none).
constexpr std::string_view kGcpUpcoming = R"({
  "can_reschedule": "true",
  "latest_window_start_time": "2024-12-01T19:00:01Z",
  "maintenance_reasons": ["PLANNED_UPDATE", "PLANNED_NETWORK_UPDATE"],
  "maintenance_status": "PENDING",
  "type": "SCHEDULED",
  "window_end_time": "2024-12-01T21:00:01Z",
  "window_start_time": "2024-12-01T19:00:01Z"
})";

std::int64_t rfc_ms(std::string_view t) { return core::Timestamp::parse_rfc3339(t).seconds * 1000; }

TEST(MaintenanceParse, GcpMaintenanceEventAndUpcomingWindow) {
  EXPECT_TRUE(parse_gcp_maintenance("NONE", "", "mds").empty());
  EXPECT_TRUE(parse_gcp_maintenance("NONE\n", "{ }", "mds").empty());
  // Before its first notice the server answers with an error object: nothing scheduled.
  EXPECT_TRUE(parse_gcp_maintenance(
                  "NONE",
                  R"({ "error": "no notifications have been received yet, try again later" })",
                  "mds")
                  .empty());

  auto events = parse_gcp_maintenance("NONE", kGcpUpcoming, "mds");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, "upcoming-maintenance");
  EXPECT_EQ(events[0].type, "SCHEDULED");
  EXPECT_EQ(events[0].status, "Scheduled");
  EXPECT_EQ(events[0].not_before_ms, rfc_ms("2024-12-01T19:00:01Z"));
  EXPECT_EQ(events[0].not_after_ms, rfc_ms("2024-12-01T21:00:01Z"));
  EXPECT_EQ(events[0].duration_s, 7200);
  EXPECT_NE(events[0].description.find("PLANNED_UPDATE, PLANNED_NETWORK_UPDATE"),
            std::string::npos);
  EXPECT_NE(events[0].description.find("perform-maintenance"), std::string::npos);
  EXPECT_NE(events[0].description.find("starts by 2024-12-01T19:00:01Z"), std::string::npos);

  // The shape the documentation prints (under "Upcoming maintenance"), ONGOING, and the
  // imminent event as well: two entities.
  std::string wrapped = R"({"Upcoming maintenance": )" + std::string(kGcpUpcoming) + "}";
  const auto pos = wrapped.find("PENDING");
  wrapped.replace(pos, 7, "ONGOING");
  events = parse_gcp_maintenance("TERMINATE_ON_HOST_MAINTENANCE", wrapped, "mds");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "maintenance-event");
  EXPECT_EQ(events[0].type, "TERMINATE_ON_HOST_MAINTENANCE");
  EXPECT_EQ(events[0].status, "Started");
  EXPECT_EQ(events[1].id, "upcoming-maintenance");
  EXPECT_EQ(events[1].status, "Started");

  events = parse_gcp_maintenance(" MIGRATE_ON_HOST_MAINTENANCE ", "{}", "mds");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].description.find("live migration"), std::string::npos);
  EXPECT_EQ(parse_gcp_maintenance("NONE", R"({"maintenance_status": "COMPLETE"})", "mds")[0].status,
            "Completed");
}

TEST(MaintenanceParse, GcpHostileAnswersNameTheFieldTheValueAndTheFix) {
  auto message = [](std::string_view event, std::string_view upcoming) {
    try {
      parse_gcp_maintenance(event, upcoming, "mds");
    } catch (const core::InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("REBOOT_SOON", ""),
            "mds: maintenance-event: \"REBOOT_SOON\" is not a known value (expected NONE, "
            "MIGRATE_ON_HOST_MAINTENANCE or TERMINATE_ON_HOST_MAINTENANCE)");
  EXPECT_EQ(message("", ""),
            "mds: maintenance-event: is empty (expected NONE, MIGRATE_ON_HOST_MAINTENANCE or "
            "TERMINATE_ON_HOST_MAINTENANCE)");
  EXPECT_NE(message("NONE", "{\"window_start_time\": ").find("mds upcoming-maintenance"),
            std::string::npos);
  EXPECT_NE(message("NONE", "[\"some event\"]")
                .find("mds: upcoming-maintenance: is a list, not an object (expected"),
            std::string::npos)
      << message("NONE", "[\"some event\"]");
  EXPECT_NE(message("NONE", R"({"maintenance_status": "SOON"})")
                .find("upcoming-maintenance.maintenance_status: \"SOON\" is not known (expected "
                      "PENDING, ONGOING or COMPLETE)"),
            std::string::npos);
  EXPECT_NE(message("NONE", R"({"maintenance_status": "PENDING", "window_start_time": "tomorrow"})")
                .find("upcoming-maintenance.window_start_time: \"tomorrow\" is not an RFC 3339 "
                      "time (expected e.g. \"2024-12-01T19:00:01Z\")"),
            std::string::npos);
  EXPECT_NE(message("NONE", R"({"window_start_time": 17})")
                .find("upcoming-maintenance.window_start_time: is 17, not a string"),
            std::string::npos)
      << message("NONE", R"({"window_start_time": 17})");
  EXPECT_NE(message("NONE", R"({"windowStartTime": "2024-12-01T19:00:01Z"})")
                .find("has neither window_start_time nor maintenance_status (fields: "
                      "windowStartTime)"),
            std::string::npos);
  EXPECT_NE(message("NONE", R"({"maintenance_status": "PENDING", "can_reschedule": "maybe"})")
                .find("upcoming-maintenance.can_reschedule: \"maybe\" is not true or false"),
            std::string::npos);
  EXPECT_NE(message("NONE", R"({"maintenance_status": "PENDING", "maintenance_reasons": "x"})")
                .find("upcoming-maintenance.maintenance_reasons: is \"x\", not a list"),
            std::string::npos);
}

// The gcp provider against a loopback metadata server: both keys, a 404 for the upcoming key
// (a machine type without announced windows), a metadata server that answers too late.
TEST(MaintenanceHttp, GcpProviderAgainstALoopbackMetadataService) {
  std::mutex mu;
  std::string event = "NONE", upcoming = std::string(kGcpUpcoming);
  int upcoming_status = 200;
  core::HttpServerOptions o;
  o.registry = nullptr;
  o.handlers["/computeMetadata/v1/instance/maintenance-event"] = [&] {
    std::lock_guard lock(mu);
    core::HttpResponse r;
    r.body = event;
    return r;
  };
  o.handlers["/computeMetadata/v1/instance/upcoming-maintenance"] = [&] {
    std::lock_guard lock(mu);
    core::HttpResponse r;
    r.status = upcoming_status;
    r.content_type = "application/json";
    r.body = upcoming_status == 200 ? upcoming : "not found";
    return r;
  };
  core::HttpServer server(o);
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  MaintenanceProvider gcp = gcp_maintenance_provider(base);
  EXPECT_EQ(gcp.name, "gcp");
  auto events = gcp.parse(gcp.fetch());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, "upcoming-maintenance");
  EXPECT_EQ(events[0].not_before_ms, rfc_ms("2024-12-01T19:00:01Z"));

  {
    std::lock_guard lock(mu);
    event = "MIGRATE_ON_HOST_MAINTENANCE";
    upcoming_status = 404;
  }
  events = gcp.parse(gcp.fetch());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, "maintenance-event");

  {
    std::lock_guard lock(mu);
    event = "MAYBE_LATER";
  }
  try {
    (void)gcp.parse(gcp.fetch());
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(base + "/computeMetadata/v1/instance: maintenance-event: "
                                                "\"MAYBE_LATER\" is not a known value"),
              std::string::npos)
        << e.what();
  }

  // By name, as the agent's factory makes it (GPUFLEET_MAINTENANCE_ENDPOINT = base).
  agent::NodeContext node;
  MaintenanceProvider named = maintenance_provider("gcp", node, base);
  EXPECT_EQ(named.name, "gcp");
  try {
    (void)maintenance_provider("oci", node, base);
    FAIL() << "no error";
  } catch (const core::InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              "maintenance provider \"oci\" is not known; use azure, aws, gcp or simulator");
  }
}

TEST(MaintenanceHttp, GcpMetadataServerThatDoesNotAnswerInTimeIsAnError) {
  core::HttpServerOptions o;
  o.registry = nullptr;
  o.handlers["/computeMetadata/v1/instance/maintenance-event"] = [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    core::HttpResponse r;
    r.body = "NONE";
    return r;
  };
  core::HttpServer server(o);
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  MaintenanceProvider gcp = gcp_maintenance_provider(base, std::chrono::milliseconds(300));
  try {
    (void)gcp.fetch();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(base + "/computeMetadata/v1/instance/maintenance-event: "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("imeout"), std::string::npos) << e.what();
  }
}

// The monitor over the gcp provider: the announced window is reported ahead of time, the
// imminent event as in progress, and both as completed once the server clears them.
TEST_F(MaintenanceMonitorTest, GcpWindowAndImminentEventThroughTheMonitor) {
  std::string event = "NONE";
  MaintenanceProvider p;
  p.name = "gcp";
  p.fetch = [this, &event] {
    core::Value both = core::Value::map();
    both["maintenance-event"] = event;
    both["upcoming-maintenance"] = doc_;
    return core::to_json(both);
  };
  p.parse = gcp_maintenance_provider("http://127.0.0.1:1").parse;
  MaintenanceMonitor m(node_, p, opts_);
  Collect out;
  auto window = [&](std::int64_t start_ms, std::string_view status) {
    doc_ = R"({"maintenance_status": ")" + std::string(status) +
           R"(", "type": "SCHEDULED", )"
           R"("window_start_time": ")" +
           core::Timestamp{start_ms / 1000, 0}.to_rfc3339(core::TimestampPrecision::Seconds) +
           R"("})";
  };
  window(now_ + 3600'000, "PENDING");  // an hour ahead, lead 10 minutes
  m.poll(out);
  EXPECT_EQ(out.last("upcoming-maintenance"), "Healthy/MaintenanceUpcoming");
  now_ += 3000'000;
  m.poll(out);
  EXPECT_EQ(out.last("upcoming-maintenance"), "Warning/MaintenanceScheduled");
  EXPECT_NE(std::string(out.health.back().get_string({"message"})).find("SCHEDULED at "),
            std::string::npos)
      << core::to_json(out.health.back());
  event = "TERMINATE_ON_HOST_MAINTENANCE";
  window(now_ + 600'000, "ONGOING");
  m.poll(out);
  EXPECT_EQ(out.last("maintenance-event"), "Warning/MaintenanceInProgress");
  EXPECT_EQ(out.last("upcoming-maintenance"), "Warning/MaintenanceInProgress");
  event = "NONE";
  doc_ = "{}";
  m.poll(out);
  EXPECT_EQ(out.last("maintenance-event"), "Healthy/MaintenanceCompleted");
  EXPECT_EQ(out.last("upcoming-maintenance"), "Healthy/MaintenanceCompleted");
}

TEST(MaintenanceSim, TheSimulatorsDocumentIsReadByTheAzureParser) {
  const sim::FleetSpec fleet =
      sim::load_fleet_file(GPUFLEET_SOURCE_DIR + "/examples/fleet-h100.yaml");
  sim::NodeModel node(fleet, sim::make_node_identity(fleet, 0, 0), 0);
  EXPECT_TRUE(parse_azure_scheduled_events(node.render_scheduled_events(), "sim").empty());
  sim::Fault f = sim::parse_fault(
      core::parse_yaml("{type: maintenance, startsIn: 30s, duration: 20s, kind: Redeploy}"), "t",
      "event");
  node.apply(f, 100);
  auto events = parse_azure_scheduled_events(node.render_scheduled_events(), "sim");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "Redeploy");
  EXPECT_EQ(events[0].status, "Scheduled");
  EXPECT_EQ(events[0].duration_s, 20);
  EXPECT_GT(events[0].not_before_ms, 0);
  EXPECT_FALSE(node.tick(129));
  EXPECT_TRUE(node.tick(130));  // the window opens
  events = parse_azure_scheduled_events(node.render_scheduled_events(), "sim");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status, "Started");
  EXPECT_TRUE(node.tick(150));  // and closes
  EXPECT_TRUE(parse_azure_scheduled_events(node.render_scheduled_events(), "sim").empty());

  node.apply(f, 200);
  node.apply(sim::parse_fault(core::parse_yaml("{type: maintenance, active: false}"), "t", "e"),
             201);
  EXPECT_TRUE(parse_azure_scheduled_events(node.render_scheduled_events(), "sim").empty());
  EXPECT_THROW(sim::parse_fault(core::parse_yaml("{type: maintenance, duration: 0}"), "t", "e"),
               core::InvalidInput);
  EXPECT_THROW(sim::parse_fault(core::parse_yaml("{type: maintenance, gpu: 1}"), "t", "e"),
               core::InvalidInput);
  EXPECT_THROW(sim::parse_fault(core::parse_yaml("{type: maintenance, kind: Nap}"), "t", "e"),
               core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::sentinel
