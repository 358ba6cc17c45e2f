// Thin typed accessors over core::Value for the built-in kinds gpufleet acts on. They read
// fields with the API's defaults for absent values and never copy the object.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.h"

namespace gpufleet::kube {

// status.conditions[] entry with the given type, or nullptr.
const core::Value* find_condition(const core::Value& obj, std::string_view type) noexcept;
// true for "True", false for "False", nullopt when absent or "Unknown".
std::optional<bool> condition_is_true(const core::Value& obj, std::string_view type) noexcept;
std::string_view label_of(const core::Value& obj, std::string_view key) noexcept;
std::string_view annotation_of(const core::Value& obj, std::string_view key) noexcept;
// The ownerReferences entry with controller: true, or nullptr.
const core::Value* controller_of(const core::Value& obj) noexcept;

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  friend bool operator==(const Taint&, const Taint&) = default;
};

namespace node {
bool unschedulable(const core::Value& n) noexcept;
// The Ready condition is True.
bool ready(const core::Value& n) noexcept;
std::vector<Taint> taints(const core::Value& n);
bool has_taint(const core::Value& n, std::string_view key, std::string_view effect = {}) noexcept;
// status.allocatable / status.capacity quantity strings ("8", "512Gi"), "" when absent.
std::string_view allocatable(const core::Value& n, std::string_view resource) noexcept;
std::string_view capacity(const core::Value& n, std::string_view resource) noexcept;
std::string_view kubelet_version(const core::Value& n) noexcept;
std::string_view internal_ip(const core::Value& n) noexcept;
}  // namespace node

namespace pod {
std::string_view node_name(const core::Value& p) noexcept;
std::string_view phase(const core::Value& p) noexcept;  // Pending, Running, Succeeded, ...
bool ready(const core::Value& p) noexcept;
bool terminal(const core::Value& p) noexcept;  // Succeeded or Failed
bool owned_by_daemon_set(const core::Value& p) noexcept;
bool mirror(const core::Value& p) noexcept;  // a static pod's API mirror
}  // namespace pod

namespace pdb {
std::int64_t disruptions_allowed(const core::Value& b) noexcept;
std::int64_t current_healthy(const core::Value& b) noexcept;
std::int64_t desired_healthy(const core::Value& b) noexcept;
std::int64_t expected_pods(const core::Value& b) noexcept;
}  // namespace pdb

namespace lease {
std::string_view holder_identity(const core::Value& l) noexcept;
std::int64_t duration_seconds(const core::Value& l) noexcept;
std::int64_t transitions(const core::Value& l) noexcept;
std::optional<std::chrono::system_clock::time_point> renew_time(const core::Value& l);
std::optional<std::chrono::system_clock::time_point> acquire_time(const core::Value& l);
}  // namespace lease

namespace event {  // events.k8s.io/v1
std::string_view reason(const core::Value& e) noexcept;
std::string_view note(const core::Value& e) noexcept;
std::string_view type(const core::Value& e) noexcept;  // Normal or Warning
std::string_view regarding_name(const core::Value& e) noexcept;
std::string_view regarding_kind(const core::Value& e) noexcept;
// series.count, or 1 for a single occurrence.
std::int64_t count(const core::Value& e) noexcept;
}  // namespace event

namespace job {
std::int64_t active(const core::Value& j) noexcept;
std::int64_t succeeded(const core::Value& j) noexcept;
std::int64_t failed(const core::Value& j) noexcept;
bool complete(const core::Value& j) noexcept;            // condition Complete is True
bool failed_permanently(const core::Value& j) noexcept;  // condition Failed is True
}  // namespace job

namespace config_map {
std::optional<std::string_view> data(const core::Value& cm, std::string_view key) noexcept;
}  // namespace config_map

}  // namespace gpufleet::kube
