// Small helpers for checking the shape of library and recipe documents with messages that
// name the file, the field and the fix. Internal to the recipe module.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/value.h"

namespace gpufleet::recipe::detail {

// "where.field" for messages.
std::string field_path(std::string_view where, std::string_view field);

const core::Map& expect_map(const core::Value& v, std::string_view where);
const core::List& expect_list(const core::Value& v, std::string_view where);
const std::string& expect_string(const core::Value& v, std::string_view where);
bool expect_bool(const core::Value& v, std::string_view where);

// Throws when `m` holds a key outside `allowed` (core::check_keys: line:column inside a
// core::DocumentScope, "did you mean" for near misses). `where` is "<source>: <path>".
void check_keys(const core::Map& m, std::initializer_list<std::string_view> allowed,
                std::string_view where);

// Kubernetes object names (DNS-1123 labels): lower-case alphanumerics and '-', <= 63.
bool is_dns_label(std::string_view s);
void expect_dns_label(std::string_view s, std::string_view where);

// Checks apiVersion gpufleet.io/v1alpha1 and the kind.
void check_header(const core::Value& doc, std::string_view kind, std::string_view where);

}  // namespace gpufleet::recipe::detail
