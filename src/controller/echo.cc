#include "controller/echo.h"

#include <condition_variable>
#include <mutex>

#include "controller/manager.h"
#include "controller/registry.h"
#include "core/duration.h"
#include "core/errors.h"

namespace gpufleet::controller {
namespace {

constexpr const char* kFieldManager = "gpufleet-echo";

const core::Value& data_of(const core::Value& obj) {
  static const core::Value kEmpty = core::Value::map();
  const core::Value* d = obj.find("data");
  return d != nullptr && !d->is_null() ? *d : kEmpty;
}

bool owned_by(const core::Value& copy, std::string_view uid) {
  const core::Value* refs = copy.get({"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_list()) return false;
  for (const core::Value& r : refs->as_list())
    if (r.get_string({"uid"}) == uid) return true;
  return false;
}

}  // namespace

EchoReconciler::EchoReconciler(kube::Client& client, const Cache& sources, const Cache& copies,
                               std::chrono::milliseconds delay)
    : client_(client), sources_(sources), copies_(copies), delay_(delay) {}

Result EchoReconciler::reconcile(const Request& request, std::stop_token stop) {
  kube::ObjectPtr source = sources_.get(request.key());
  // Deleted: the garbage collector removes the copy through its owner reference.
  if (source == nullptr) return {};
  std::string name = copy_name(request.name);
  kube::ObjectPtr copy = copies_.get(kube::object_key(request.namespace_, name));
  if (copy != nullptr && data_of(*copy) == data_of(*source) &&
      owned_by(*copy, kube::uid_of(*source)))
    return {};  // converged: write nothing

  if (delay_.count() > 0) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, delay_, [] { return false; });
    if (stop.stop_requested()) return {};  // nothing written; the next leader starts over
  }

  core::Value desired;
  desired["apiVersion"] = "v1";
  desired["kind"] = "ConfigMap";
  desired["metadata"]["name"] = name;
  desired["metadata"]["namespace"] = request.namespace_;
  desired["metadata"]["labels"][kEchoLabel] = "copy";
  core::Value owner;
  owner["apiVersion"] = "v1";
  owner["kind"] = "ConfigMap";
  owner["name"] = request.name;
  owner["uid"] = kube::uid_of(*source);
  owner["controller"] = true;
  owner["blockOwnerDeletion"] = true;
  desired["metadata"]["ownerReferences"].push_back(std::move(owner));
  desired["data"] = data_of(*source);
  kube::ApplyOptions o;
  o.field_manager = kFieldManager;
  o.force = true;
  client_.apply(kube::resources::config_maps(), desired, o);
  return {};
}

void setup_echo(Manager& manager, const Context& context) {
  std::chrono::milliseconds delay{0};
  std::string text = context.setting("echo.delay", "0s");
  try {
    delay = std::chrono::duration_cast<std::chrono::milliseconds>(core::parse_duration(text));
  } catch (const core::InvalidInput&) {
    throw core::InvalidInput("--set echo.delay=" + text + " is not a duration (e.g. 500ms, 2s)");
  }
  auto cms = kube::resources::config_maps();
  SourceOptions sources;
  sources.cache.namespace_ = context.namespace_;
  sources.cache.label_selector = std::string(kEchoLabel) + "=source";
  SourceOptions copies;
  copies.cache.namespace_ = context.namespace_;
  copies.cache.label_selector = std::string(kEchoLabel) + "=copy";
  Cache& source_cache = manager.cache(cms, sources.cache);
  Cache& copy_cache = manager.cache(cms, copies.cache);
  manager.controller("echo")
      .for_resource(cms, "ConfigMap", sources)
      .owns(cms, copies)
      .max_concurrent_reconciles(4)
      .complete(
          std::make_shared<EchoReconciler>(manager.client(), source_cache, copy_cache, delay));
}

}  // namespace gpufleet::controller
