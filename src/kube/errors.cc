#include "kube/errors.h"

#include <charconv>
#include <utility>

#include "core/errors.h"
#include "core/json.h"
#include "kube/api/compact_protobuf.h"

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

// The text between `open` + quote and the next quote after `pos`; advances `pos` past it.
std::optional<std::string> quoted_after(std::string_view s, std::string_view open, char quote,
                                        std::size_t& pos) {
  auto at = s.find(open, pos);
  if (at == std::string_view::npos) return std::nullopt;
  auto begin = at + open.size();
  auto end = s.find(quote, begin);
  if (end == std::string_view::npos) return std::nullopt;
  pos = end + 1;
  return std::string(s.substr(begin, end - begin));
}

std::string describe(int code, Reason reason, const std::string& message, const RequestInfo& req,
                     const std::vector<StatusCause>& causes,
                     const std::optional<AdmissionDenial>& admission) {
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
  if (admission) {
    // The server's message repeats "<resource> \"name\" is forbidden: ..." around the
    // policy's words; say who refused and what it said, once.
    if (admission->kind == "webhook") {
      out += ": denied by admission webhook '" + admission->name + "'";
    } else {
      out += ": denied by " + admission->kind + " '" + admission->name + "'";
      if (!admission->binding.empty()) out += " (binding '" + admission->binding + "')";
    }
    out += ": " + admission->message;
    out +=
        " (RBAC allowed the request; an admission rule refused its content: change the request, "
        "or the policy if the rule is wrong; a Role/ClusterRole binding will not help)";
    return out;
  }
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

std::optional<AdmissionDenial> parse_admission_denial(std::string_view message) {
  // The API server's wording (k8s.io/apiserver admission/plugin/policy/validating and
  // admission/plugin/webhook/errors), stable since v1.26 / v1.9.
  std::size_t pos = 0;
  if (auto name = quoted_after(message, "ValidatingAdmissionPolicy '", '\'', pos)) {
    AdmissionDenial d{"ValidatingAdmissionPolicy", *name, "", ""};
    std::size_t after_name = pos;
    if (auto binding = quoted_after(message, " with binding '", '\'', pos);
        binding && message.find(" with binding '", after_name) == after_name) {
      d.binding = *binding;
    } else {
      pos = after_name;
    }
    constexpr std::string_view kDenied = "denied request: ";
    auto at = message.find(kDenied, pos);
    if (at == std::string_view::npos) return std::nullopt;
    d.message = std::string(message.substr(at + kDenied.size()));
    return d;
  }
  pos = 0;
  if (auto name = quoted_after(message, "admission webhook \"", '"', pos)) {
    constexpr std::string_view kDenied = " denied the request: ";
    if (message.substr(pos, kDenied.size()) != kDenied) return std::nullopt;
    return AdmissionDenial{"webhook", *name, "", std::string(message.substr(pos + kDenied.size()))};
  }
  return std::nullopt;
}

namespace {

// Admission denials come back as 403 Forbidden or 422 Invalid (the policy's `reason`). The
// Status details carry the policy's words as a cause; the message wraps them.
std::optional<AdmissionDenial> admission_of(int code, const std::string& message,
                                            const std::vector<StatusCause>& causes) {
  if (code != 403 && code != 422) return std::nullopt;
  for (const auto& c : causes) {
    if (auto d = parse_admission_denial(c.message)) return d;
  }
  return parse_admission_denial(message);
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
    : std::runtime_error(
          describe(code, reason, message, request, causes, admission_of(code, message, causes))),
      code_(code),
      reason_(reason),
      message_(std::move(message)),
      request_(std::move(request)),
      causes_(std::move(causes)),
      retry_after_(retry_after_seconds),
      details_kind_(std::move(details_kind)),
      details_name_(std::move(details_name)),
      admission_(admission_of(code_, message_, causes_)) {}

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
  // An answer to a request that asked for protobuf carries its Status in protobuf.
  std::string from_protobuf = protobuf_status_json(body);
  if (!from_protobuf.empty()) body = from_protobuf;
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
