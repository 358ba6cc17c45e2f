#include "kube/errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpufleet::kube {
namespace {

using ::testing::HasSubstr;

// Bodies as kube-apiserver v1.32 sends them.
TEST(StatusError, NotFound) {
  ApiError e = decode_status_error(
      404,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"pods"},"code":404})",
      {"get", "pods", "default", "nope"});
  EXPECT_EQ(e.code(), 404);
  EXPECT_TRUE(e.is(Reason::NotFound));
  EXPECT_EQ(e.details_name(), "nope");
  EXPECT_EQ(e.details_kind(), "pods");
  EXPECT_STREQ(e.what(),
               "cannot get pods default/nope: NotFound (HTTP 404): pods \"nope\" not found");
}

TEST(StatusError, ForbiddenNamesVerbAndResource) {
  ApiError e = decode_status_error(
      403,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nodes is forbidden: User \"system:serviceaccount:ro:reader\" cannot list resource \"nodes\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"kind":"nodes"},"code":403})",
      {"list", "nodes", "", ""});
  EXPECT_TRUE(e.is(Reason::Forbidden));
  EXPECT_THAT(e.what(), HasSubstr("cannot list nodes: Forbidden (HTTP 403)"));
  EXPECT_THAT(e.what(), HasSubstr("system:serviceaccount:ro:reader"));
  EXPECT_THAT(e.what(), HasSubstr("RBAC"));
  EXPECT_FALSE(is_retryable(e));
}

TEST(StatusError, InvalidWithCauses) {
  ApiError e = decode_status_error(
      422,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Widget.smoke.gpufleet.io \"w\" is invalid: spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0","reason":"Invalid","details":{"name":"w","group":"smoke.gpufleet.io","kind":"Widget","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: -1: spec.replicas in body should be greater than or equal to 0","field":"spec.replicas"},{"reason":"FieldValueRequired","message":"Required value","field":"spec.mode"}]},"code":422})",
      {"create", "widgets.smoke.gpufleet.io", "default", "w"});
  EXPECT_TRUE(e.is(Reason::Invalid));
  ASSERT_EQ(e.causes().size(), 2u);
  EXPECT_EQ(e.causes()[0].field, "spec.replicas");
  EXPECT_EQ(e.causes()[1].reason, "FieldValueRequired");
  // The second cause is not in the message, so the error lists it.
  EXPECT_THAT(e.what(), HasSubstr("; spec.mode: Required value"));
}

TEST(StatusError, ApplyConflictCauses) {
  ApiError e = decode_status_error(
      409,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: conflict with \"manager-a\" using v1: .data.key","reason":"Conflict","details":{"causes":[{"reason":"FieldManagerConflict","message":"conflict with \"manager-a\" using v1","field":".data.key"}]},"code":409})",
      {"apply", "configmaps", "default", "cm"});
  EXPECT_TRUE(e.is(Reason::Conflict));
  ASSERT_EQ(e.causes().size(), 1u);
  EXPECT_EQ(e.causes()[0].reason, "FieldManagerConflict");
  EXPECT_EQ(e.causes()[0].field, ".data.key");
}

TEST(StatusError, EvictionBlockedByDisruptionBudgetIsItsOwnReason) {
  ApiError e = decode_status_error(
      429,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web-pdb needs 1 healthy pods and has 1 currently"}]},"code":429})",
      {"evict", "pods/eviction", "default", "web-0"});
  EXPECT_TRUE(e.is(Reason::EvictionBlocked));
  EXPECT_FALSE(is_retryable(e));
  EXPECT_THAT(e.what(), HasSubstr("EvictionBlocked"));
}

TEST(StatusError, PriorityAndFairnessThrottlingCarriesRetryAfter) {
  ApiError e = decode_status_error(
      429,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429})",
      {"list", "pods", "", ""}, "3");
  EXPECT_TRUE(e.is(Reason::TooManyRequests));
  EXPECT_EQ(e.retry_after_seconds(), 3);  // the header wins over the body
  EXPECT_TRUE(is_retryable(e));
}

TEST(StatusError, NonStatusBodies) {
  ApiError html = decode_status_error(503, "<html>bad gateway</html>", {"get", "pods", "", "x"});
  EXPECT_TRUE(html.is(Reason::ServiceUnavailable));
  EXPECT_THAT(html.what(), HasSubstr("<html>bad gateway</html>"));
  EXPECT_TRUE(is_retryable(html));
  ApiError empty = decode_status_error(410, "", {"watch", "pods", "", ""});
  EXPECT_TRUE(empty.is(Reason::Gone));
  ApiError odd = decode_status_error(418, "{not json", {"get", "x", "", ""});
  EXPECT_TRUE(odd.is(Reason::Unknown));
  EXPECT_EQ(odd.code(), 418);
}

TEST(StatusError, ReasonNames) {
  EXPECT_EQ(reason_name(Reason::AlreadyExists), "AlreadyExists");
  EXPECT_EQ(reason_name(Reason::ServerTimeout), "ServerTimeout");
  EXPECT_EQ(reason_for_code(409), Reason::Conflict);
  EXPECT_EQ(reason_for_code(401), Reason::Unauthorized);
}

}  // namespace
}  // namespace gpufleet::kube
