// Errors the Kubernetes client reports: the API server's metav1.Status decoded into a typed
// ApiError, and TransportError for requests that got no HTTP answer at all.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::kube {

// metav1.StatusReason values (plus EvictionBlocked, which the server reports as a 429
// TooManyRequests with a DisruptionBudget cause, but which callers must treat apart from
// API Priority and Fairness throttling).
enum class Reason {
  Unknown,
  BadRequest,
  Unauthorized,
  Forbidden,
  NotFound,
  AlreadyExists,
  Conflict,
  Gone,
  Invalid,
  ServerTimeout,
  Timeout,
  TooManyRequests,
  EvictionBlocked,
  MethodNotAllowed,
  NotAcceptable,
  RequestEntityTooLarge,
  UnsupportedMediaType,
  InternalError,
  ServiceUnavailable,
  Expired,
};

// "NotFound", "Conflict", ... (the Status reason spelling).
std::string_view reason_name(Reason r) noexcept;

// One entry of Status.details.causes: what is wrong with which field.
struct StatusCause {
  std::string reason;  // e.g. "FieldValueInvalid", "FieldManagerConflict"
  std::string message;
  std::string field;  // e.g. "spec.replicas"
};

// An admission control denial the server's message reports: a ValidatingAdmissionPolicy
// ("ValidatingAdmissionPolicy 'P' with binding 'B' denied request: M") or a validating
// webhook ("admission webhook \"W\" denied the request: M"). RBAC allowed such a request; a
// rule about its content refused it, so the fix is in the request (or the policy), not a Role.
struct AdmissionDenial {
  std::string kind;     // "ValidatingAdmissionPolicy" or "webhook"
  std::string name;     // the policy or webhook
  std::string binding;  // the policy binding ("" for webhooks)
  std::string message;  // the policy's own message
};

// Finds an admission denial in a Status message (nullopt when there is none).
std::optional<AdmissionDenial> parse_admission_denial(std::string_view message);

// What the request was, so that errors can say "cannot delete pods default/x".
struct RequestInfo {
  std::string verb;        // get, list, create, update, patch, apply, delete, watch, evict
  std::string resource;    // "pods", "leases.coordination.k8s.io", "pods/eviction"
  std::string namespace_;  // empty for cluster-scoped
  std::string name;        // empty for collections
};

// An HTTP error answer from the API server.
class ApiError : public std::runtime_error {
 public:
  ApiError(int code, Reason reason, std::string message, RequestInfo request,
           std::vector<StatusCause> causes = {}, std::optional<int> retry_after_seconds = {},
           std::string details_kind = {}, std::string details_name = {});

  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] Reason reason() const noexcept { return reason_; }
  // The server's own message (for Forbidden it names user, verb and resource).
  [[nodiscard]] const std::string& server_message() const noexcept { return message_; }
  [[nodiscard]] const RequestInfo& request() const noexcept { return request_; }
  [[nodiscard]] const std::vector<StatusCause>& causes() const noexcept { return causes_; }
  [[nodiscard]] std::optional<int> retry_after_seconds() const noexcept { return retry_after_; }
  [[nodiscard]] const std::string& details_kind() const noexcept { return details_kind_; }
  [[nodiscard]] const std::string& details_name() const noexcept { return details_name_; }
  // Set when admission control, not authorization, refused the request.
  [[nodiscard]] const std::optional<AdmissionDenial>& admission_denial() const noexcept {
    return admission_;
  }

  [[nodiscard]] bool is(Reason r) const noexcept { return reason_ == r; }

 private:
  int code_;
  Reason reason_;
  std::string message_;
  RequestInfo request_;
  std::vector<StatusCause> causes_;
  std::optional<int> retry_after_;
  std::string details_kind_;
  std::string details_name_;
  std::optional<AdmissionDenial> admission_;
};

// No HTTP answer: connection refused, TLS failure, timeout, stream cut. `request_sent` says
// whether the server may have seen the request (if not, retrying any verb is safe).
class TransportError : public std::runtime_error {
 public:
  TransportError(const std::string& what, bool request_sent, bool timed_out = false)
      : std::runtime_error(what), request_sent_(request_sent), timed_out_(timed_out) {}
  [[nodiscard]] bool request_sent() const noexcept { return request_sent_; }
  [[nodiscard]] bool timed_out() const noexcept { return timed_out_; }

 private:
  bool request_sent_;
  bool timed_out_;
};

// Builds the ApiError for an HTTP error answer. `body` is usually a metav1.Status JSON; when it
// is not (a proxy's HTML page, empty), the reason comes from the HTTP code alone.
// `retry_after_header` is the Retry-After header value, if any.
ApiError decode_status_error(int http_code, std::string_view body, RequestInfo request,
                             std::string_view retry_after_header = {});

// Reason for an HTTP status code when the body carries none.
Reason reason_for_code(int http_code) noexcept;

// True for errors where the same request may be sent again unchanged after a pause
// (throttling, server timeouts, 5xx); false for NotFound, Conflict, Invalid, ...
bool is_retryable(const ApiError& e) noexcept;

}  // namespace gpufleet::kube
