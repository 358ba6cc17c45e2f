#include "controller/admission.h"

#include <exception>

#include "core/errors.h"
#include "core/json.h"
#include "core/metrics.h"

namespace gpufleet::controller {
namespace {

constexpr std::string_view kReviewApiVersion = "admission.k8s.io/v1";

std::string required_string(const core::Value& v, std::string_view key, std::string_view where) {
  const core::Value* f = v.find(key);
  if (f == nullptr || !f->is_string() || f->as_string().empty()) {
    throw core::InvalidInput("AdmissionReview " + std::string(where) + "." + std::string(key) +
                             " is missing or not a string: the API server always sends it "
                             "(is this an admission.k8s.io/v1 AdmissionReview?)");
  }
  return f->as_string();
}

std::string optional_string(const core::Value& v, std::string_view key) {
  const core::Value* f = v.find(key);
  return f != nullptr && f->is_string() ? f->as_string() : std::string();
}

core::HttpResponse json_response(int status, std::string body) {
  core::HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

}  // namespace

bool AdmissionRequest::spec_unchanged() const {
  if (operation != "UPDATE") return false;
  const core::Value* now = object.find("spec");
  const core::Value* before = old_object.find("spec");
  if (now == nullptr || before == nullptr) return now == before;
  return *now == *before;
}

AdmissionRequest parse_admission_review(const core::Value& review) {
  if (!review.is_map()) {
    throw core::InvalidInput("AdmissionReview: the body is not a JSON object");
  }
  const std::string api_version(review.get_string({"apiVersion"}));
  if (api_version != kReviewApiVersion) {
    throw core::InvalidInput("AdmissionReview apiVersion \"" + api_version +
                             "\" is not served: use " + std::string(kReviewApiVersion) +
                             " (admissionReviewVersions: [v1] in the webhook configuration)");
  }
  const core::Value* req = review.find("request");
  if (req == nullptr || !req->is_map()) {
    throw core::InvalidInput("AdmissionReview has no request object");
  }
  AdmissionRequest r;
  r.uid = required_string(*req, "uid", "request");
  r.operation = required_string(*req, "operation", "request");
  const core::Value* kind = req->find("kind");
  if (kind == nullptr || !kind->is_map()) {
    throw core::InvalidInput("AdmissionReview request.kind is missing");
  }
  r.group = optional_string(*kind, "group");  // "" for the core group
  r.version = required_string(*kind, "version", "request.kind");
  r.kind = required_string(*kind, "kind", "request.kind");
  if (const core::Value* res = req->find("resource"); res != nullptr && res->is_map())
    r.resource = optional_string(*res, "resource");
  r.sub_resource = optional_string(*req, "subResource");
  r.name = optional_string(*req, "name");  // "" on CREATE with generateName
  r.namespace_ = optional_string(*req, "namespace");
  if (const core::Value* o = req->find("object"); o != nullptr) r.object = *o;
  if (const core::Value* o = req->find("oldObject"); o != nullptr) r.old_object = *o;
  if (const core::Value* d = req->find("dryRun"); d != nullptr && d->is_bool())
    r.dry_run = d->as_bool();
  if (r.name.empty()) r.name = std::string(r.object.get_string({"metadata", "name"}));
  return r;
}

AdmissionHandler::AdmissionHandler(core::metrics::Registry* registry)
    : requests_(registry == nullptr
                    ? nullptr
                    : &registry->counter("gpufleet_admission_requests_total",
                                         "Admission reviews answered, by kind and verdict.",
                                         {"kind", "verdict"})) {}

void AdmissionHandler::add(std::string group, std::string kind, Validator validator) {
  if (!validator) throw core::InvalidInput("admission validator for " + kind + " is empty");
  auto key = std::make_pair(std::move(group), std::move(kind));
  if (validators_.contains(key)) {
    throw core::InvalidInput("admission: " + key.first + "/" + key.second +
                             " already has a validator (one controller owns a kind)");
  }
  validators_.emplace(std::move(key), std::move(validator));
}

std::vector<std::string> AdmissionHandler::kinds() const {
  std::vector<std::string> out;
  for (const auto& [key, v] : validators_) out.push_back(key.first + "/" + key.second);
  return out;
}

AdmissionResult AdmissionHandler::decide(const AdmissionRequest& request) const {
  const auto it = validators_.find({request.group, request.kind});
  if (it == validators_.end()) return AdmissionResult::allow();
  try {
    return it->second(request);
  } catch (const core::InvalidInput& e) {
    return AdmissionResult::deny(e.what());
  } catch (const std::exception& e) {
    return AdmissionResult::deny("internal error validating " + request.kind + " " + request.name +
                                 ": " + e.what());
  }
}

core::HttpResponse AdmissionHandler::serve(std::string_view body) const {
  AdmissionRequest request;
  try {
    request = parse_admission_review(core::parse_json(body, "AdmissionReview"));
  } catch (const core::InvalidInput& e) {
    core::Value err = core::Value::map();
    err["error"] = std::string(e.what());
    return json_response(400, core::to_json(err));
  }
  const AdmissionResult verdict = decide(request);
  if (requests_ != nullptr) {
    // Bounded labels: kinds come from the validator table (unknown ones are "other").
    const bool known = validators_.contains({request.group, request.kind});
    requests_
        ->with({known ? std::string_view(request.kind) : std::string_view("other"),
                verdict.allowed ? "allowed" : "denied"})
        .inc();
  }
  core::Value out = core::Value::map();
  out["apiVersion"] = std::string(kReviewApiVersion);
  out["kind"] = "AdmissionReview";
  core::Value& response = out["response"];
  response["uid"] = request.uid;
  response["allowed"] = verdict.allowed;
  if (!verdict.allowed) {
    // 422 Invalid, as the API server's own validation answers; the message reaches kubectl as
    // `admission webhook "..." denied the request: <message>`.
    response["status"]["code"] = 422;
    response["status"]["reason"] = "Invalid";
    response["status"]["message"] = verdict.message;
  }
  for (const auto& w : verdict.warnings) response["warnings"].push_back(w);
  return json_response(200, core::to_json(out));
}

}  // namespace gpufleet::controller
