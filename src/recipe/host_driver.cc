#include "recipe/host_driver.h"

#include <cctype>

#include "core/errors.h"
#include "core/semver.h"
#include "kube/api/names.h"

namespace gpufleet::recipe {

using core::Value;

namespace {

void check_options(const DriverSetOptions& o) {
  if (o.image.empty())
    throw core::InvalidInput(
        "--image: required; give the repository of the site's driver "
        "package image, e.g. registry.example/host/nvidia-driver");
  std::size_t slash = o.image.rfind('/');
  std::size_t colon = o.image.find(':', slash == std::string::npos ? 0 : slash);
  if (o.image.find('@') != std::string::npos || colon != std::string::npos) {
    throw core::InvalidInput("--image " + o.image +
                             ": give the repository without a tag or digest; the tag is the "
                             "driver version the recipe pins");
  }
  if (o.categories.empty())
    throw core::InvalidInput(
        "--validate: give at least one certify category (e.g. "
        "diagnostics/dcgm-r2): a new driver is proven before the node "
        "takes work");
  if (!o.deployment_policy.empty()) {
    if (std::string why = kube::check_dns_subdomain(o.deployment_policy); !why.empty())
      throw core::InvalidInput("--deployment-policy " + o.deployment_policy + ": " + why);
  }
}

// "gpu-driver-<pool>", the pool name made a DNS label (lower case, '-' for anything else).
std::string set_name(const std::string& pool) {
  std::string s = "gpu-driver-";
  for (char c : pool) {
    auto u = static_cast<unsigned char>(c);
    s += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '-';
  }
  while (s.size() > 63 || s.back() == '-') s.pop_back();
  return s;
}

std::string driver_field(const NodePool& p, const char* key) {
  const Value* d = p.settings.find("driver");
  const Value* v = d && d->is_map() ? d->find(key) : nullptr;
  const std::string* s = v ? v->if_string() : nullptr;
  return s ? *s : std::string();
}

Value node_selector(const NodePool& p) {
  Value sel = Value::map();
  if (const core::Map* labels = p.node_selector.if_map(); labels && !labels->empty())
    sel["matchLabels"] = p.node_selector;
  Value gpu = Value::map();
  gpu["key"] = "nvidia.com/gpu.present";
  gpu["operator"] = "Exists";
  Value exprs = Value::list();
  exprs.push_back(std::move(gpu));
  sel["matchExpressions"] = std::move(exprs);
  return sel;
}

}  // namespace

std::vector<Value> driver_package_sets(const Recipe& recipe, const DriverSetOptions& o) {
  check_options(o);
  std::vector<Value> out;
  std::vector<std::string> others;  // pools whose driver someone else installs, for the error
  for (const NodePool& p : recipe.pools) {
    std::string managed_by = driver_field(p, "managedBy");
    std::string version = driver_field(p, "version");
    if (managed_by != "host") {
      others.push_back(p.name + " (" + (managed_by.empty() ? "gpu-operator" : managed_by) + ")");
      continue;
    }
    if (!core::is_exact_pin(version)) {
      throw core::InvalidInput("recipe " + recipe.name + ": nodePools[" + p.name +
                               "].driver.version \"" + version +
                               "\": pin the host driver to an exact version (e.g. 580.126.20) "
                               "to roll it out");
    }
    Value set = Value::map();
    set["apiVersion"] = "gpufleet.io/v1alpha1";
    set["kind"] = "HostPackageSet";
    set["metadata"]["name"] = set_name(p.name);
    set["metadata"]["labels"]["recipe.gpufleet.io/pool"] = set_name(p.name).substr(11);
    set["metadata"]["annotations"]["recipe.gpufleet.io/recipe"] = recipe.name;
    if (!recipe.digest.empty())
      set["metadata"]["annotations"]["recipe.gpufleet.io/digest"] = recipe.digest;
    Value& spec = set["spec"];
    spec["nodeSelector"] = node_selector(p);
    if (!o.deployment_policy.empty()) spec["deploymentPolicy"] = o.deployment_policy;
    spec["priority"] = o.priority;
    Value categories = Value::list();
    for (const std::string& c : o.categories) categories.push_back(c);
    spec["validation"]["when"] = "Always";
    spec["validation"]["categories"] = std::move(categories);
    Value& pkg = spec["packages"]["nvidia-driver"];
    pkg["version"] = version;
    pkg["image"] = o.image;
    pkg["interrupt"]["type"] = "reboot";
    // A driver install builds kernel modules: minutes, not the stage default.
    pkg["timeouts"]["apply"] = "30m";
    pkg["timeouts"]["upgrade"] = "30m";
    pkg["timeouts"]["postInterrupt"] = "10m";
    pkg["downgrade"] = "inPlace";  // a driver package installs whichever version it is given
    out.push_back(std::move(set));
  }
  if (out.empty()) {
    std::string list;
    for (const std::string& s : others) list += (list.empty() ? "" : ", ") + s;
    throw core::InvalidInput(
        "recipe " + recipe.name + ": no node pool's host owns the GPU driver (" +
        (list.empty() ? "no pools" : list) +
        "); hostpkg rolls out host-image drivers only (nodePool.driver.managedBy: host, e.g. "
        "the oracle-linux overlay), the GPU Operator or the cloud rolls out the others");
  }
  return out;
}

}  // namespace gpufleet::recipe
