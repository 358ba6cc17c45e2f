#include "hostpkg_env.h"

#include <unistd.h>

#include <cstdlib>

#include "api/resources.h"
#include "core/yaml.h"
#include "hostpkg/controller/reconciler.h"
#include "kube/api/conditions.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "sim/fleet_spec.h"
#include "support/source_paths.h"

namespace gpufleet::hostpkg::testing {
namespace {

using namespace std::chrono_literals;

const kube::ResourceId kSets{"gpufleet.io", "v1alpha1", "hostpackagesets", false};
const kube::ResourceId kPolicies{"gpufleet.io", "v1alpha1", "deploymentpolicies", false};

// Every stage pod of the tests' packages (runner and package images under example.com/)
// acts on the host model. Package images named "flaky" fail their first apply on node 000.
constexpr const char* kBehaviours = R"(
apiVersion: gpufleet.io/v1alpha1
kind: BehaviourTable
behaviours:
- name: flaky-package
  match: {image: "*example.com/flaky*"}
  startDelay: 0s
  duration: 200ms
  hostStep:
    failures:
      - {stage: apply, nodes: "*-000", status: check-failed, times: 1, message: "vm.max_map_count is 65530, want 1048576"}
# A package whose stages take a while (budget tests need a node held in progress).
- name: slow-package
  match: {image: "*example.com/slow*"}
  startDelay: 0s
  duration: 12s
- name: test-package
  match: {image: "*example.com/*"}
  startDelay: 0s
  duration: 200ms
  hostStep:
    effects:
      apply: {sysctls: {vm.max_map_count: "1048576"}, files: {/etc/pkgtest/version: "{version}"}}
      upgrade: {files: {/etc/pkgtest/version: "{version}"}}
      uninstall: {files: {/etc/pkgtest/version: null}}
    rebootDown: 1s
- name: long-running
  match: {restartPolicy: Always}
  startDelay: 0s
  duration: forever
)";

std::string kubectl() {
  if (std::system("kubectl version --client >/dev/null 2>&1") == 0) return "kubectl";
  const char* kl = std::getenv("KUBE_LOCAL_BIN");
  return kl != nullptr ? std::string("'") + kl + "' kubectl" : "kubectl";
}

}  // namespace

HostPkgEnv::HostPkgEnv(int nodes, bool controller, std::string state_dir) {
  client_ = std::make_unique<kube::Client>(kube::load_default_config());
  const std::string run = std::to_string(::getpid());
  const char* kc = std::getenv("KUBECONFIG");
  std::string k = kubectl() + " --kubeconfig '" + (kc ? kc : "") + "'";
  // remediation: sentinel's incidents, which hostpkg reads as nodes out.
  // validationrequest: certify's requests, which hostpkg asks before an uncordon.
  for (const char* crd :
       {"hostpackageset", "deploymentpolicy", "remediation", "validationrequest"}) {
    std::string file = std::string(GPUFLEET_SOURCE_DIR) + "/deploy/crds/" + crd + ".yaml";
    if (std::system(
            (k + " apply --server-side --force-conflicts -f " + file + " >/dev/null").c_str()) != 0)
      throw std::runtime_error("cannot apply " + file);
  }
  for (const char* crd : {"hostpackagesets.gpufleet.io", "deploymentpolicies.gpufleet.io",
                          "remediations.gpufleet.io", "validationrequests.gpufleet.io"}) {
    std::system(
        (k + " wait --for=condition=Established --timeout=30s crd/" + crd + " >/dev/null").c_str());
  }
  static int counter = 0;
  pool_ = "hp" + run + "x" + std::to_string(counter++);
  ns_ = "hostpkg-" + pool_;
  core::Value ns;
  ns["apiVersion"] = "v1";
  ns["kind"] = "Namespace";
  ns["metadata"]["name"] = ns_;
  client_->create(kube::resources::namespaces(), ns);
  eventually(
      [&] {
        return client_->try_get(kube::resources::service_accounts(), ns_, "default").has_value();
      },
      30s);

  std::string fleet = "apiVersion: gpufleet.io/v1alpha1\nkind: Fleet\nmetadata: {name: " + pool_ +
                      "}\nspec:\n  seed: 7\n  pools:\n  - name: " + pool_ +
                      "\n    count: " + std::to_string(nodes) +
                      "\n    namePattern: \"{pool}-{index:03}\"\n    gpu: {product: h100}\n";
  sim::KubeletOptions o;
  o.lease_renew = 5s;
  o.status_report = 60s;
  o.tick = 100ms;
  o.state_dir = std::move(state_dir);
  sim_ = std::make_unique<sim::FleetKubelet>(
      *client_, sim::parse_fleet(core::parse_yaml(fleet), "itest"),
      sim::BehaviourTable::parse(core::parse_yaml(kBehaviours), "itest"), o);
  sim_->start();
  // 500-node fault runs register for minutes on a loaded machine.
  if (!sim_->wait_registered(60s + nodes * 300ms))
    throw std::runtime_error("fleet did not register");
  certify_ = std::jthread([this](std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(200ms);
      if (!pass_validations) continue;
      try {
        kube::ListOptions o;
        o.label_selector = "hostpkg.gpufleet.io/node";
        for (const auto& vr : client_->list(api::validation_requests(), "", o).items) {
          const std::string node(vr.get_string({"metadata", "labels", "hostpkg.gpufleet.io/node"}));
          if (!node.starts_with(pool_ + "-") || !vr.get_string({"status", "phase"}).empty())
            continue;
          answer_validation(std::string(vr.get_string({"metadata", "name"})), node, "Passed");
        }
      } catch (const std::exception&) {
      }
    }
  });
  if (controller) start_controller();
}

HostPkgEnv::~HostPkgEnv() {
  certify_.request_stop();
  if (certify_.joinable()) certify_.join();
  stop_controller();
  try {
    client_->remove(kube::resources::namespaces(), "", ns_);
  } catch (const std::exception&) {
  }
  sim_->stop(true);
}

std::string HostPkgEnv::node(int i) const {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%03d", i);
  return pool_ + "-" + buf;
}

std::string HostPkgEnv::node_list(int from, int to) const {
  std::string out = "[";
  for (int i = from; i < to; ++i) out += (i > from ? ", " : "") + node(i);
  return out + "]";
}

void HostPkgEnv::start_controller() {
  controller::ManagerOptions mo;
  mo.name = "hostpkg-itest";
  mo.metrics_address = "";
  mo.shutdown_grace = 2s;
  mo.clock = clock;
  manager_ = std::make_unique<controller::Manager>(*client_, mo);
  ControllerSettings s;
  s.namespace_ = ns_;
  s.runner_image = "example.com/gpufleet:test";
  s.poll = 300ms;
  s.reverify_interval = reverify_interval;
  setup_hostpkg(*manager_, s);
  stop_ = std::stop_source();
  thread_ = std::thread([this] { manager_->run(stop_.get_token()); });
}

void HostPkgEnv::stop_controller() {
  if (!thread_.joinable()) return;
  stop_.request_stop();
  thread_.join();
  manager_.reset();
}

std::vector<core::Value> HostPkgEnv::validation_requests(const std::string& node) {
  kube::ListOptions o;
  o.label_selector = "hostpkg.gpufleet.io/node=" + node;
  return client_->list(api::validation_requests(), "", o).items;
}

void HostPkgEnv::answer_validation(const std::string& request, const std::string& node,
                                   const std::string& phase, const std::string& category,
                                   const std::string& reason, const std::string& message) {
  core::Value result;
  result["node"] = node;
  result["verdict"] = phase == "Passed" ? "Passed" : "Failed";
  if (!category.empty()) result["category"] = category;
  if (!reason.empty()) result["reason"] = reason;
  if (!message.empty()) result["message"] = message;
  core::Value patch;
  patch["status"]["phase"] = phase;
  patch["status"]["nodeCount"] = 1;
  patch["status"]["failedCount"] = phase == "Passed" ? 0 : 1;
  if (phase != "Expired") patch["status"]["results"].push_back(std::move(result));
  if (phase == "Expired") patch["status"]["message"] = "no verdict before the deadline";
  client_->patch(api::validation_requests(), "", request, kube::PatchType::Merge, patch, "status");
}

void HostPkgEnv::apply(const std::string& yaml) {
  core::Value obj = core::parse_yaml(yaml, "test");
  kube::ApplyOptions o;
  o.field_manager = "hostpkg-test";
  o.force = true;
  const kube::ResourceId& r = obj.get_string({"kind"}) == "HostPackageSet" ? kSets : kPolicies;
  client_->apply(r, obj, o);
}

core::Value HostPkgEnv::get_set(const std::string& name) { return client_->get(kSets, "", name); }

core::Value HostPkgEnv::get_node(const std::string& name) {
  return client_->get(kube::resources::nodes(), "", name);
}

void HostPkgEnv::remove_set(const std::string& name) {
  try {
    client_->remove(kSets, "", name);
  } catch (const kube::ApiError&) {
  }
}

bool HostPkgEnv::eventually(const std::function<bool()>& check, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (check()) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(100ms);
  }
  try {
    return check();
  } catch (const std::exception&) {
    return false;
  }
}

Cond condition(const core::Value& obj, const std::string& type) {
  const core::Value* conds = obj.get({"status", "conditions"});
  if (conds == nullptr || !conds->is_list()) return {};
  for (const auto& c : conds->as_list()) {
    if (c.get_string({"type"}) == type)
      return {std::string(c.get_string({"status"})), std::string(c.get_string({"reason"})),
              std::string(c.get_string({"message"}))};
  }
  return {};
}

std::int64_t status_int(const core::Value& set, const std::string& field) {
  const core::Value* v = set.get({"status", field});
  return v != nullptr && v->is_int() ? v->as_int() : -1;
}

}  // namespace gpufleet::hostpkg::testing
