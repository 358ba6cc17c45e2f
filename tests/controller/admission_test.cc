#include "controller/admission.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "core/errors.h"
#include "core/json.h"
#include "core/metrics.h"

namespace gpufleet::controller {
namespace {

// An AdmissionReview as kube-apiserver v1.32 sends it (fields trimmed to what matters).
std::string review(std::string_view operation, std::string_view object,
                   std::string_view old_object = "null") {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
    "uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
    "kind":{"group":"gpufleet.io","version":"v1alpha1","kind":"Certification"},
    "resource":{"group":"gpufleet.io","version":"v1alpha1","resource":"certifications"},
    "requestKind":{"group":"gpufleet.io","version":"v1alpha1","kind":"Certification"},
    "name":"nightly","namespace":"default","operation":")" +
         std::string(operation) + R"(","userInfo":{"username":"admin"},
    "object":)" +
         std::string(object) + R"(,"oldObject":)" + std::string(old_object) +
         R"(,"dryRun":false}})";
}

AdmissionHandler handler_requiring_threshold(core::metrics::Registry* registry = nullptr) {
  AdmissionHandler h(registry);
  h.add("gpufleet.io", "Certification", [](const AdmissionRequest& r) {
    if (r.spec_unchanged()) return AdmissionResult::allow();
    if (r.object.get_string({"spec", "threshold"}) == "value >= ")
      return AdmissionResult::deny(
          "spec.threshold: expression \"value >= \" does not compile: fix it");
    if (r.object.get_string({"spec", "threshold"}) == "throw")
      throw core::InvalidInput("spec.threshold: thrown");
    if (r.object.get_string({"spec", "threshold"}) == "crash") throw std::runtime_error("boom");
    return AdmissionResult::allow();
  });
  return h;
}

core::Value answer(const AdmissionHandler& h, const std::string& body, int want_status = 200) {
  const core::HttpResponse r = h.serve(body);
  EXPECT_EQ(r.status, want_status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  return core::parse_json(r.body);
}

TEST(Admission, ParsesTheReview) {
  const AdmissionRequest r = parse_admission_review(
      core::parse_json(review("UPDATE", R"({"metadata":{"name":"nightly"},"spec":{"a":1}})",
                              R"({"metadata":{"name":"nightly"},"spec":{"a":1},"status":{}})")));
  EXPECT_EQ(r.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r.group, "gpufleet.io");
  EXPECT_EQ(r.version, "v1alpha1");
  EXPECT_EQ(r.kind, "Certification");
  EXPECT_EQ(r.resource, "certifications");
  EXPECT_EQ(r.name, "nightly");
  EXPECT_EQ(r.namespace_, "default");
  EXPECT_EQ(r.operation, "UPDATE");
  EXPECT_FALSE(r.dry_run);
  EXPECT_TRUE(r.spec_unchanged());  // only status differs

  AdmissionRequest changed = r;
  changed.object["spec"]["a"] = 2;
  EXPECT_FALSE(changed.spec_unchanged());
  AdmissionRequest create = r;
  create.operation = "CREATE";
  EXPECT_FALSE(create.spec_unchanged());
}

TEST(Admission, AllowsAndDeniesWithTheUidEchoed) {
  const AdmissionHandler h = handler_requiring_threshold();
  const core::Value ok =
      answer(h, review("CREATE", R"({"metadata":{"name":"n"},"spec":{"threshold":"value >= 1"}})"));
  EXPECT_EQ(ok.get_string({"apiVersion"}), "admission.k8s.io/v1");
  EXPECT_EQ(ok.get_string({"kind"}), "AdmissionReview");
  EXPECT_EQ(ok.get_string({"response", "uid"}), "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_TRUE(ok.get({"response", "allowed"})->as_bool());
  EXPECT_EQ(ok.get({"response", "status"}), nullptr);

  const core::Value no =
      answer(h, review("CREATE", R"({"metadata":{"name":"n"},"spec":{"threshold":"value >= "}})"));
  EXPECT_FALSE(no.get({"response", "allowed"})->as_bool());
  EXPECT_EQ(no.get({"response", "status", "code"})->as_int(), 422);
  EXPECT_EQ(no.get_string({"response", "status", "reason"}), "Invalid");
  EXPECT_EQ(no.get_string({"response", "status", "message"}),
            "spec.threshold: expression \"value >= \" does not compile: fix it");

  // An UPDATE that leaves a bad spec alone (removing a finalizer) is not blocked.
  const std::string bad = R"({"metadata":{"name":"n"},"spec":{"threshold":"value >= "}})";
  EXPECT_TRUE(answer(h, review("UPDATE", bad, bad)).get({"response", "allowed"})->as_bool());
}

TEST(Admission, ValidatorErrorsDenyByName) {
  const AdmissionHandler h = handler_requiring_threshold();
  const core::Value thrown =
      answer(h, review("CREATE", R"({"metadata":{"name":"n"},"spec":{"threshold":"throw"}})"));
  EXPECT_FALSE(thrown.get({"response", "allowed"})->as_bool());
  EXPECT_EQ(thrown.get_string({"response", "status", "message"}), "spec.threshold: thrown");
  const core::Value crashed =
      answer(h, review("CREATE", R"({"metadata":{"name":"n"},"spec":{"threshold":"crash"}})"));
  EXPECT_FALSE(crashed.get({"response", "allowed"})->as_bool());
  EXPECT_EQ(crashed.get_string({"response", "status", "message"}),
            "internal error validating Certification nightly: boom");
}

TEST(Admission, KindsWithoutAValidatorAreAllowed) {
  AdmissionHandler h;
  EXPECT_TRUE(h.empty());
  std::string body = review("CREATE", R"({"metadata":{"name":"n"}})");
  EXPECT_TRUE(answer(h, body).get({"response", "allowed"})->as_bool());
}

TEST(Admission, MalformedReviewsAreA400NamingTheProblem) {
  const AdmissionHandler h = handler_requiring_threshold();
  const auto error_of = [&](const std::string& body) {
    return std::string(answer(h, body, 400).get_string({"error"}));
  };
  EXPECT_NE(error_of("{not json").find("AdmissionReview"), std::string::npos);
  EXPECT_NE(error_of(R"({"apiVersion":"admission.k8s.io/v1beta1","request":{}})")
                .find("admissionReviewVersions: [v1]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"apiVersion":"admission.k8s.io/v1"})").find("no request object"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"apiVersion":"admission.k8s.io/v1","request":{"operation":"CREATE"}})")
                .find("request.uid is missing"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"apiVersion":"admission.k8s.io/v1","request":{"uid":"u",
                         "operation":"CREATE","kind":{"group":"g"}}})")
                .find("request.kind.version is missing"),
            std::string::npos);
}

TEST(Admission, OneValidatorPerKindAndCountedVerdicts) {
  core::metrics::Registry registry;
  AdmissionHandler h = handler_requiring_threshold(&registry);
  EXPECT_THROW(h.add("gpufleet.io", "Certification",
                     [](const AdmissionRequest&) { return AdmissionResult::allow(); }),
               core::InvalidInput);
  EXPECT_THROW(h.add("gpufleet.io", "WorkloadRun", Validator{}), core::InvalidInput);
  EXPECT_EQ(h.kinds(), std::vector<std::string>{"gpufleet.io/Certification"});
  (void)h.serve(review("CREATE", R"({"metadata":{"name":"n"},"spec":{"threshold":"value >= "}})"));
  (void)h.serve(review("CREATE", R"({"metadata":{"name":"n"},"spec":{}})"));
  (void)h.serve(review("CREATE", R"({"metadata":{"name":"n"},"spec":{}})"));
  const std::string text = registry.render();
  EXPECT_NE(
      text.find(R"(gpufleet_admission_requests_total{kind="Certification",verdict="allowed"} 2)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(R"(gpufleet_admission_requests_total{kind="Certification",verdict="denied"} 1)"),
      std::string::npos)
      << text;
}

}  // namespace
}  // namespace gpufleet::controller
