// Shared helpers for the kube integration tests: the admin client from $KUBECONFIG and
// unique names, so that tests never collide with each other or with earlier runs.
#pragma once

#include <string>

#include "kube/client.h"

namespace gpufleet::kube::testing {

// The admin kubeconfig ($KUBECONFIG); the test fails if it is unset.
ClientConfig admin_config();
// "prefix-<pid>-<counter>".
std::string unique_name(const std::string& prefix);
// Creates a namespace and deletes it (and everything in it) on destruction.
class TestNamespace {
 public:
  explicit TestNamespace(Client& client, const std::string& prefix = "kube-it");
  ~TestNamespace();
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  Client& client_;
  std::string name_;
};

// Runs a shell command, returns its exit status.
int run_command(const std::string& command);
std::string env_or_empty(const char* name);

}  // namespace gpufleet::kube::testing
