// Kubernetes naming rules, checked before anything is sent to an API server so that a bad
// document fails at load time with the field named, not at the server.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::kube {

// RFC 1123 subdomain (Node names): lower-case alphanumerics, '-' and '.', at most 253.
// Returns an empty string when valid, otherwise what is wrong.
std::string check_dns_subdomain(std::string_view name);
// RFC 1123 label (most object names: Namespaces, Services, Helm releases): lower-case
// alphanumerics and '-', at most 63, alphanumeric at both ends.
std::string check_dns_label(std::string_view name);
// Label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
std::string check_label_key(std::string_view key);
// Label value: empty, or at most 63 alphanumerics, '-', '_', '.', alphanumeric at both ends.
std::string check_label_value(std::string_view value);

}  // namespace gpufleet::kube
