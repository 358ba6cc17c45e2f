// Validating admission for gpufleet's own kinds: what the API server's schema and CEL rules
// cannot check (a CEL expression inside a string compiles; a SentinelPolicy's rules compile)
// is checked by the controller that will run it, before the object is stored, with the same
// code the controller uses afterwards. Each controller adds a Validator per kind; the Manager
// serves them over HTTPS at /validate on every replica (validation needs no leadership).
//
//   mgr.admission().add("gpufleet.io", "Certification", [](const AdmissionRequest& r) {
//     return spec_ok(r.object) ? AdmissionResult::allow() : AdmissionResult::deny("...");
//   });
//
// The controller checks again when it reconciles (an object stored while no webhook was
// registered, or with failurePolicy Ignore, still gets a condition naming the problem).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/http_server.h"
#include "core/value.h"

namespace gpufleet::core::metrics {
class Counter;
class Registry;
}  // namespace gpufleet::core::metrics

namespace gpufleet::controller {

// One admission.k8s.io/v1 AdmissionReview request, as a validator sees it.
struct AdmissionRequest {
  std::string uid;
  std::string group, version, kind;  // request.kind
  std::string resource, sub_resource;
  std::string name, namespace_;
  std::string operation;   // CREATE, UPDATE, DELETE or CONNECT
  core::Value object;      // null for DELETE
  core::Value old_object;  // null for CREATE
  bool dry_run = false;

  // UPDATE that leaves spec as it was (metadata or status only): validators of a spec let
  // it through, so an object stored before a stricter rule can still lose its finalizers.
  [[nodiscard]] bool spec_unchanged() const;
};

struct AdmissionResult {
  bool allowed = true;
  std::string message;  // why not allowed: names the field, the value and the fix
  std::vector<std::string> warnings;

  static AdmissionResult allow() { return {}; }
  static AdmissionResult deny(std::string why) { return {false, std::move(why), {}}; }
};

// Decides one request. core::InvalidInput thrown here denies with its message; any other
// exception denies naming it as an internal error.
using Validator = std::function<AdmissionResult(const AdmissionRequest&)>;

class AdmissionHandler {
 public:
  // `registry` gets gpufleet_admission_requests_total{kind, verdict}; nullptr: no metrics.
  explicit AdmissionHandler(core::metrics::Registry* registry = nullptr);

  // Throws core::InvalidInput when (group, kind) already has a validator.
  void add(std::string group, std::string kind, Validator validator);
  [[nodiscard]] bool empty() const noexcept { return validators_.empty(); }
  // "gpufleet.io/Certification", ... sorted.
  [[nodiscard]] std::vector<std::string> kinds() const;

  // An AdmissionReview body in, the AdmissionReview answer out (always 200 with a verdict once
  // the review parses; 400 naming the problem when it does not). A kind without a validator
  // is allowed: the webhook configuration decides what is sent here, not this table.
  [[nodiscard]] core::HttpResponse serve(std::string_view body) const;

  // The decision alone (serve() without the JSON), for tests and the controller's own checks.
  [[nodiscard]] AdmissionResult decide(const AdmissionRequest& request) const;

 private:
  std::map<std::pair<std::string, std::string>, Validator> validators_;
  core::metrics::Counter* requests_;
};

// Parses request.* of an AdmissionReview (admission.k8s.io/v1). Throws core::InvalidInput
// naming the missing or malformed field.
AdmissionRequest parse_admission_review(const core::Value& review);

}  // namespace gpufleet::controller
