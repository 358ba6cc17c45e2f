#include "controller/status.h"

#include <thread>

#include "core/errors.h"
#include "kube/api/meta.h"
#include "kube/errors.h"

namespace gpufleet::controller {
namespace {

constexpr int kAttempts = 5;

template <typename F>
auto with_retries(F&& f) {
  std::chrono::milliseconds delay{100};
  for (int attempt = 1;; ++attempt) {
    try {
      return f();
    } catch (const kube::ApiError& e) {
      if (!kube::is_retryable(e) || attempt >= kAttempts) throw;
    } catch (const kube::TransportError&) {
      if (attempt >= kAttempts) throw;
    }
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
}

}  // namespace

StatusWriter::StatusWriter(kube::Client& client, kube::ResourceId resource, std::string kind,
                           std::string field_manager)
    : client_(client),
      resource_(std::move(resource)),
      kind_(std::move(kind)),
      field_manager_(std::move(field_manager)) {
  if (field_manager_.empty() || kind_.empty()) {
    throw core::InvalidInput("StatusWriter for " + resource_.qualified_name() +
                             ": kind and field_manager must be set (one manager per controller)");
  }
}

core::Value StatusWriter::apply(std::string_view ns, std::string_view name,
                                const core::Value& status) {
  core::Value obj;
  obj["apiVersion"] = resource_.api_version();
  obj["kind"] = kind_;
  obj["metadata"]["name"] = name;
  if (!ns.empty()) obj["metadata"]["namespace"] = ns;
  obj["status"] = status;
  kube::ApplyOptions o;
  o.field_manager = field_manager_;
  o.force = true;
  return with_retries([&] { return client_.apply(resource_, obj, o, "status"); });
}

bool StatusWriter::apply_conditions(const core::Value& current,
                                    const std::vector<kube::Condition>& conditions,
                                    std::chrono::system_clock::time_point now) {
  static const core::Value kNone;
  const core::Value* existing = current.get({"status", "conditions"});
  core::Value merged = existing != nullptr ? *existing : kNone;
  core::Value mine = core::Value::list();
  bool changed = false;
  std::int64_t generation = 0;
  if (const core::Value* g = current.get({"metadata", "generation"}); g != nullptr && g->is_int())
    generation = g->as_int();
  for (kube::Condition c : conditions) {
    if (c.observed_generation == 0) c.observed_generation = generation;
    changed |= kube::set_condition(merged, c, now);
    for (const core::Value& v : merged.as_list()) {
      if (v.get_string({"type"}) == c.type) mine.push_back(v);
    }
  }
  if (!changed) return false;
  core::Value status;
  status["conditions"] = std::move(mine);
  apply(kube::namespace_of(current), kube::name_of(current), status);
  return true;
}

core::Value update_with_conflict_retry(kube::Client& client, const kube::ResourceId& resource,
                                       std::string_view ns, std::string_view name,
                                       const std::function<bool(core::Value&)>& mutate,
                                       int attempts) {
  for (int attempt = 1;; ++attempt) {
    core::Value obj = client.get(resource, ns, name);
    if (!mutate(obj)) return obj;
    try {
      return client.update(resource, obj);
    } catch (const kube::ApiError& e) {
      if (!e.is(kube::Reason::Conflict) || attempt >= attempts) throw;
    }
  }
}

}  // namespace gpufleet::controller
