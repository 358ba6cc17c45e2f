#include "kube/api/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "core/errors.h"
#include "kube/client.h"

namespace gpufleet::kube {
namespace {

ObjectPtr pod(const std::string& ns, const std::string& name, const std::string& node,
              const std::string& rv) {
  core::Value p;
  p["metadata"]["namespace"] = ns;
  p["metadata"]["name"] = name;
  p["metadata"]["resourceVersion"] = rv;
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return std::make_shared<const core::Value>(std::move(p));
}

std::vector<std::string> names(const std::vector<ObjectPtr>& objs) {
  std::vector<std::string> out;
  for (const auto& o : objs) out.emplace_back(name_of(*o));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Store, IndexesFollowUpdatesAndDeletes) {
  Store s;
  s.add_index(kNamespaceIndex, index_by_namespace);
  s.add_index(kNodeNameIndex, index_by_node_name);
  EXPECT_EQ(s.upsert(pod("a", "p1", "n1", "1")), nullptr);
  s.upsert(pod("a", "p2", "n2", "1"));
  s.upsert(pod("b", "p3", "n1", "1"));
  s.upsert(pod("b", "p4", "", "1"));  // not scheduled: in no node bucket
  EXPECT_EQ(names(s.by_index(kNodeNameIndex, "n1")), (std::vector<std::string>{"p1", "p3"}));
  EXPECT_EQ(names(s.by_index(kNamespaceIndex, "b")), (std::vector<std::string>{"p3", "p4"}));
  // Moving p1 to n2 moves it between buckets.
  ObjectPtr old = s.upsert(pod("a", "p1", "n2", "2"));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(resource_version_of(*old), "1");
  EXPECT_EQ(names(s.by_index(kNodeNameIndex, "n1")), (std::vector<std::string>{"p3"}));
  EXPECT_EQ(names(s.by_index(kNodeNameIndex, "n2")), (std::vector<std::string>{"p1", "p2"}));
  EXPECT_NE(s.erase("b/p3"), nullptr);
  EXPECT_EQ(s.erase("b/p3"), nullptr);
  EXPECT_TRUE(s.by_index(kNodeNameIndex, "n1").empty());
  auto values = s.index_values(kNodeNameIndex);
  EXPECT_EQ(values, std::vector<std::string>{"n2"});
  EXPECT_THROW((void)s.by_index("nope", "x"), core::InvalidInput);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_NE(s.get("a/p1"), nullptr);
}

TEST(Store, CustomIndexAddedLaterCoversExistingObjects) {
  Store s;
  s.upsert(pod("a", "p1", "n1", "1"));
  s.upsert(pod("a", "p2", "n2", "1"));
  s.add_index("first-letter", [](const core::Value& o) {
    return std::vector<std::string>{std::string(name_of(o).substr(0, 1))};
  });
  EXPECT_EQ(s.by_index("first-letter", "p").size(), 2u);
}

TEST(Store, ReplaceReportsChangesAndRemovals) {
  Store s;
  s.add_index(kNodeNameIndex, index_by_node_name);
  s.upsert(pod("a", "same", "n1", "5"));
  s.upsert(pod("a", "changed", "n1", "5"));
  s.upsert(pod("a", "gone", "n1", "5"));
  auto r = s.replace(
      {pod("a", "same", "n1", "5"), pod("a", "changed", "n2", "9"), pod("a", "new", "n3", "9")});
  ASSERT_EQ(r.removed.size(), 1u);
  EXPECT_EQ(name_of(*r.removed[0]), "gone");
  ASSERT_EQ(r.changed.size(), 2u);
  std::vector<std::string> changed;
  for (auto& [o, n] : r.changed) changed.push_back(std::string(name_of(*n)) + (o ? "~" : "+"));
  std::sort(changed.begin(), changed.end());
  EXPECT_EQ(changed, (std::vector<std::string>{"changed~", "new+"}));
  EXPECT_EQ(names(s.by_index(kNodeNameIndex, "n1")), (std::vector<std::string>{"same"}));
  EXPECT_EQ(names(s.by_index(kNodeNameIndex, "n3")), (std::vector<std::string>{"new"}));
}

TEST(Store, ConcurrentReadersAndWriters) {
  Store s;
  s.add_index(kNodeNameIndex, index_by_node_name);
  std::atomic<int> writers_left{2};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < 2000; ++i) {
        std::string name = "p" + std::to_string(i % 100);
        s.upsert(pod("ns", name, "n" + std::to_string((i + w) % 7), std::to_string(i)));
        if (i % 13 == 0) s.erase("ns/" + name);
      }
      --writers_left;
    });
  }
  std::atomic<std::size_t> seen{0};
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      // Read for as long as the writers write (and once more after).
      for (bool last = false; !last;) {
        last = writers_left.load() == 0;
        for (const auto& o : s.by_index(kNodeNameIndex, "n3")) seen += name_of(*o).size() > 0;
        seen += s.list().size();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(seen.load(), 0u);
  // Every indexed key is a stored object on the node its index bucket says.
  for (const auto& node : s.index_values(kNodeNameIndex)) {
    for (const auto& o : s.by_index(kNodeNameIndex, node)) {
      EXPECT_EQ(o->get_string({"spec", "nodeName"}), node);
    }
  }
}

}  // namespace
}  // namespace gpufleet::kube
