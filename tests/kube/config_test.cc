#include "kube/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "support/source_paths.h"

namespace gpufleet::kube {
namespace {

using ::testing::HasSubstr;

const std::string kData = std::string(GPUFLEET_SOURCE_DIR) + "/tests/kube/testdata";

ClientConfig load(std::vector<std::string> paths, std::string context = {}) {
  return load_kubeconfig({std::move(paths), std::move(context)});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(Kubeconfig, CurrentContextWithInlineData) {
  ClientConfig c = load({kData + "/kubeconfig-a.yaml"});
  EXPECT_EQ(c.server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c.ca_pem, "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n");
  EXPECT_THAT(c.client_cert_pem, HasSubstr("CERT"));
  EXPECT_THAT(c.client_key_pem, HasSubstr("PRIVATE KEY"));
  EXPECT_EQ(c.namespace_, "team-a");
  EXPECT_TRUE(c.token.empty());
  EXPECT_FALSE(c.exec.has_value());
  EXPECT_THAT(c.source, HasSubstr("context alpha"));
}

TEST(Kubeconfig, RelativeFilesResolveAgainstTheKubeconfigDirectory) {
  ClientConfig c = load({kData + "/kubeconfig-a.yaml"}, "shared");
  EXPECT_EQ(c.server, "https://a.example:6443");
  EXPECT_EQ(c.ca_pem, "-----BEGIN CERTIFICATE-----\nCA-A\n-----END CERTIFICATE-----\n");
  EXPECT_EQ(c.token_file, std::filesystem::absolute(kData + "/token-a").string());
  EXPECT_EQ(c.namespace_, "default");
}

TEST(Kubeconfig, MergeFirstFileWinsPerName) {
  // a first: current-context and the "shared" context/cluster come from a.
  ClientConfig ab = load({kData + "/kubeconfig-a.yaml", kData + "/kubeconfig-b.yaml"});
  EXPECT_EQ(ab.server, "https://10.0.0.1:6443");
  ClientConfig ab_shared =
      load({kData + "/kubeconfig-a.yaml", kData + "/kubeconfig-b.yaml"}, "shared");
  EXPECT_EQ(ab_shared.server, "https://a.example:6443");
  // Contexts only in b are still reachable.
  ClientConfig ab_beta = load({kData + "/kubeconfig-a.yaml", kData + "/kubeconfig-b.yaml"}, "beta");
  EXPECT_EQ(ab_beta.server, "https://staging.example:443");

  // b first: b's current-context, b's "shared" context.
  ClientConfig ba = load({kData + "/kubeconfig-b.yaml", kData + "/kubeconfig-a.yaml"});
  EXPECT_EQ(ba.server, "https://staging.example:443");
  ClientConfig ba_shared =
      load({kData + "/kubeconfig-b.yaml", kData + "/kubeconfig-a.yaml"}, "shared");
  EXPECT_EQ(ba_shared.server, "https://staging.example:443");
  ASSERT_TRUE(ba_shared.exec.has_value());
}

TEST(Kubeconfig, ExecPlugin) {
  ClientConfig c = load({kData + "/kubeconfig-b.yaml"});
  ASSERT_TRUE(c.exec.has_value());
  EXPECT_EQ(c.exec->api_version, "client.authentication.k8s.io/v1");
  EXPECT_EQ(c.exec->command, "./get-token.sh");
  EXPECT_THAT(c.exec->args, ::testing::ElementsAre("--cluster", "staging"));
  ASSERT_EQ(c.exec->env.size(), 1u);
  EXPECT_EQ(c.exec->env[0].first, "REGION");
  EXPECT_EQ(c.exec->env[0].second, "eu-1");
  EXPECT_TRUE(c.exec->provide_cluster_info);
  EXPECT_EQ(c.exec->working_dir, std::filesystem::absolute(kData).string());
  EXPECT_EQ(c.ca_pem, "-----BEGIN CERTIFICATE-----\nCA-B\n-----END CERTIFICATE-----\n");
}

TEST(Kubeconfig, KubeconfigEnvironmentSkipsMissingFiles) {
  std::string env =
      kData + "/missing.yaml:" + kData + "/kubeconfig-b.yaml:" + kData + "/kubeconfig-a.yaml";
  ::setenv("KUBECONFIG", env.c_str(), 1);
  ClientConfig c = load_kubeconfig();
  ::unsetenv("KUBECONFIG");
  EXPECT_EQ(c.server, "https://staging.example:443");
}

TEST(Kubeconfig, ErrorsNameTheFieldAndTheFix) {
  EXPECT_THAT(error_of([] { load({kData + "/kubeconfig-a.yaml"}, "nope"); }),
              HasSubstr("context \"nope\" not found (contexts: alpha, shared)"));
  EXPECT_THAT(error_of([] { load({kData + "/absent.yaml"}); }), HasSubstr("cannot read file"));

  auto text = [](const std::string& cluster, const std::string& user) {
    return "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n" +
           cluster +
           "contexts:\n- name: c\n  context: {cluster: k, user: u}\nusers:\n- name: u\n  user:\n" +
           user;
  };
  EXPECT_THAT(
      error_of([&] {
        load_kubeconfig_text(
            text("    server: https://x\n    insecure-skip-tls-verify: true\n", "    token: t\n"),
            "kc", "/tmp");
      }),
      HasSubstr("insecure-skip-tls-verify: true is refused"));
  EXPECT_THAT(error_of([&] {
                load_kubeconfig_text(
                    text("    server: https://x\n", "    client-certificate-data: QUJD\n"), "kc",
                    "/tmp");
              }),
              HasSubstr("needs its key"));
  EXPECT_THAT(error_of([&] {
                load_kubeconfig_text(
                    text("    server: https://x\n    certificate-authority-data: '@@@'\n",
                         "    token: t\n"),
                    "kc", "/tmp");
              }),
              HasSubstr("certificate-authority-data: not valid base64"));
  EXPECT_THAT(error_of([&] {
                load_kubeconfig_text(
                    text("    server: https://x\n",
                         "    exec:\n      apiVersion: "
                         "client.authentication.k8s.io/v1alpha1\n      command: x\n"),
                    "kc", "/tmp");
              }),
              HasSubstr("use client.authentication.k8s.io/v1"));
  EXPECT_THAT(error_of([&] {
                load_kubeconfig_text(
                    text("    server: https://x\n", "    username: a\n    password: b\n"), "kc",
                    "/tmp");
              }),
              HasSubstr("basic authentication"));
  EXPECT_THAT(
      error_of([&] { load_kubeconfig_text(text("    {}\n", "    token: t\n"), "kc", "/tmp"); }),
      HasSubstr("clusters[k].cluster.server: missing"));
  EXPECT_THAT(error_of([&] { load_kubeconfig_text("clusters: 3\n", "kc", "/tmp", "c"); }),
              HasSubstr("clusters must be a list"));
}

TEST(InClusterConfig, ReadsServiceAccountFiles) {
  auto dir =
      std::filesystem::temp_directory_path() / ("kube-incluster-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "tok\n";
  std::ofstream(dir / "ca.crt") << "CA";
  std::ofstream(dir / "namespace") << "gpufleet-system";
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  ClientConfig c = in_cluster_config(dir.string());
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.token_file, (dir / "token").string());
  EXPECT_EQ(c.ca_pem, "CA");
  EXPECT_EQ(c.namespace_, "gpufleet-system");
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  EXPECT_EQ(in_cluster_config(dir.string()).server, "https://[fd00::1]:443");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THAT(error_of([&] { in_cluster_config(dir.string()); }),
              HasSubstr("KUBERNETES_SERVICE_HOST"));
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpufleet::kube
