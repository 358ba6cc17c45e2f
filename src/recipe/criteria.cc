#include "recipe/criteria.h"

#include <charconv>

#include "core/errors.h"

namespace gpufleet::recipe {

PoolQuery parse_pool_flag(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return core::InvalidInput("--pool '" + std::string(text) + "': " + why +
                              "; write NAME=ACCELERATOR[:NODES], e.g. --pool train=h100:32");
  };
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) throw bad("missing pool name");
  PoolQuery pool;
  pool.name = std::string(text.substr(0, eq));
  for (char c : pool.name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) throw bad("pool name must be lower-case letters, digits and '-'");
  }
  std::string_view rest = text.substr(eq + 1);
  std::size_t colon = rest.find(':');
  pool.accelerator = std::string(rest.substr(0, colon));
  if (pool.accelerator.empty()) throw bad("missing accelerator");
  if (colon != std::string_view::npos) {
    std::string_view n = rest.substr(colon + 1);
    std::int64_t count = 0;
    auto res = std::from_chars(n.data(), n.data() + n.size(), count);
    if (res.ec != std::errc() || res.ptr != n.data() + n.size() || count <= 0) {
      throw bad("node count '" + std::string(n) + "' is not a positive whole number");
    }
    pool.node_count = count;
  }
  return pool;
}

}  // namespace gpufleet::recipe
