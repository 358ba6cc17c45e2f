// `gpufleet goodput [-o table|json]`: the fleet's goodput from the ledger ConfigMaps the goodput
// controller writes (src/goodput/view.h); and the goodput controller's registration with
// `gpufleet controller` (src/goodput/controller.h).
#include <CLI/CLI.hpp>

#include <iostream>

#include "api/resources.h"
#include "cli/command.h"
#include "controller/registry.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/time.h"
#include "goodput/controller.h"
#include "goodput/view.h"
#include "kube/api/resource.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/errors.h"

namespace gpufleet::cli {
namespace {

const controller::Registration kGoodputController({
    .name = "goodput",
    .description = "measures goodput: per job (pods grouped into gangs) productive and lost time "
                   "by cause from its pods and Remediations, kept in one ConfigMap per job",
    .settings = {{"goodput.namespace",
                  "namespace of the ledger ConfigMaps (default gpufleet-system)"},
                 {"goodput.retention",
                  "how long a finished job's ledger is kept after its pods are gone (default 7d)"}},
    .setup = goodput::setup_goodput,
});

struct GoodputFlags {
  std::string output = "table";
  std::string kubeconfig;
  std::string context;
  std::string namespace_ = std::string(goodput::kDefaultNamespace);
};

void run_goodput(const GoodputFlags& f) {
  if (f.output != "table" && f.output != "json")
    throw core::InvalidInput("-o/--output: value \"" + f.output +
                             "\" is not supported (use table or json)");
  kube::Client client(kube::load_default_config(f.kubeconfig, f.context));
  kube::ListOptions lo;
  lo.label_selector = std::string(goodput::kLedgerJobNamespaceLabel);
  std::vector<core::Value> cms =
      client.list(kube::resources::config_maps(), f.namespace_, lo).items;
  std::vector<core::Value> rems;
  try {  // where sentinel's CRD is not installed there are no incidents
    rems = client.list(api::remediations(), "").items;
  } catch (const kube::ApiError& e) {
    if (!e.is(kube::Reason::NotFound)) throw;
  }
  const core::Value doc = goodput::goodput_document(cms, rems, core::Timestamp::now().seconds);
  if (f.output == "json") {
    std::cout << core::to_json(doc, core::JsonStyle::Pretty) << "\n";
  } else {
    std::cout << goodput::render_goodput(doc);
  }
}

void setup_goodput_command(CLI::App& root) {
  auto flags = std::make_shared<GoodputFlags>();
  auto* cmd = root.add_subcommand(
      "goodput", "Goodput of the fleet and its jobs (ETTR, time lost by cause) and lemon nodes");
  cmd->add_option("-o,--output", flags->output, "table | json");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)");
  cmd->add_option("--context", flags->context, "kubeconfig context");
  cmd->add_option("--namespace", flags->namespace_,
                  "namespace of the ledger ConfigMaps (the controller's goodput.namespace)");
  cmd->callback([flags] { run_goodput(*flags); });
}

const CommandRegistration kGoodput(setup_goodput_command);

}  // namespace
}  // namespace gpufleet::cli
