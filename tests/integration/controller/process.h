// Helpers for the controller integration tests: child processes (`gpufleet controller`),
// free loopback ports, HTTP GETs and metric values.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpufleet::controller::testing {

// A child process whose stdout and stderr go to `log`. The destructor kills it (SIGKILL).
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  [[nodiscard]] pid_t pid() const { return pid_; }
  void signal(int sig);
  // Waits for the exit; the exit code (128+signal when killed), or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// A loopback port that was free a moment ago.
int free_port();
// GET http://127.0.0.1:port/path: {status, body}; status 0 when nothing answers.
std::pair<long, std::string> http_get(int port, const std::string& path);
// The value of the sample line that starts with `series` ("name{labels}"), or nullopt.
std::optional<double> metric(const std::string& text, const std::string& series);
bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds timeout);
// $GPUFLEET_BIN, the gpufleet binary under test.
std::string gpufleet_bin();

}  // namespace gpufleet::controller::testing
