#include "kube/errors.h"
#include "support/source_paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpufleet::kube {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

std::string testdata(const std::string& name) {
  std::ifstream in(std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Captured from kube-apiserver v1.32.4 (kube-local): a ValidatingAdmissionPolicy with
// `reason: Forbidden` refusing a ServiceAccount the admin's RBAC allows.
TEST(StatusError, AdmissionPolicyDenialNamesThePolicyNotRbac) {
  std::string body = testdata("status-vap-denied-403.json");
  ASSERT_FALSE(body.empty());
  ApiError e = decode_status_error(403, body, {"create", "serviceaccounts", "default", "intruder"});
  EXPECT_TRUE(e.is(Reason::Forbidden));
  ASSERT_TRUE(e.admission_denial().has_value());
  EXPECT_EQ(e.admission_denial()->kind, "ValidatingAdmissionPolicy");
  EXPECT_EQ(e.admission_denial()->name, "demo-forbidden-reason");
  EXPECT_EQ(e.admission_denial()->binding, "demo-forbidden-reason-binding");
  EXPECT_EQ(e.admission_denial()->message, "service account intruder must be named gpufleet-*");
  EXPECT_STREQ(e.what(),
               "cannot create serviceaccounts default/intruder: Forbidden (HTTP 403): denied by "
               "ValidatingAdmissionPolicy 'demo-forbidden-reason' (binding "
               "'demo-forbidden-reason-binding'): service account intruder must be named "
               "gpufleet-* (RBAC allowed the request; an admission rule refused its content: "
               "change the request, or the policy if the rule is wrong; a Role/ClusterRole "
               "binding will not help)");
  EXPECT_THAT(e.what(), Not(HasSubstr("lack RBAC permission")));
  // The server's own words stay available.
  EXPECT_THAT(e.server_message(), HasSubstr("serviceaccounts \"intruder\" is forbidden"));
}

// Captured likewise: without `reason` the server answers 422 Invalid.
TEST(StatusError, AdmissionPolicyDenialAs422) {
  std::string body = testdata("status-vap-denied-422.json");
  ASSERT_FALSE(body.empty());
  ApiError e = decode_status_error(422, body, {"create", "configmaps", "default", "gpu-settings"});
  EXPECT_TRUE(e.is(Reason::Invalid));
  ASSERT_TRUE(e.admission_denial().has_value());
  EXPECT_EQ(e.admission_denial()->name, "demo-no-forbidden-label");
  EXPECT_THAT(e.what(), HasSubstr("denied by ValidatingAdmissionPolicy 'demo-no-forbidden-label' "
                                  "(binding 'demo-no-forbidden-label-binding'): configmap "
                                  "gpu-settings may not carry the label forbidden"));
}

TEST(StatusError, AdmissionDenialParsing) {
  auto d = parse_admission_denial(
      "pods \"x\" is forbidden: ValidatingAdmissionPolicy 'p' denied request: no: really");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "p");
  EXPECT_EQ(d->binding, "");
  EXPECT_EQ(d->message, "no: really");
  d = parse_admission_denial(
      "admission webhook \"check.example.com\" denied the request: image not signed");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, "webhook");
  EXPECT_EQ(d->name, "check.example.com");
  EXPECT_EQ(d->message, "image not signed");
  EXPECT_FALSE(parse_admission_denial("nodes is forbidden: User \"u\" cannot list").has_value());
  EXPECT_FALSE(parse_admission_denial("ValidatingAdmissionPolicy 'p' is broken").has_value());
  // An RBAC denial carries none.
  ApiError rbac = decode_status_error(
      403,
      R"({"kind":"Status","message":"nodes is forbidden: User \"u\" cannot list","reason":"Forbidden","code":403})",
      {"list", "nodes", "", ""});
  EXPECT_FALSE(rbac.admission_denial().has_value());
  EXPECT_THAT(rbac.what(), HasSubstr("RBAC permission"));
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
