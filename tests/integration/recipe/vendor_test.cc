// Air-gapped bundles end to end, with the real helm against a loopback HTTPS chart
// repository that has its own CA: `gpufleet bundle --vendor-charts --images --chart-ca-file`
// pulls the chart into the bundle with its provenance and lists the images the bundle's
// values make it run; then, with the repository gone, the bundle's install script is
// accepted by the API server (server-side dry run) — it reaches no repository.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/file_reader.h"
#include "core/http_server.h"
#include "core/sha256.h"
#include "core/yaml.h"
#include "recipe/recipe.h"
#include "support/self_signed.h"
#include "support/source_paths.h"
#include "test_env.h"

namespace gpufleet::recipe {
namespace {

namespace fs = std::filesystem;
using kube::testing::env_or_empty;
using kube::testing::run_command;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << text;
}

std::string read(const fs::path& p) { return core::read_file(p.string()); }

std::string q(const std::string& s) { return "'" + s + "'"; }

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / kube::testing::unique_name("vendor-it")) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(VendorIT, BundleCarriesTheChartAndInstallsWithoutTheRepository) {
  std::string helm = env_or_empty("HELM_BIN");
  if (helm.empty()) helm = std::string(GPUFLEET_SOURCE_DIR) + "/build/bin/helm";
  ASSERT_TRUE(fs::exists(helm)) << "helm not found at " << helm
                                << " (tools/helm-lint/build.sh builds it; or set HELM_BIN)";
  const std::string gpufleet = env_or_empty("GPUFLEET_BIN");
  ASSERT_FALSE(gpufleet.empty());
  TempDir tmp;
  const fs::path& work = tmp.path();

  // A chart with an image from its values, packaged as a repository serves it.
  write(work / "src/demo/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 1.2.3\n");
  write(work / "src/demo/values.yaml",
        "image: registry.example/demo:1.2.3\nhelper: busybox:1.36\n");
  write(work / "src/demo/templates/deployment.yaml", R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: demo}
spec:
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      initContainers: [{name: init, image: {{ .Values.helper | quote }}}]
      containers: [{name: demo, image: {{ .Values.image | quote }}}]
)");
  ASSERT_EQ(run_command(q(helm) + " package " + q((work / "src/demo").string()) + " -d " +
                        q((work / "repo").string()) + " >/dev/null"),
            0);

  // The repository: HTTPS with a CA of its own, serving index.yaml and the archive.
  const auto cert = testing::make_self_signed_cert("chart-repo");
  write(work / "ca.crt", cert.cert_pem);
  core::HttpServerOptions so;
  so.tls_cert_pem = cert.cert_pem;
  so.tls_key_pem = cert.key_pem;
  so.registry = nullptr;
  int pulls = 0;
  for (const char* file : {"index.yaml", "demo-1.2.3.tgz"}) {
    so.handlers[std::string("/") + file] = [&, file] {
      if (std::string(file).ends_with(".tgz")) ++pulls;
      return core::HttpResponse{200, "application/octet-stream", read(work / "repo" / file)};
    };
  }
  auto repo = std::make_unique<core::HttpServer>(std::move(so));
  ASSERT_EQ(
      run_command(q(helm) + " repo index " + q((work / "repo").string()) + " --url " + repo->url()),
      0);

  // A one-component recipe on that repository, its values overriding the chart's image.
  Recipe r;
  r.name = "vendor-it";
  r.digest = "sha256:" + core::sha256_hex("vendor-it");
  Component c;
  c.name = "demo";
  c.namespace_ = kube::testing::unique_name("vendor-it");
  c.chart = {repo->url(), "demo", "1.2.3", {}};
  c.values["image"] = "registry.example/demo:2.0.0";
  r.components.push_back(c);
  r.levels = {{"demo"}};
  write(work / "recipe.yaml", recipe_to_yaml(r));

  // Without the CA the pull is refused, naming the component and helm's reason.
  EXPECT_NE(run_command(q(gpufleet) + " bundle -r " + q((work / "recipe.yaml").string()) +
                        " --deployer helm --vendor-charts --helm " + q(helm) + " -o " +
                        q((work / "untrusted").string()) + " 2>" + q((work / "err").string())),
            0);
  EXPECT_NE(read(work / "err").find("--vendor-charts: pulling demo"), std::string::npos)
      << read(work / "err");

  const fs::path bundle = work / "bundle";
  ASSERT_EQ(run_command(q(gpufleet) + " bundle -r " + q((work / "recipe.yaml").string()) +
                        " --deployer helm --vendor-charts --images --helm " + q(helm) +
                        " --chart-ca-file " + q((work / "ca.crt").string()) + " -o " +
                        q(bundle.string()) + " >" + q((work / "out").string())),
            0);
  EXPECT_EQ(pulls, 1);
  EXPECT_NE(read(work / "out").find("1 charts vendored"), std::string::npos) << read(work / "out");
  // The archive, byte for byte, its provenance and checksum.
  const std::string archive = read(work / "repo/demo-1.2.3.tgz");
  EXPECT_EQ(read(bundle / "vendor/demo-1.2.3.tgz"), archive);
  const core::Value prov = core::parse_yaml(read(bundle / "vendor/provenance.yaml"));
  ASSERT_EQ(prov.get({"charts"})->size(), 1u);
  const core::Value& entry = prov.get({"charts"})->as_list()[0];
  EXPECT_EQ(entry.get_string({"repository"}), repo->url());
  EXPECT_EQ(entry.get_string({"sha256"}), core::sha256_hex(archive));
  EXPECT_EQ(run_command("cd " + q(bundle.string()) + " && sha256sum -c --quiet checksums.txt"), 0);
  // The images the bundle's values make it run (the recipe's image, the chart's helper).
  EXPECT_EQ(read(bundle / "images.txt"), "busybox:1.36\nregistry.example/demo:2.0.0\n");

  // The repository goes away; the bundle installs all the same (server-side dry run).
  repo.reset();
  fs::create_directories(work / "bin");
  fs::create_symlink(helm, work / "bin/helm");
  const std::string install = "PATH=" + q((work / "bin").string()) + ":\"$PATH\" " +
                              q((bundle / "components/demo/install.sh").string()) +
                              " --dry-run=server >" + q((work / "install").string()) + " 2>&1";
  EXPECT_EQ(run_command(install), 0) << read(work / "install");
  EXPECT_NE(read(work / "install").find("registry.example/demo:2.0.0"), std::string::npos)
      << read(work / "install");
  EXPECT_EQ(pulls, 1);
}

}  // namespace
}  // namespace gpufleet::recipe
