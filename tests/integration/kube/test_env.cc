#include "test_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

namespace gpufleet::kube::testing {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

ClientConfig admin_config() {
  std::string path = env_or_empty("KUBECONFIG");
  if (path.empty()) {
    ADD_FAILURE() << "KUBECONFIG is not set; run through ctest (kube_local fixture)";
    throw std::runtime_error("no KUBECONFIG");
  }
  ClientConfig c = load_kubeconfig({{path}, ""});
  c.qps = 0;  // tests measure the server, not the client-side limiter
  return c;
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

TestNamespace::TestNamespace(Client& client, const std::string& prefix)
    : client_(client), name_(unique_name(prefix)) {
  core::Value ns;
  ns["apiVersion"] = "v1";
  ns["kind"] = "Namespace";
  ns["metadata"]["name"] = name_;
  client_.create(resources::namespaces(), ns);
}

TestNamespace::~TestNamespace() {
  try {
    client_.remove(resources::namespaces(), "", name_);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "cleanup of namespace " << name_ << ": " << e.what();
  }
}

int run_command(const std::string& command) {
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace gpufleet::kube::testing
