#include "recipe/schema_check.h"

#include "core/errors.h"
#include "core/field_reader.h"
#include "kube/api/names.h"

namespace gpufleet::recipe::detail {

using core::InvalidInput;

std::string field_path(std::string_view where, std::string_view field) {
  std::string out(where);
  out += '.';
  out += field;
  return out;
}

const core::Map& expect_map(const core::Value& v, std::string_view where) {
  if (const core::Map* m = v.if_map()) return *m;
  throw InvalidInput(std::string(where) + ": expected a mapping but found " +
                     std::string(core::kind_name(v.kind())));
}

const core::List& expect_list(const core::Value& v, std::string_view where) {
  if (const core::List* l = v.if_list()) return *l;
  throw InvalidInput(std::string(where) + ": expected a list but found " +
                     std::string(core::kind_name(v.kind())));
}

const std::string& expect_string(const core::Value& v, std::string_view where) {
  if (const std::string* s = v.if_string()) return *s;
  throw InvalidInput(std::string(where) + ": expected a string but found " +
                     std::string(core::kind_name(v.kind())) +
                     " (quote values such as versions: \"1.20\")");
}

bool expect_bool(const core::Value& v, std::string_view where) {
  if (const bool* b = v.if_bool()) return *b;
  throw InvalidInput(std::string(where) + ": expected true or false but found " +
                     std::string(core::kind_name(v.kind())));
}

void check_keys(const core::Map& m, std::initializer_list<std::string_view> allowed,
                std::string_view where) {
  // `where` is "<source>: <path>" or "<source>"; core locates the path inside the source.
  const std::size_t sep = where.find(": ");
  if (sep == std::string_view::npos) {
    core::check_keys(m, allowed, where, "");
  } else {
    core::check_keys(m, allowed, where.substr(0, sep), where.substr(sep + 2));
  }
}

bool is_dns_label(std::string_view s) { return kube::check_dns_label(s).empty(); }

void expect_dns_label(std::string_view s, std::string_view where) {
  if (is_dns_label(s)) return;
  throw InvalidInput(std::string(where) + ": '" + std::string(s) +
                     "' is not a valid name; use 1-63 lower-case letters, digits and '-', "
                     "starting and ending with a letter or digit");
}

void check_header(const core::Value& doc, std::string_view kind, std::string_view where) {
  expect_map(doc, where);
  std::string_view api = doc.get_string({"apiVersion"});
  std::string_view k = doc.get_string({"kind"});
  if (api != "gpufleet.io/v1alpha1" || k != kind) {
    throw InvalidInput(std::string(where) + ": expected apiVersion gpufleet.io/v1alpha1 and kind " +
                       std::string(kind) + " but found apiVersion '" + std::string(api) +
                       "' kind '" + std::string(k) + "'");
  }
}

}  // namespace gpufleet::recipe::detail
