// Informer list/watch/resume/relist logic and its threading (run under TSan too), against a
// scripted loopback server; the same behaviour against kube-apiserver is in
// tests/integration/kube/informer_test.cc.
#include "kube/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "scripted_server.h"

namespace gpufleet::kube {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::response;
using testing::ScriptedServer;
using testing::stream;

std::string cm(const std::string& name, const std::string& rv, const std::string& v) {
  return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
         R"(","namespace":"x","resourceVersion":")" + rv + R"("},"data":{"v":")" + v + R"("}})";
}

std::string list(const std::string& rv, const std::vector<std::string>& items) {
  std::string body =
      R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":")" + rv +
      R"("},"items":[)";
  for (std::size_t i = 0; i < items.size(); ++i) body += (i ? "," : "") + items[i];
  return response(200, "OK", body + "]}");
}

std::string event(const std::string& type, const std::string& obj) {
  return R"({"type":")" + type + R"(","object":)" + obj + "}";
}

// Plain and compact caches behave the same to handlers and readers.
class InformerUnitBothForms : public ::testing::TestWithParam<bool> {};

TEST_P(InformerUnitBothForms, ListWatchResumeFromBookmarkRelistOnGone) {
  ScriptedServer server({
      list("10", {cm("a", "5", "1"), cm("b", "6", "1")}),
      stream(
          {event("ADDED", cm("c", "11", "1")), event("MODIFIED", cm("a", "12", "2")),
           event("DELETED", cm("b", "13", "1")),
           R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"14"}}})"}),
      response(
          410, "Gone",
          R"json({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 14 (20)","reason":"Expired","code":410})json"),
      list("20", {cm("a", "12", "2"), cm("c", "11", "1"), cm("d", "15", "1")}),
  });
  ClientConfig c;
  c.server = server.url();
  c.allow_plain_http_loopback = true;
  c.qps = 0;
  Client client(c);
  InformerOptions o;
  o.resource = resources::config_maps();
  o.namespace_ = "x";
  o.backoff_base = 20ms;
  o.backoff_max = 100ms;
  o.compact = GetParam();
  Informer inf(client, o);
  inf.add_index(kNamespaceIndex, index_by_namespace);
  std::mutex mu;
  std::vector<std::string> log;
  EventHandlers h;
  h.on_add = [&](const core::Value& obj) {
    std::lock_guard lock(mu);
    log.push_back("add " + std::string(name_of(obj)));
  };
  h.on_update = [&](const core::Value&, const core::Value& obj) {
    std::lock_guard lock(mu);
    log.push_back("update " + std::string(name_of(obj)) + "@" +
                  std::string(resource_version_of(obj)));
  };
  h.on_delete = [&](const core::Value& obj, bool unknown) {
    std::lock_guard lock(mu);
    log.push_back("delete " + std::string(name_of(obj)) + (unknown ? "?" : ""));
  };
  inf.add_handlers(h);
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(10s));
  // Readers on other threads while the informer works.
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done) {
      for (const auto& o : inf.store().by_index(kNamespaceIndex, "x")) (void)name_of(*o);
      (void)inf.resource_version();
      (void)inf.stats();
    }
  });
  for (int i = 0; i < 500 && !inf.store().get("x/d"); ++i) std::this_thread::sleep_for(10ms);
  done = true;
  reader.join();
  inf.stop();

  EXPECT_EQ(inf.store().keys().size(), 3u);
  EXPECT_EQ(inf.store().get("x/a")->get_string({"data", "v"}), "2");
  EXPECT_EQ(inf.store().get("x/b"), nullptr);
  ASSERT_NE(inf.store().get("x/d"), nullptr);
  std::lock_guard lock(mu);
  EXPECT_EQ(log, (std::vector<std::string>{"add a", "add b", "add c", "update a@12", "delete b",
                                           "add d"}));
  auto reqs = server.requests();
  ASSERT_GE(reqs.size(), 4u);
  EXPECT_THAT(reqs[0], Not(HasSubstr("watch=1")));
  EXPECT_THAT(reqs[0], HasSubstr("resourceVersion=0"));  // first list: the watch cache
  EXPECT_THAT(reqs[1], HasSubstr("watch=1&resourceVersion=10&allowWatchBookmarks=true"));
  EXPECT_THAT(reqs[2], HasSubstr("watch=1&resourceVersion=14"));  // resumed from the bookmark
  EXPECT_THAT(reqs[3], Not(HasSubstr("watch=1")));                // relist after 410
  EXPECT_THAT(reqs[3], Not(HasSubstr("resourceVersion=")));       // consistent, never older
  if (GetParam()) {
    ASSERT_NE(inf.store().get_compact("x/a"), nullptr);
    EXPECT_EQ(inf.store().get_compact("x/a")->root().get_string({"data", "v"}), "2");
    EXPECT_EQ(inf.store().by_index_compact(kNamespaceIndex, "x").size(), 3u);
  }
  Informer::Stats st = inf.stats();
  EXPECT_EQ(st.lists, 2u);
  EXPECT_EQ(st.gone, 1u);
  EXPECT_EQ(st.events, 3u);
}

INSTANTIATE_TEST_SUITE_P(Forms, InformerUnitBothForms, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Compact" : "Plain"; });

TEST(InformerUnit, StopsPromptlyWhileTheServerIsUnreachable) {
  ScriptedServer server({});  // every answer is a 500
  ClientConfig c;
  c.server = server.url();
  c.allow_plain_http_loopback = true;
  c.max_retries = 0;
  Client client(c);
  InformerOptions o;
  o.resource = resources::config_maps();
  o.backoff_base = 5s;
  Informer inf(client, o);
  inf.start();
  EXPECT_FALSE(inf.wait_for_sync(300ms));
  auto start = std::chrono::steady_clock::now();
  inf.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_THAT(inf.last_error(), HasSubstr("InternalError"));
  EXPECT_FALSE(inf.has_synced());
}

// Protobuf the compiled-in schema cannot represent (a field a newer server added, where the
// cache keeps it) switches the informer to JSON at once: the list is asked for again as JSON.
std::string pb_field(int number, const std::string& bytes) {
  std::string s(1, static_cast<char>((number << 3) | 2));
  s.push_back(static_cast<char>(bytes.size()));  // short fields only
  return s + bytes;
}

TEST(InformerUnit, FallsBackToJsonForProtobufItCannotDecode) {
  std::string node =
      pb_field(1, pb_field(1, "n1") + pb_field(6, "5")) + pb_field(2, pb_field(15, "new"));
  std::string list_pb = pb_field(1, pb_field(2, "10")) + pb_field(2, node);
  std::string body = std::string("k8s\0", 4) +
                     pb_field(1, pb_field(1, "v1") + pb_field(2, "NodeList")) +
                     pb_field(2, list_pb);
  ScriptedServer server({
      response(200, "OK", body),
      response(
          200, "OK",
          R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":[{"metadata":{"name":"n1","resourceVersion":"5"},"spec":{"newThing":"new"}}]})"),
  });
  ClientConfig c;
  c.server = server.url();
  c.allow_plain_http_loopback = true;
  c.qps = 0;
  Client client(c);
  InformerOptions o;
  o.resource = resources::nodes();
  o.compact = true;
  o.backoff_base = 20ms;
  o.backoff_max = 100ms;
  Informer inf(client, o);
  EXPECT_TRUE(inf.asks_protobuf());
  inf.start();
  ASSERT_TRUE(inf.wait_for_sync(10s));
  inf.stop();
  EXPECT_FALSE(inf.asks_protobuf());
  EXPECT_EQ(inf.stats().protobuf_lists, 0U);
  CompactPtr n1 = inf.store().get_compact("n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->root().get_string({"spec", "newThing"}), "new");  // nothing lost
  std::vector<std::string> requests = server.requests();
  ASSERT_GE(requests.size(), 2U);
  EXPECT_THAT(requests[0], HasSubstr("application/vnd.kubernetes.protobuf"));
  EXPECT_THAT(requests[1], Not(HasSubstr("protobuf")));
  EXPECT_GE(inf.stats().failures, 1U);
}

}  // namespace
}  // namespace gpufleet::kube
