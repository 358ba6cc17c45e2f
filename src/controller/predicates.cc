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

Predicate fields_changed(std::vector<std::vector<std::string>> paths) {
  return on_update([paths = std::move(paths)](const core::Value& a, const core::Value& b) {
    for (const auto& path : paths) {
      const core::Value* x = &a;
      const core::Value* y = &b;
      for (const auto& key : path) {
        x = x != nullptr && x->is_map() ? x->find(key) : nullptr;
        y = y != nullptr && y->is_map() ? y->find(key) : nullptr;
      }
      if ((x == nullptr) != (y == nullptr) || (x != nullptr && *x != *y)) return true;
    }
    return false;
  });
}

Predicate annotations_changed_with_prefix(std::vector<std::string> prefixes) {
  return on_update([prefixes = std::move(prefixes)](const core::Value& a, const core::Value& b) {
    const core::Value& x = field(a, "annotations");
    const core::Value& y = field(b, "annotations");
    auto wanted = [&](std::string_view key) {
      for (const auto& p : prefixes)
        if (key.starts_with(p)) return true;
      return false;
    };
    // Both directions: a wanted key that changed or went, then one that appeared.
    auto differs = [&](const core::Value& from, const core::Value& to) {
      if (!from.is_map()) return false;
      for (const auto& e : from.as_map()) {
        if (!wanted(e.key)) continue;
        const core::Value* other = to.is_map() ? to.find(e.key) : nullptr;
        if (other == nullptr || *other != e.value) return true;
      }
      return false;
    };
    return differs(x, y) || differs(y, x);
  });
}

Predicate condition_changed(std::string type, std::vector<std::string> fields) {
  auto find = [type](const core::Value& obj) -> const core::Value* {
    const core::Value* conds = obj.get({"status", "conditions"});
    if (conds == nullptr || !conds->is_list()) return nullptr;
    for (const auto& c : conds->as_list())
      if (c.is_map() && c.get_string({"type"}) == type) return &c;
    return nullptr;
  };
  return on_update([find, fields = std::move(fields)](const core::Value& a, const core::Value& b) {
    const core::Value* x = find(a);
    const core::Value* y = find(b);
    if (x == nullptr || y == nullptr) return x != y;
    for (const auto& f : fields) {
      const core::Value* fx = x->find(f);
      const core::Value* fy = y->find(f);
      if ((fx == nullptr) != (fy == nullptr) || (fx != nullptr && *fx != *fy)) return true;
    }
    return false;
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
