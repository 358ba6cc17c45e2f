#include "kube/api/names.h"

#include <cctype>

namespace gpufleet::kube {
namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string check_name_part(std::string_view s) {
  if (s.empty()) return "the name part is empty";
  if (s.size() > 63) return "the name part is longer than 63 characters";
  if (!alnum(s.front()) || !alnum(s.back())) {
    return "the name part must start and end with a letter or digit";
  }
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') {
      return std::string("the name part holds '") + c + "'; only letters, digits, '-', '_', '.'";
    }
  }
  return {};
}

}  // namespace

std::string check_dns_subdomain(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 253) return "is longer than 253 characters";
  for (char c : name) {
    if (!lower_alnum(c) && c != '-' && c != '.') {
      return std::string("holds '") + c + "'; only lower-case letters, digits, '-' and '.'";
    }
  }
  if (!lower_alnum(name.front()) || !lower_alnum(name.back())) {
    return "must start and end with a lower-case letter or digit";
  }
  return {};
}

std::string check_dns_label(std::string_view name) {
  if (name.size() > 63) return "is longer than 63 characters";
  if (name.find('.') != std::string_view::npos)
    return "holds '.'; only lower-case letters, digits and '-'";
  return check_dns_subdomain(name);
}

std::string check_label_key(std::string_view key) {
  auto slash = key.find('/');
  if (slash != std::string_view::npos) {
    std::string prefix_problem = check_dns_subdomain(key.substr(0, slash));
    if (!prefix_problem.empty()) return "prefix " + prefix_problem;
    return check_name_part(key.substr(slash + 1));
  }
  return check_name_part(key);
}

std::string check_label_value(std::string_view value) {
  if (value.empty()) return {};
  return check_name_part(value);
}

}  // namespace gpufleet::kube
