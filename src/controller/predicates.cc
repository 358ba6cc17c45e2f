#include "controller/predicates.h"

#include "kube/api/meta.h"

namespace gpufleet::controller::predicates {
namespace {

// An update filter: adds and deletes always pass.
Predicate on_update(std::function<bool(const core::Value& old_obj, const core::Value& obj)> f) {
  return [f = std::move(f)](const WatchEvent& ev) {
    if (ev.type != WatchEvent::Type::Update || ev.old_obj == nullptr) return true;
    return f(*ev.old_obj, ev.obj);
  };
}

const core::Value& field(const core::Value& obj, std::string_view name) {
  static const core::Value kNull;
  const core::Value* v = obj.get({"metadata", name});
  return v != nullptr ? *v : kNull;
}

}  // namespace

Predicate generation_changed() {
  return on_update([](const core::Value& a, const core::Value& b) {
    return field(a, "generation") != field(b, "generation");
  });
}

Predicate labels_changed() {
  return on_update([](const core::Value& a, const core::Value& b) {
    return field(a, "labels") != field(b, "labels");
  });
}

Predicate annotations_changed() {
  return on_update([](const core::Value& a, const core::Value& b) {
    return field(a, "annotations") != field(b, "annotations");
  });
}

Predicate resource_version_changed() {
  return on_update([](const core::Value& a, const core::Value& b) {
    return kube::resource_version_of(a) != kube::resource_version_of(b);
  });
}

Predicate any_of(std::vector<Predicate> ps) {
  return [ps = std::move(ps)](const WatchEvent& ev) {
    for (const auto& p : ps)
      if (p(ev)) return true;
    return false;
  };
}

Predicate all_of(std::vector<Predicate> ps) {
  return [ps = std::move(ps)](const WatchEvent& ev) { return passes(ps, ev); };
}

Predicate negate(Predicate p) {
  return [p = std::move(p)](const WatchEvent& ev) { return !p(ev); };
}

}  // namespace gpufleet::controller::predicates

namespace gpufleet::controller {

bool passes(const std::vector<Predicate>& ps, const WatchEvent& ev) {
  for (const auto& p : ps)
    if (!p(ev)) return false;
  return true;
}

}  // namespace gpufleet::controller
