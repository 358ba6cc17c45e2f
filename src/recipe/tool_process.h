// Running the external tools the recipe engine leans on (kubectl kustomize, helm pull, helm
// template): argv only (no shell), stdin from /dev/null, stdout captured up to a bound,
// stderr to a file whose tail goes into the error, a deadline after which the tool is killed.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::recipe {

// A private temporary directory, removed with everything in it when this goes out of scope.
class ToolTempDir {
 public:
  explicit ToolTempDir(std::string_view prefix);
  ~ToolTempDir();
  ToolTempDir(const ToolTempDir&) = delete;
  ToolTempDir& operator=(const ToolTempDir&) = delete;
  const std::string path;

 private:
  static std::string make(std::string_view prefix);
};

struct ToolLimits {
  std::size_t max_output = 16u << 20;
  std::chrono::seconds timeout{60};
};

// Runs `args` and returns its stdout. Throws std::runtime_error naming `what` when the tool
// cannot start (with `install_hint`), runs past the deadline or writes too much; throws
// core::InvalidInput naming the command, its exit status and the tail of its stderr when it
// fails.
std::string run_tool(const std::vector<std::string>& args, const std::string& err_file,
                     const std::string& what, std::string_view install_hint,
                     const ToolLimits& limits = {});

}  // namespace gpufleet::recipe
