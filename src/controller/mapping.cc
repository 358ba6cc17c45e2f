#include "controller/mapping.h"

#include "controller/cache.h"
#include "kube/api/meta.h"
#include "kube/api/selector.h"

namespace gpufleet::controller::mapping {
namespace {

std::string_view group_of(std::string_view api_version) {
  auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view{} : api_version.substr(0, slash);
}

const core::Value* at_path(const core::Value& obj, std::string_view path) {
  const core::Value* v = &obj;
  while (v != nullptr && !path.empty()) {
    auto dot = path.find('.');
    v = v->find(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
  }
  return v;
}

}  // namespace

MapFunc to_self() {
  return [](const core::Value& obj) {
    return std::vector<Request>{
        {std::string(kube::namespace_of(obj)), std::string(kube::name_of(obj))}};
  };
}

MapFunc to_controller_owner(std::string owner_group, std::string owner_kind,
                            bool owner_namespaced) {
  return [group = std::move(owner_group), kind = std::move(owner_kind),
          owner_namespaced](const core::Value& obj) {
    std::vector<Request> out;
    const core::Value* refs = obj.get({"metadata", "ownerReferences"});
    if (refs == nullptr || !refs->is_list()) return out;
    for (const core::Value& ref : refs->as_list()) {
      const core::Value* ctl = ref.find("controller");
      if (ctl == nullptr || !ctl->is_bool() || !ctl->as_bool()) continue;
      if (ref.get_string({"kind"}) != kind) continue;
      if (group_of(ref.get_string({"apiVersion"})) != group) continue;
      out.push_back({owner_namespaced ? std::string(kube::namespace_of(obj)) : std::string(),
                     std::string(ref.get_string({"name"}))});
    }
    return out;
  };
}

MapFunc by_selector(const Cache& owners, std::string selector_path) {
  return by_selector([&owners] { return owners.list(); }, std::move(selector_path));
}

MapFunc by_selector(std::function<std::vector<kube::ObjectPtr>()> list_owners,
                    std::string selector_path) {
  return [list_owners = std::move(list_owners),
          path = std::move(selector_path)](const core::Value& obj) {
    static const core::Value kNoLabels;
    const core::Value* labels = obj.get({"metadata", "labels"});
    std::vector<Request> out;
    for (const kube::ObjectPtr& owner : list_owners()) {
      const core::Value* sel = at_path(*owner, path);
      if (sel == nullptr || sel->is_null()) continue;
      if (kube::selector_matches(*sel, labels != nullptr ? *labels : kNoLabels)) {
        out.push_back(
            {std::string(kube::namespace_of(*owner)), std::string(kube::name_of(*owner))});
      }
    }
    return out;
  };
}

}  // namespace gpufleet::controller::mapping
