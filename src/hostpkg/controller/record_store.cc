#include "hostpkg/controller/record_store.h"

#include "core/json.h"
#include "kube/api/meta.h"
#include "kube/api/objects.h"

namespace gpufleet::hostpkg {

std::string record_annotation(std::string_view set) {
  return std::string(kRecordPrefix) + std::string(set);
}

RecordRead parse_record_text(std::string_view set, std::string_view text) {
  RecordRead out;
  const std::string key = record_annotation(set);
  core::Value v;
  try {
    v = core::parse_json(text, key);
  } catch (const std::exception& e) {
    out.error = "annotation " + key + ": not JSON (" + e.what() +
                "); remove the annotation to start the node over";
    return out;
  }
  out = record_from_value(v);
  if (!out.error.empty()) {
    out.error = "annotation " + key + ": " + out.error;
  } else if (out.record->set != set) {
    out.error = "annotation " + key + ": record.set is \"" + out.record->set +
                "\"; a record belongs to the set its annotation names";
    out.record.reset();
  }
  return out;
}

RecordRead read_record(const core::Value& node, std::string_view set) {
  std::string_view text = kube::annotation_of(node, record_annotation(set));
  if (text.empty()) return {};
  return parse_record_text(set, text);
}

core::Value record_patch(const core::Value& node, std::string_view set, NodeRecord record,
                         core::Value base) {
  record.set = std::string(set);
  record.generation += 1;
  core::Value& meta = base["metadata"];
  meta["resourceVersion"] = std::string(kube::resource_version_of(node));
  meta["annotations"][record_annotation(set)] = core::to_json(record_to_value(record));
  return base;
}

core::Value record_removal_patch(const core::Value& node, std::string_view set) {
  core::Value p = core::Value::map();
  p["metadata"]["resourceVersion"] = std::string(kube::resource_version_of(node));
  p["metadata"]["annotations"][record_annotation(set)] = core::Value();
  return p;
}

}  // namespace gpufleet::hostpkg
