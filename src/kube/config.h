// Where the API server is and how to authenticate: from kubeconfig files (merged like kubectl
// does for KUBECONFIG=a:b:c) or from the in-cluster service account.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpufleet::kube {

// users[].user.exec: a client.authentication.k8s.io/v1 credential plugin.
struct ExecConfig {
  std::string api_version;  // must be client.authentication.k8s.io/v1 (or v1beta1)
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string install_hint;
  bool provide_cluster_info = false;
  std::string working_dir;  // the kubeconfig's directory: relative commands resolve there
};

struct ClientConfig {
  std::string server;           // "https://127.0.0.1:6443" (no trailing slash)
  std::string ca_pem;           // trusted CA bundle (PEM); empty: the system trust store
  std::string tls_server_name;  // SNI/verification name override, if set
  std::string client_cert_pem;  // client certificate (PEM), with client_key_pem
  std::string client_key_pem;
  std::string token;       // static bearer token
  std::string token_file;  // bearer token re-read when the file changes (rotation)
  std::optional<ExecConfig> exec;
  std::string namespace_ = "default";  // the context's namespace
  std::string
      source;  // where this came from, for messages ("kubeconfig ~/.kube/config context kind")
  // Plain http is refused unless this is set AND the host is loopback (tests only).
  bool allow_plain_http_loopback = false;

  // Client-side limits (client-go defaults are 5/10; controllers here raise them).
  double qps = 50;
  int burst = 100;
  std::chrono::milliseconds request_timeout{30000};
  // Retries of one request (safe cases only, see Client); 429 Retry-After pauses count too.
  int max_retries = 5;
  std::string user_agent = "gpufleet-kube/0.1";
};

struct KubeconfigOptions {
  // Files to merge, first wins for each named entry. Empty: $KUBECONFIG (colon-separated)
  // or else ~/.kube/config.
  std::vector<std::string> paths;
  std::string context;  // empty: current-context
};

// Loads and merges kubeconfig files. Certificate/key/CA files are read now (relative paths
// resolve against the file that names them). Throws core::InvalidInput naming the file and the
// field for anything missing or malformed, and for insecure-skip-tls-verify (never honoured).
ClientConfig load_kubeconfig(const KubeconfigOptions& options = {});

// Parses one kubeconfig document given as text (YAML or JSON); `dir` resolves relative paths.
ClientConfig load_kubeconfig_text(std::string_view text, std::string_view source_name,
                                  std::string_view dir, std::string_view context = {});

// The in-cluster configuration: KUBERNETES_SERVICE_HOST/PORT, and under `root` the files
// token, ca.crt and namespace. The token is re-read on rotation (token_file).
ClientConfig in_cluster_config(
    std::string_view root = "/var/run/secrets/kubernetes.io/serviceaccount");

// --kubeconfig if given, else $KUBECONFIG / ~/.kube/config, else in-cluster.
ClientConfig load_default_config(std::string_view kubeconfig_path = {},
                                 std::string_view context = {});

}  // namespace gpufleet::kube
