#include "kube/errors.h"

#include <charconv>
#include <utility>

#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::kube {

namespace {

struct ReasonSpelling {
  Reason reason;
  std::string_view name;
};

constexpr ReasonSpelling kReasons[] = {
    {Reason::Unknown, "Unknown"},
    {Reason::BadRequest, "BadRequest"},
    {Reason::Unauthorized, "Unauthorized"},
    {Reason::Forbidden, "Forbidden"},
    {Reason::NotFound, "NotFound"},
    {Reason::AlreadyExists, "AlreadyExists"},
    {Reason::Conflict, "Conflict"},
    {Reason::Gone, "Gone"},
    {Reason::Invalid, "Invalid"},
    {Reason::ServerTimeout, "ServerTimeout"},
    {Reason::Timeout, "Timeout"},
    {Reason::TooManyRequests, "TooManyRequests"},
    {Reason::EvictionBlocked, "EvictionBlocked"},
    {Reason::MethodNotAllowed, "MethodNotAllowed"},
    {Reason::NotAcceptable, "NotAcceptable"},
    {Reason::RequestEntityTooLarge, "RequestEntityTooLarge"},
    {Reason::UnsupportedMediaType, "UnsupportedMediaType"},
    {Reason::InternalError, "InternalError"},
    {Reason::ServiceUnavailable, "ServiceUnavailable"},
    {Reason::Expired, "Expired"},
};

std::optional<Reason> parse_reason(std::string_view s) {
  for (const auto& r : kReasons) {
    if (r.name == s) return r.reason;
  }
  return std::nullopt;
}

std::string describe(int code, Reason reason, const std::string& message, const RequestInfo& req,
                     const std::vector<StatusCause>& causes) {
  std::string out = "cannot " + (req.verb.empty() ? std::string("access") : req.verb) + " ";
  out += req.resource.empty() ? std::string("resource") : req.resource;
  if (!req.namespace_.empty() || !req.name.empty()) {
    out += " ";
    if (!req.namespace_.empty()) out += req.namespace_ + (req.name.empty() ? "" : "/");
    out += req.name;
  }
  out += ": ";
  out += reason_name(reason);
  out += " (HTTP " + std::to_string(code) + ")";
  if (!message.empty()) out += ": " + message;
  for (const auto& c : causes) {
    // The message usually already includes the first cause; list the rest field by field.
    if (!c.field.empty() && message.find(c.field) == std::string::npos) {
      out += "; " + c.field + ": " + c.message;
    }
  }
  if (reason == Reason::Forbidden) {
    out +=
        " (the credentials in use lack RBAC permission for this verb on this resource; grant it "
        "with a Role/ClusterRole binding)";
  } else if (reason == Reason::Unauthorized) {
    out +=
        " (the API server rejected the credentials: check the kubeconfig user's token or "
        "client certificate)";
  }
  return out;
}

std::optional<int> parse_seconds(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::string_view reason_name(Reason r) noexcept {
  for (const auto& s : kReasons) {
    if (s.reason == r) return s.name;
  }
  return "Unknown";
}

ApiError::ApiError(int code, Reason reason, std::string message, RequestInfo request,
                   std::vector<StatusCause> causes, std::optional<int> retry_after_seconds,
                   std::string details_kind, std::string details_name)
    : std::runtime_error(describe(code, reason, message, request, causes)),
      code_(code),
      reason_(reason),
      message_(std::move(message)),
      request_(std::move(request)),
      causes_(std::move(causes)),
      retry_after_(retry_after_seconds),
      details_kind_(std::move(details_kind)),
      details_name_(std::move(details_name)) {}

Reason reason_for_code(int http_code) noexcept {
  switch (http_code) {
    case 400: return Reason::BadRequest;
    case 401: return Reason::Unauthorized;
    case 403: return Reason::Forbidden;
    case 404: return Reason::NotFound;
    case 405: return Reason::MethodNotAllowed;
    case 406: return Reason::NotAcceptable;
    case 409: return Reason::Conflict;
    case 410: return Reason::Gone;
    case 413: return Reason::RequestEntityTooLarge;
    case 415: return Reason::UnsupportedMediaType;
    case 422: return Reason::Invalid;
    case 429: return Reason::TooManyRequests;
    case 500: return Reason::InternalError;
    case 503: return Reason::ServiceUnavailable;
    case 504: return Reason::ServerTimeout;
    default: return Reason::Unknown;
  }
}

ApiError decode_status_error(int http_code, std::string_view body, RequestInfo request,
                             std::string_view retry_after_header) {
  Reason reason = reason_for_code(http_code);
  std::string message;
  std::vector<StatusCause> causes;
  std::optional<int> retry_after = parse_seconds(retry_after_header);
  std::string details_kind;
  std::string details_name;

  core::Value status;
  bool decoded = false;
  if (!body.empty() && body.front() == '{') {
    try {
      status = core::parse_json(body, "Status");
      decoded = status.get_string({"kind"}) == "Status";
    } catch (const core::InvalidInput&) {
      decoded = false;
    }
  }
  if (decoded) {
    if (auto r = parse_reason(status.get_string({"reason"}))) reason = *r;
    message = std::string(status.get_string({"message"}));
    details_kind = std::string(status.get_string({"details", "kind"}));
    details_name = std::string(status.get_string({"details", "name"}));
    if (const core::Value* ra = status.get({"details", "retryAfterSeconds"}); ra && ra->is_int()) {
      if (!retry_after) retry_after = static_cast<int>(ra->as_int());
    }
    if (const core::Value* cs = status.get({"details", "causes"}); cs && cs->is_list()) {
      for (const core::Value& c : cs->as_list()) {
        causes.push_back({std::string(c.get_string({"reason"})),
                          std::string(c.get_string({"message"})),
                          std::string(c.get_string({"field"}))});
      }
    }
  } else if (!body.empty()) {
    // Not a Status: keep a bounded excerpt so that the error still says something useful.
    message = std::string(body.substr(0, 300));
  }
  // A PodDisruptionBudget blocking an eviction comes back as 429 TooManyRequests with a
  // DisruptionBudget cause; callers must not mistake it for throttling and retry blindly.
  if (http_code == 429) {
    for (const auto& c : causes) {
      if (c.reason == "DisruptionBudget") reason = Reason::EvictionBlocked;
    }
    if (reason != Reason::EvictionBlocked && request.resource.ends_with("/eviction") &&
        message.find("disruption budget") != std::string::npos) {
      reason = Reason::EvictionBlocked;
    }
  }
  return ApiError(http_code, reason, std::move(message), std::move(request), std::move(causes),
                  retry_after, std::move(details_kind), std::move(details_name));
}

bool is_retryable(const ApiError& e) noexcept {
  switch (e.reason()) {
    case Reason::TooManyRequests:
    case Reason::ServerTimeout:
    case Reason::Timeout:
    case Reason::ServiceUnavailable:
    case Reason::InternalError: return true;
    default: return e.code() >= 500;
  }
}

}  // namespace gpufleet::kube
