#include "kube/api/cordon.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::kube {
namespace {

core::Value node(bool unschedulable, const char* owners = nullptr) {
  core::Value n = core::Value::map();
  n["metadata"]["name"] = "gpu-1";
  n["metadata"]["resourceVersion"] = "42";
  if (owners) n["metadata"]["annotations"][kCordonOwnersAnnotation] = owners;
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

std::string json(const std::optional<core::Value>& v) {
  return v ? core::to_json(*v) : std::string("none");
}

TEST(Cordon, StateReadsOwnersSortedAndUnique) {
  CordonState s = cordon_state(node(true, "sentinel, hostpkg,sentinel"));
  EXPECT_EQ(s.owners, (std::vector<std::string>{"hostpkg", "sentinel"}));
  EXPECT_TRUE(s.owned_by("hostpkg"));
  EXPECT_FALSE(s.owned_by("certify"));
  EXPECT_TRUE(s.held_by_other("hostpkg"));
  EXPECT_FALSE(s.foreign());
  EXPECT_TRUE(cordon_state(node(true)).foreign());
  EXPECT_TRUE(cordon_state(node(false, "hostpkg")).overridden());
  EXPECT_FALSE(cordon_state(node(true, "hostpkg")).held_by_other("hostpkg"));
}

TEST(Cordon, CordonsAFreeNodeWithOptimisticConcurrency) {
  EXPECT_EQ(
      json(cordon_patch(node(false), "hostpkg")),
      R"({"metadata":{"annotations":{"gpufleet.io/cordon-owners":"hostpkg"},"resourceVersion":"42"},"spec":{"unschedulable":true}})");
}

TEST(Cordon, JoinsAnotherGpufleetOwnerButNeverClaimsAForeignCordon) {
  EXPECT_EQ(
      json(cordon_patch(node(true, "hostpkg"), "sentinel")),
      R"({"metadata":{"annotations":{"gpufleet.io/cordon-owners":"hostpkg,sentinel"},"resourceVersion":"42"}})");
  EXPECT_EQ(json(cordon_patch(node(true), "sentinel")), "none");
  EXPECT_EQ(json(cordon_patch(node(true, "sentinel"), "sentinel")), "none");
}

TEST(Cordon, ReCordonsAnOverriddenNodeAsItsOnlyOwner) {
  EXPECT_EQ(
      json(cordon_patch(node(false, "hostpkg"), "sentinel")),
      R"({"metadata":{"annotations":{"gpufleet.io/cordon-owners":"sentinel"},"resourceVersion":"42"},"spec":{"unschedulable":true}})");
}

TEST(Cordon, LastOwnerUncordonsOthersOnlyLeave) {
  EXPECT_EQ(
      json(uncordon_patch(node(true, "hostpkg,sentinel"), "hostpkg")),
      R"({"metadata":{"annotations":{"gpufleet.io/cordon-owners":"sentinel"},"resourceVersion":"42"}})");
  EXPECT_EQ(
      json(uncordon_patch(node(true, "sentinel"), "sentinel")),
      R"({"metadata":{"annotations":{"gpufleet.io/cordon-owners":null},"resourceVersion":"42"},"spec":{"unschedulable":null}})");
  EXPECT_EQ(json(uncordon_patch(node(true), "sentinel")), "none");
  EXPECT_EQ(json(uncordon_patch(node(true, "hostpkg"), "sentinel")), "none");
  // Someone uncordoned it already: only the mark goes.
  EXPECT_EQ(
      json(uncordon_patch(node(false, "sentinel"), "sentinel")),
      R"({"metadata":{"annotations":{"gpufleet.io/cordon-owners":null},"resourceVersion":"42"}})");
}

TEST(Cordon, DamagedAnnotationAndBadOwnerAreNamed) {
  try {
    cordon_state(node(true, "hostpkg,Bad_Owner"));
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("gpufleet.io/cordon-owners"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("Bad_Owner"), std::string::npos);
  }
  EXPECT_THROW(cordon_patch(node(false), "Host Pkg"), core::InvalidInput);
}

}  // namespace
}  // namespace gpufleet::kube
