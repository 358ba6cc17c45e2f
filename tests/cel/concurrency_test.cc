// One compiled Program evaluated from many threads at once (run under ThreadSanitizer).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cel/cel.h"
#include "core/json.h"

namespace gpufleet::cel {
namespace {

TEST(CelConcurrency, SharedProgramManyThreads) {
  Env env;
  env.variable("node").variable("event");
  Program p = compile(
      "event.isFatal && event.errorCode in ['79', '48', '94'] && "
      "node.metadata.labels['nvidia.com/gpu.product'].startsWith('NVIDIA-H100') && "
      "node.status.conditions.map(c, c.type + '=' + c.status).exists(s, s.matches('^Ready=True$')) "
      "&& "
      "'%s/%d'.format([node.metadata.name, size(node.status.conditions)]) == 'n1/2' && "
      "timestamp(event.time).getHours('Europe/Paris') >= 0",
      env);
  core::Value node = core::parse_json(
      R"({"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False"}]}})");
  std::atomic<int> trues{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      core::Value event = core::parse_json(
          R"({"isFatal": true, "errorCode": "48", "time": "2024-01-01T10:00:00Z"})");
      if (t % 2 == 1) event["errorCode"] = "1";
      Activation act;
      act.bind("node", node).bind("event", event);
      for (int i = 0; i < 200; ++i) {
        if (p.evaluate_bool(act)) trues.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(trues.load(), 4 * 200);
}

}  // namespace
}  // namespace gpufleet::cel
