// Every CRD in deploy/crds/ follows the pattern of docs/deploy.md, and the API server enforces
// each of its validation rules: applied with `kubectl apply --server-side` to kube-local, then
// the cases in deploy/crds/tests/<crd name>.yaml are created (valid ones must be accepted,
// invalid ones rejected with the expected message), and every x-kubernetes-validations message
// of the CRD must be exercised by an invalid case.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/yaml.h"
#include "integration/kube/test_env.h"
#include "kube/errors.h"
#include "support/source_paths.h"

namespace gpufleet {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string kubectl() {
  std::string bin = kube::testing::env_or_empty("KUBE_LOCAL_BIN");
  return ::system("kubectl version --client >/dev/null 2>&1") == 0 ? "kubectl" : bin + " kubectl";
}

void collect_rule_messages(const core::Value& schema, std::set<std::string>& out) {
  if (const auto* rules = schema.find("x-kubernetes-validations");
      rules != nullptr && rules->is_list())
    for (const auto& r : rules->as_list()) out.insert(std::string(r.get_string({"message"})));
  if (const auto* props = schema.find("properties"); props != nullptr && props->is_map())
    for (const auto& [k, v] : props->as_map()) collect_rule_messages(v, out);
  if (const auto* items = schema.find("items"); items != nullptr && items->is_map())
    collect_rule_messages(*items, out);
  if (const auto* ap = schema.find("additionalProperties"); ap != nullptr && ap->is_map())
    collect_rule_messages(*ap, out);
}

std::vector<fs::path> crd_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(GPUFLEET_SOURCE_DIR) / "deploy/crds"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The static half of the pattern: no cluster needed.
TEST(CrdPattern, EveryCrdFollowsThePattern) {
  auto files = crd_files();
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    auto crd = core::parse_yaml(read(f), f.string());
    const std::string kind(crd.get_string({"spec", "names", "kind"}));
    std::string lower;
    for (char c : kind)
      lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    EXPECT_EQ(f.filename().string(), lower + ".yaml")
        << "one file per kind, named <kind lower case>.yaml";
    EXPECT_EQ(crd.get_string({"spec", "group"}), "gpufleet.io");
    EXPECT_EQ(crd.get_string({"metadata", "labels", "app.kubernetes.io/part-of"}), "gpufleet");
    const auto* versions = crd.get({"spec", "versions"});
    ASSERT_NE(versions, nullptr);
    for (const auto& v : versions->as_list()) {
      EXPECT_NE(v.get({"subresources", "status"}), nullptr) << "status subresource";
      const auto* cols = v.find("additionalPrinterColumns");
      EXPECT_TRUE(cols != nullptr && cols->size() >= 2) << "printer columns";
      const auto* schema = v.get({"schema", "openAPIV3Schema"});
      ASSERT_NE(schema, nullptr);
      EXPECT_NE(schema->get({"properties", "spec"}), nullptr);
      EXPECT_NE(schema->get({"properties", "status"}), nullptr);
      std::set<std::string> messages;
      collect_rule_messages(*schema, messages);
      EXPECT_FALSE(messages.empty()) << "at least one x-kubernetes-validations rule";
      EXPECT_EQ(messages.count(""), 0u) << "every rule has a message naming the field and the fix";
    }
    const std::string name(crd.get_string({"metadata", "name"}));
    EXPECT_TRUE(fs::exists(f.parent_path() / "tests" / (name + ".yaml")))
        << "cases in deploy/crds/tests/" << name << ".yaml";
  }
}

TEST(CrdValidation, ApiServerEnforcesEveryRule) {
  const std::string k = kubectl() + " --kubeconfig " + kube::testing::env_or_empty("KUBECONFIG");
  kube::Client client(kube::testing::admin_config());
  kube::testing::TestNamespace ns(client, "crd-validation");
  for (const auto& f : crd_files()) {
    SCOPED_TRACE(f.string());
    auto crd = core::parse_yaml(read(f), f.string());
    const std::string name(crd.get_string({"metadata", "name"}));
    ASSERT_EQ(kube::testing::run_command(
                  k + " apply --server-side --force-conflicts --field-manager=crd-validation -f " +
                  f.string() + " >/dev/null"),
              0);
    ASSERT_EQ(
        kube::testing::run_command(k + " wait --for=condition=Established --timeout=30s crd/" +
                                   name + " >/dev/null"),
        0);
    std::set<std::string> rules;
    for (const auto& v : crd.get({"spec", "versions"})->as_list())
      collect_rule_messages(*v.get({"schema", "openAPIV3Schema"}), rules);

    const fs::path cases_file = f.parent_path() / "tests" / (name + ".yaml");
    auto cases = core::parse_yaml(read(cases_file), cases_file.string());
    std::vector<std::pair<kube::ResourceId, std::string>> created;
    auto resource_of = [&](const core::Value& obj) {
      // Discovery of a just-established CRD can lag: retry briefly.
      for (int i = 0;; ++i) {
        try {
          return client.resource_for(obj.get_string({"apiVersion"}), obj.get_string({"kind"}));
        } catch (const kube::ApiError&) {
          if (i > 40) throw;
          client.invalidate_discovery();
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
      }
    };
    auto place = [&](core::Value obj, const kube::ResourceId& r) {
      if (r.namespaced) obj["metadata"]["namespace"] = ns.name();
      return obj;
    };
    auto remember = [&](const kube::ResourceId& r, const core::Value& obj) {
      created.emplace_back(r, std::string(obj.get_string({"metadata", "name"})));
    };
    for (const auto& valid : cases.find("valid")->as_list()) {
      auto r = resource_of(valid);
      EXPECT_NO_THROW(client.create(r, place(valid, r))) << "valid object rejected";
      remember(r, valid);
    }
    std::set<std::string> exercised;
    for (const auto& c : cases.find("invalid")->as_list()) {
      const std::string case_name(c.get_string({"name"}));
      const std::string expect(c.get_string({"expect"}));
      SCOPED_TRACE("case " + case_name);
      const core::Value& obj = *c.find("object");
      auto r = resource_of(obj);
      const bool status = c.get_string({"subresource"}) == "status";
      std::string error;
      try {
        if (const auto* before = c.find("before")) {
          auto existing = client.create(r, place(*before, r));
          remember(r, *before);
          if (const auto* st = before->find("status")) {
            existing["status"] = *st;
            existing = client.update_status(r, existing);
          }
          core::Value next = place(obj, r);
          next["metadata"]["resourceVersion"] =
              std::string(existing.get_string({"metadata", "resourceVersion"}));
          status ? client.update_status(r, next) : client.update(r, next);
        } else {
          client.create(r, place(obj, r));
          remember(r, obj);
        }
      } catch (const kube::ApiError& e) {
        error = e.what();
      }
      EXPECT_NE(error, "") << "invalid object accepted";
      EXPECT_NE(error.find(expect), std::string::npos)
          << "rejected without '" << expect << "': " << error;
      if (!error.empty() && error.find(expect) != std::string::npos) exercised.insert(expect);
    }
    for (const auto& rule : rules) {
      bool covered = false;
      for (const auto& e : exercised) covered = covered || rule.find(e) != std::string::npos;
      EXPECT_TRUE(covered) << "no invalid case in " << cases_file << " exercises the rule '" << rule
                           << "'";
    }
    for (const auto& [r, n] : created) {
      try {
        client.remove(r, r.namespaced ? ns.name() : "", n);
      } catch (const kube::ApiError&) {
      }
    }
  }
}

}  // namespace
}  // namespace gpufleet
