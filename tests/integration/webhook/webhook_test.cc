// The validating admission webhook, called by the real kube-apiserver: a Certification whose
// threshold does not compile (or may cost too much) and a SentinelPolicy whose rule does not
// compile (or may cost more than its costLimit) are refused
// before they are stored, with the controller's own words; good ones pass; a rotated serving
// certificate is picked up without a restart. The Manager runs in process with certify's and
// sentinel's real setup; the webhook configuration matches only this test's objects (an
// objectSelector on a unique label), so a failing server cannot disturb other tests.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "certify/controller.h"
#include "controller/manager.h"
#include "controller/registry.h"
#include "core/base64.h"
#include "core/yaml.h"
#include "hostpkg/controller/reconciler.h"
#include "kube/api/objects.h"
#include "kube/errors.h"
#include "sentinel/controller.h"
#include "support/self_signed.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const kube::ResourceId kWebhooks{"admissionregistration.k8s.io", "v1",
                                 "validatingwebhookconfigurations", false};
const kube::ResourceId kCertifications{"gpufleet.io", "v1alpha1", "certifications", true};
const kube::ResourceId kSentinelPolicies{"gpufleet.io", "v1alpha1", "sentinelpolicies", false};
const kube::ResourceId kHostPackageSets{"gpufleet.io", "v1alpha1", "hostpackagesets", false};
const kube::ResourceId kDeploymentPolicies{"gpufleet.io", "v1alpha1", "deploymentpolicies", false};

std::string kubectl() {
  std::string kl = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  return (kl.empty() ? std::string("kubectl") : "'" + kl + "' kubectl") + " --kubeconfig '" +
         kube::testing::env_or_empty("KUBECONFIG") + "'";
}

bool eventually(const std::function<bool()>& f, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return f();
}

// One webhook entry per controller, as the chart writes them (templates/webhook.yaml): CREATE
// and UPDATE of its kinds, and DELETE of `deletes` (hostpkg: a DeploymentPolicy in use).
core::Value webhook_entry(const std::string& controller, const std::vector<std::string>& resources,
                          const std::vector<std::string>& deletes = {}) {
  core::Value h = core::parse_yaml(R"(
admissionReviewVersions: [v1]
sideEffects: None
failurePolicy: Fail
timeoutSeconds: 5
rules:
- apiGroups: [gpufleet.io]
  apiVersions: ["*"]
  operations: [CREATE, UPDATE]
  scope: "*"
)");
  h["name"] = controller + ".gpufleet.io";
  core::List kinds;
  for (const std::string& r : resources) kinds.emplace_back(r);
  h["rules"].as_list()[0]["resources"] = core::Value(std::move(kinds));
  if (!deletes.empty()) {
    core::Value del = h["rules"].as_list()[0];
    del["operations"] = core::Value(core::List{core::Value("DELETE")});
    core::List d;
    for (const std::string& r : deletes) d.emplace_back(r);
    del["resources"] = core::Value(std::move(d));
    h["rules"].push_back(std::move(del));
  }
  return h;
}

core::Value webhook_config(const std::string& name, const std::string& label, std::uint16_t port,
                           const std::string& ca_pem) {
  core::Value w;
  w["apiVersion"] = "admissionregistration.k8s.io/v1";
  w["kind"] = "ValidatingWebhookConfiguration";
  w["metadata"]["name"] = name;
  core::List hooks = {
      webhook_entry("certify", {"certifications", "workloadruns"}),
      webhook_entry("sentinel", {"sentinelpolicies"}),
      webhook_entry("hostpkg", {"hostpackagesets", "deploymentpolicies"}, {"deploymentpolicies"})};
  // All served by the one in-process Manager (the chart has a Service per controller).
  for (auto& hook : hooks) {
    hook["clientConfig"]["url"] = "https://127.0.0.1:" + std::to_string(port) + "/validate";
    hook["clientConfig"]["caBundle"] = core::base64_encode(ca_pem);
    hook["objectSelector"]["matchLabels"]["gpufleet.io/webhook-test"] = label;
  }
  w["webhooks"] = core::Value(std::move(hooks));
  return w;
}

class WebhookIT : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"certification", "workloadrun", "validationrequest", "sentinelpolicy",
                          "remediation", "nodehealth", "hostpackageset", "deploymentpolicy"}) {
      ASSERT_EQ(kube::testing::run_command(
                    kubectl() + " apply --server-side --force-conflicts -f " + GPUFLEET_SOURCE_DIR +
                    "/deploy/crds/" + f + ".yaml >/dev/null"),
                0)
          << f;
    }
    ASSERT_EQ(kube::testing::run_command(
                  kubectl() + " wait --for=condition=Established --timeout=30s "
                              "crd/certifications.gpufleet.io crd/sentinelpolicies.gpufleet.io "
                              "crd/hostpackagesets.gpufleet.io crd/deploymentpolicies.gpufleet.io "
                              ">/dev/null"),
              0);
    dir_ = fs::temp_directory_path() / kube::testing::unique_name("webhook-it");
    cert_ = testing::make_self_signed_cert();
    testing::write_cert_dir(cert_, dir_.string());
    label_ = kube::testing::unique_name("wh");
    hook_name_ = kube::testing::unique_name("gpufleet-webhook-it");
  }
  void TearDown() override {
    try {
      client_.remove(kWebhooks, "", hook_name_);
    } catch (const std::exception&) {
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  core::Value certification(const std::string& threshold) const {
    core::Value c = core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: Certification
metadata: {namespace: default}
spec:
  targets: {nodeNames: [no-such-node]}
  categories:
  - name: communication/nccl-all-reduce
)");
    c["metadata"]["name"] = kube::testing::unique_name("wh-cert");
    c["metadata"]["labels"]["gpufleet.io/webhook-test"] = label_;
    c["spec"]["categories"].as_list()[0]["thresholds"]["busBandwidthGBps"] = threshold;
    return c;
  }
  core::Value policy(const std::string& when) const {
    core::Value p = core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: SentinelPolicy
spec:
  rules:
  - {name: xid-fatal, cordon: true}
)");
    p["metadata"]["name"] = kube::testing::unique_name("wh-policy");
    p["metadata"]["labels"]["gpufleet.io/webhook-test"] = label_;
    p["spec"]["rules"].as_list()[0]["when"] = when;
    return p;
  }
  // Two packages that depend on each other (a cycle the CRD schema cannot see).
  core::Value package_set(bool cycle) const {
    core::Value p = core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: HostPackageSet
spec:
  nodeSelector: {matchLabels: {gpufleet.io/webhook-test-nodes: "none"}}
  packages:
    first: {version: 1.0.0, image: registry.example/first, dependsOn: [second]}
    second: {version: 1.0.0, image: registry.example/second}
)");
    p["metadata"]["name"] = kube::testing::unique_name("wh-set");
    p["metadata"]["labels"]["gpufleet.io/webhook-test"] = label_;
    if (cycle) p["spec"]["packages"]["second"]["dependsOn"].push_back("first");
    return p;
  }
  // Server-side dry run: admission runs in full, nothing is stored (so nothing is reconciled).
  // Returns "" when admitted, else the API server's message.
  std::string admit(const kube::ResourceId& r, const core::Value& obj) {
    kube::ApplyOptions o;
    o.field_manager = "webhook-it";
    o.dry_run = true;
    try {
      client_.apply(r, obj, o);
      return "";
    } catch (const kube::ApiError& e) {
      return e.what();
    }
  }

  kube::Client client_{kube::testing::admin_config()};
  fs::path dir_;
  testing::ServingCert cert_;
  std::string label_, hook_name_;
};

TEST_F(WebhookIT, RefusesWhatTheControllersCannotRunAndFollowsARotatedCertificate) {
  controller::ManagerOptions mo;
  mo.name = kube::testing::unique_name("webhook-it");
  mo.metrics_address = "";
  mo.webhook_address = "127.0.0.1:0";
  mo.webhook_cert_file = (dir_ / "tls.crt").string();
  mo.webhook_key_file = (dir_ / "tls.key").string();
  mo.webhook_reload_period = 200ms;
  kube::Client mgr_client(kube::testing::admin_config());
  controller::Manager manager(mgr_client, mo);
  controller::Context ctx;
  ctx.namespace_ = "default";
  certify::setup_certify(manager, ctx);
  sentinel::SentinelOptions so;
  // The policy the reconciler loads: created below without the test's label, so the webhook
  // (which matches only labelled objects) lets it through and the reconciler must refuse it.
  const std::string loaded = kube::testing::unique_name("wh-loaded");
  so.policies = {loaded};
  // A replacement provider the policy may name (only its name matters to admission).
  struct NoReplacement final : sentinel::ReplacementProvider {
    void request(const sentinel::ReplacementRequest&) override {}
    sentinel::ReplacementStatus poll(const sentinel::ReplacementRequest&) override { return {}; }
  };
  so.providers["test-cloud"] = std::make_shared<NoReplacement>();
  sentinel::setup_sentinel(manager, std::move(so));
  hostpkg::setup_hostpkg(manager, hostpkg::ControllerSettings{});
  EXPECT_EQ(manager.admission().kinds(),
            (std::vector<std::string>{"gpufleet.io/Certification", "gpufleet.io/DeploymentPolicy",
                                      "gpufleet.io/HostPackageSet", "gpufleet.io/SentinelPolicy",
                                      "gpufleet.io/WorkloadRun"}));
  std::stop_source stop;
  std::thread run([&] { manager.run(stop.get_token()); });
  struct Join {
    std::stop_source& s;
    std::thread& t;
    ~Join() {
      s.request_stop();
      t.join();
    }
  } join{stop, run};
  ASSERT_TRUE(eventually([&] { return manager.webhook_port() != 0; }, 10s));
  client_.create(kWebhooks,
                 webhook_config(hook_name_, label_, manager.webhook_port(), cert_.cert_pem));

  // The API server picks the configuration up within a moment; then a threshold that does not
  // compile is refused with certify's message naming the category, metric and expression.
  std::string refused;
  ASSERT_TRUE(eventually(
      [&] {
        refused = admit(kCertifications, certification("value >= "));
        return !refused.empty();
      },
      30s))
      << "a Certification with a broken threshold was admitted";
  // The client names the webhook (kubectl prints the server's own words: admission webhook
  // "certify.gpufleet.io" denied the request: ...).
  EXPECT_NE(refused.find("denied by admission webhook 'certify.gpufleet.io'"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("spec.categories[0].thresholds.busBandwidthGBps"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("value >= "), std::string::npos) << refused;
  EXPECT_EQ(admit(kCertifications, certification("value >= (groupSize > 8 ? 340.0 : 360.0)")), "");

  // A SentinelPolicy rule that does not compile, or uses an unknown variable, is refused naming
  // the rule; a good one passes.
  const std::string bad_rule = admit(kSentinelPolicies, policy("event.check == 'xid' &&"));
  EXPECT_NE(bad_rule.find("denied by admission webhook 'sentinel.gpufleet.io'"), std::string::npos)
      << bad_rule;
  EXPECT_NE(bad_rule.find("rule 'xid-fatal'.when"), std::string::npos) << bad_rule;
  EXPECT_EQ(admit(kSentinelPolicies, policy("event.check == 'xid' && event.state == 'Fatal'")), "");
  // A replacement provider this controller does not have is refused naming the ones it has.
  core::Value unknown = policy("event.check == 'xid'");
  unknown["spec"]["remediation"]["replacement"]["provider"] = "acme-cloud";
  const std::string provider = admit(kSentinelPolicies, unknown);
  EXPECT_NE(provider.find("denied by admission webhook 'sentinel.gpufleet.io'"), std::string::npos)
      << provider;
  EXPECT_NE(provider.find("spec.remediation.replacement.provider: \"acme-cloud\" is not a "
                          "replacement provider of this sentinel controller; use one of: "
                          "test-cloud"),
            std::string::npos)
      << provider;
  unknown["spec"]["remediation"]["replacement"]["provider"] = "test-cloud";
  EXPECT_EQ(admit(kSentinelPolicies, unknown), "");
  // A rule that compiles but whose worst case exceeds spec.costLimit (three nested passes over
  // the 32-entry history) is refused naming the rule, the estimate, the limit and the fix.
  const std::string costly = admit(
      kSentinelPolicies,
      policy("history.all(a, history.all(b, history.all(c, a.code + b.code + c.code >= 0)))"));
  EXPECT_NE(costly.find("denied by admission webhook 'sentinel.gpufleet.io'"), std::string::npos)
      << costly;
  EXPECT_NE(costly.find("rule 'xid-fatal'.when: estimated worst-case cost 363,618 units exceeds "
                        "spec.costLimit 100,000"),
            std::string::npos)
      << costly;
  EXPECT_NE(costly.find("up to 32 iterations"), std::string::npos) << costly;
  EXPECT_NE(costly.find("or split the rule, or raise spec.costLimit"), std::string::npos) << costly;
  // Iterating over a Node's labels has no bound; with a raised limit a bounded rule passes.
  const std::string labels =
      admit(kSentinelPolicies, policy("node.metadata.labels.exists(k, k == 'x')"));
  EXPECT_NE(labels.find("(no declared bound)"), std::string::npos) << labels;
  core::Value raised =
      policy("history.all(a, history.all(b, history.all(c, a.code + b.code + c.code >= 0)))");
  raised["spec"]["costLimit"] = 400000;
  EXPECT_EQ(admit(kSentinelPolicies, raised), "");
  // Stored past the webhook, the same rule is refused by the reconciler in the same words:
  // Ready=False/InvalidPolicy.
  core::Value unlabelled =
      policy("history.all(a, history.all(b, history.all(c, a.code + b.code + c.code >= 0)))");
  unlabelled["metadata"]["name"] = loaded;
  unlabelled["metadata"]["labels"] = core::Value::map();
  client_.create(kSentinelPolicies, unlabelled);
  struct Remove {
    kube::Client& c;
    const std::string& name;
    ~Remove() {
      try {
        c.remove(kSentinelPolicies, "", name);
      } catch (const std::exception&) {
      }
    }
  } remove{client_, loaded};
  std::string condition;
  ASSERT_TRUE(eventually(
      [&] {
        const core::Value p = client_.get(kSentinelPolicies, "", loaded);
        const core::Value* c = kube::find_condition(p, "Ready");
        if (c == nullptr || c->get_string({"reason"}) != "InvalidPolicy") return false;
        condition = std::string(c->get_string({"message"}));
        return true;
      },
      30s))
      << "the reconciler did not refuse the costly rule";
  EXPECT_NE(condition.find("rule 'xid-fatal'.when: estimated worst-case cost 363,618 units "
                           "exceeds spec.costLimit 100,000"),
            std::string::npos)
      << condition;
  // A threshold that iterates 20 × 20 × 20 times is over certify's 10,000 units.
  const std::string l20 = "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]";
  const std::string costly_threshold = admit(
      kCertifications,
      certification(l20 + ".all(a, " + l20 + ".all(b, " + l20 + ".all(c, value > a + b + c)))"));
  EXPECT_NE(costly_threshold.find("over the limit of 10000"), std::string::npos)
      << costly_threshold;

  // A HostPackageSet whose packages depend on each other is refused naming the cycle.
  const std::string cycle = admit(kHostPackageSets, package_set(true));
  EXPECT_NE(cycle.find("denied by admission webhook 'hostpkg.gpufleet.io'"), std::string::npos)
      << cycle;
  EXPECT_NE(cycle.find("first"), std::string::npos) << cycle;
  EXPECT_EQ(admit(kHostPackageSets, package_set(false)), "");
  // A package asking for more than its limit is refused naming the field, both values and the fix.
  core::Value over = package_set(false);
  over["spec"]["packages"]["first"]["resources"] =
      core::parse_yaml("{requests: {cpu: \"2\", memory: 1Gi}, limits: {cpu: 1500m}}");
  const std::string over_limit = admit(kHostPackageSets, over);
  EXPECT_NE(over_limit.find("denied by admission webhook 'hostpkg.gpufleet.io'"), std::string::npos)
      << over_limit;
  EXPECT_NE(over_limit.find("spec.packages.first.resources.requests.cpu: \"2\" is more than "
                            "limits.cpu \"1500m\""),
            std::string::npos)
      << over_limit;
  over["spec"]["packages"]["first"]["resources"]["limits"]["cpu"] = "2";
  EXPECT_EQ(admit(kHostPackageSets, over), "");

  // A DeploymentPolicy a set still names cannot be deleted: refused naming the set; once the set
  // is gone it can.
  core::Value pol = core::parse_yaml(R"(
apiVersion: gpufleet.io/v1alpha1
kind: DeploymentPolicy
spec: {default: {budget: {count: 1}, strategy: {fixed: {initialBatch: 1}}}}
)");
  const std::string pol_name = kube::testing::unique_name("wh-dpol");
  pol["metadata"]["name"] = pol_name;
  pol["metadata"]["labels"]["gpufleet.io/webhook-test"] = label_;
  client_.create(kDeploymentPolicies, pol);
  core::Value user = package_set(false);
  user["spec"]["deploymentPolicy"] = pol_name;
  const std::string user_name(user.get_string({"metadata", "name"}));
  client_.create(kHostPackageSets, user);
  std::string in_use;
  try {
    client_.remove(kDeploymentPolicies, "", pol_name);
  } catch (const kube::ApiError& e) {
    in_use = e.what();
  }
  EXPECT_NE(in_use.find("denied by admission webhook 'hostpkg.gpufleet.io'"), std::string::npos)
      << "a DeploymentPolicy in use was deleted: " << in_use;
  EXPECT_NE(in_use.find("HostPackageSet " + user_name), std::string::npos) << in_use;
  client_.remove(kHostPackageSets, "", user_name);
  ASSERT_TRUE(eventually(
      [&] { return !client_.try_get(kHostPackageSets, "", user_name).has_value(); }, 30s))
      << "the set did not go";
  EXPECT_NO_THROW(client_.remove(kDeploymentPolicies, "", pol_name));

  // Rotation: a new pair in the folder (as the kubelet swaps a Secret's files) and the new CA
  // in the configuration; the server follows without a restart and still refuses.
  const testing::ServingCert next = testing::make_self_signed_cert("gpufleet-rotated");
  testing::write_cert_dir(next, dir_.string());
  core::Value hook = client_.get(kWebhooks, "", hook_name_);
  for (auto& h : hook["webhooks"].as_list())
    h["clientConfig"]["caBundle"] = core::base64_encode(next.cert_pem);
  client_.update(kWebhooks, hook);
  ASSERT_TRUE(eventually(
      [&] {
        const std::string why = admit(kCertifications, certification("value >= "));
        return why.find("denied by admission webhook") != std::string::npos;
      },
      30s))
      << "no verdict from the webhook after the certificate was rotated";
  EXPECT_EQ(admit(kCertifications, certification("value >= 1.0")), "");
}

}  // namespace
}  // namespace gpufleet
