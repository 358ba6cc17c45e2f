// `gpufleet hostpkg status [NAME] [-o table|json|yaml]`: where every HostPackageSet's rollout
// stands (src/hostpkg/controller/status_view.h).
#include <CLI/CLI.hpp>

#include <iostream>

#include "api/resources.h"
#include "cli/command.h"
#include "cli/hostpkg_driver_set.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/yaml.h"
#include "hostpkg/controller/status_view.h"
#include "kube/client.h"
#include "kube/config.h"

namespace gpufleet::cli {
namespace {

struct StatusFlags {
  std::string name;
  std::string output = "table";
  std::string kubeconfig;
  std::string context;
};

void run_status(const StatusFlags& f) {
  if (f.output != "table" && f.output != "json" && f.output != "yaml")
    throw core::InvalidInput("-o " + f.output + ": use table, json or yaml");
  kube::Client client(kube::load_default_config(f.kubeconfig, f.context));
  const kube::ResourceId& sets = api::host_package_sets();
  std::vector<core::Value> items;
  if (!f.name.empty()) {
    items.push_back(client.get(sets, "", f.name));
  } else {
    items = client.list(sets, "").items;
  }
  if (f.output == "json") {
    std::cout << core::to_json(hostpkg::status_document(items), core::JsonStyle::Pretty) << "\n";
  } else if (f.output == "yaml") {
    std::cout << core::to_yaml(hostpkg::status_document(items));
  } else if (items.empty()) {
    std::cout << "No HostPackageSets.\n";
  } else {
    std::cout << hostpkg::render_status(items);
  }
}

void setup_hostpkg(CLI::App& root) {
  auto* cmd = root.add_subcommand("hostpkg", "Host package rollouts (HostPackageSets)");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<StatusFlags>();
  auto* st = cmd->add_subcommand(
      "status", "Progress of HostPackageSets: a table and a progress bar per compartment");
  st->add_option("name", flags->name, "one set (default: all)");
  st->add_option("-o,--output", flags->output, "table | json | yaml");
  st->add_option("--kubeconfig", flags->kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)");
  st->add_option("--context", flags->context, "kubeconfig context");
  st->callback([flags] { run_status(*flags); });
  add_hostpkg_driver_set(*cmd);
}

const CommandRegistration kHostpkg(setup_hostpkg);

}  // namespace
}  // namespace gpufleet::cli
