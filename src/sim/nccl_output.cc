#include "sim/nccl_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "core/errors.h"
#include "sim/rng.h"

namespace gpufleet::sim {
namespace {

// Fits a number into `width` columns the way nccl-tests does: 2 decimals, then 1, then 0.
std::string fit(double v, int width) {
  char buf[64];
  for (int decimals : {2, 1, 0}) {
    int n = std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, v);
    if (n <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, "%*.1e", width, v);
  return buf;
}

std::uint64_t parse_size(const std::string& flag, const std::string& text) {
  std::uint64_t n = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto [p, ec] = std::from_chars(b, e, n);
  if (ec != std::errc() || p == b) {
    throw core::InvalidInput("all_reduce_perf flag " + flag + " value \"" + text +
                             "\" is not a size (write e.g. 8, 64K, 128M, 8G)");
  }
  std::string suffix(p, e);
  if (suffix == "K" || suffix == "k")
    n <<= 10;
  else if (suffix == "M" || suffix == "m")
    n <<= 20;
  else if (suffix == "G" || suffix == "g")
    n <<= 30;
  else if (!suffix.empty()) {
    throw core::InvalidInput("all_reduce_perf flag " + flag + " value \"" + text +
                             "\" has an unknown suffix (use K, M or G)");
  }
  return n;
}

// NCCL's INIT/NET INFO lines of every rank, interleaved across hosts as the ranks' processes
// print them: the network each found, the network used, its ring channels (two), and the
// end of init.
struct RankRef {
  const GroupMember* m;
  std::size_t member;
  int local;
  int rank;
  int pid;
  std::uint64_t comm;
};

void info(std::string& out, const RankRef& r, const std::string& msg) {
  out += r.m->host + ":" + std::to_string(r.pid) + ":" + std::to_string(r.pid + 71) + " [" +
         std::to_string(r.local) + "] NCCL INFO " + msg + "\n";
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string bus_id(const std::string& pci) {  // "00000000:18:00.0" -> "18000"
  return pci.size() >= 16 ? pci.substr(9, 2) + pci.substr(12, 2) + pci.substr(15, 1) : "0";
}

void append_nccl_info(std::string& out, const std::vector<GroupMember>& members,
                      const std::vector<int>& pids, Rng& rng) {
  std::vector<RankRef> ranks;
  for (std::size_t i = 0; i < members.size(); ++i) {
    for (std::size_t d = 0; d < members[i].gpu_pci.size(); ++d) {
      ranks.push_back({&members[i], i, static_cast<int>(d), static_cast<int>(ranks.size()),
                       pids[i] + static_cast<int>(d),
                       0x55d0c0000000ULL + rng.below(0xfffff) * 0x1000});
    }
  }
  if (ranks.empty()) return;
  const int n = static_cast<int>(ranks.size());
  const std::uint64_t comm_id = 0x1000000000000000ULL + rng.below(0xfffffffULL) * 0x10;
  // Interleaved: local rank 0 of every host, then local rank 1, ...
  std::vector<const RankRef*> order;
  for (int local = 0;; ++local) {
    std::size_t before = order.size();
    for (const RankRef& r : ranks)
      if (r.local == local) order.push_back(&r);
    if (order.size() == before) break;
  }
  auto ip_of = [&](const RankRef& r) {
    return r.m->ip.empty() ? "10.0.0." + std::to_string(r.member + 1) : r.m->ip;
  };
  auto net_of = [](const GroupMember& m) {
    return m.health.socket_fallback ? std::string("Socket") : std::string("IB");
  };
  info(out, ranks.front(), "NCCL version 2.27.3+cuda12.8");
  for (const RankRef* r : order) {
    const GroupMember& m = *r->m;
    info(out, *r, "Bootstrap: Using eth0:" + ip_of(*r) + "<0>");
    if (m.health.socket_fallback) {
      info(out, *r, "NET/IB : No device found.");
      info(out, *r, "NET/Socket : Using [0]eth0:" + ip_of(*r) + "<0>");
    } else {
      const NetworkSpec& net = m.pool->network;
      const char* layer = net.link_layer == "Ethernet" ? "RoCE" : "IB";
      std::string devices;
      int index = 0;
      for (int dev = 0; dev < net.devices; ++dev) {
        for (int port = 1; port <= net.ports_per_device; ++port) {
          devices += "[" + std::to_string(index++) + "]mlx5_" + std::to_string(dev) + ":" +
                     std::to_string(port) + "/" + layer + " ";
        }
      }
      info(out, *r, "NET/IB : Using " + devices + "; OOB eth0:" + ip_of(*r) + "<0>");
    }
    info(out, *r, "Using network " + net_of(m));
    info(out, *r,
         "ncclCommInitRank comm " + hex(r->comm) + " rank " + std::to_string(r->rank) + " nranks " +
             std::to_string(n) + " cudaDev " + std::to_string(r->local) + " nvmlDev " +
             std::to_string(r->local) + " busId " +
             bus_id(m.gpu_pci[static_cast<std::size_t>(r->local)]) + " commId " + hex(comm_id) +
             " - Init START");
  }
  if (n > 1) {
    auto label = [&](int i) {
      return std::to_string(i) + "[" + std::to_string(ranks[static_cast<std::size_t>(i)].local) +
             "]";
    };
    auto path = [&](const RankRef& me, int channel) {
      const GroupMember& m = *me.m;
      if (m.health.socket_fallback) return "NET/Socket/" + std::to_string(channel);
      int nics = std::max(1, m.pool->network.devices);
      return "NET/IB/" + std::to_string((me.local + channel) % nics) + "/GDRDMA";
    };
    for (int channel = 0; channel < 2; ++channel) {
      char ch[16];
      std::snprintf(ch, sizeof ch, "Channel %02d/0 : ", channel);
      for (const RankRef* r : order) {
        const RankRef& next = ranks[static_cast<std::size_t>((r->rank + 1) % n)];
        const RankRef& prev = ranks[static_cast<std::size_t>((r->rank + n - 1) % n)];
        if (prev.m->nvlink_domain != r->m->nvlink_domain) {
          info(out, *r,
               ch + label(prev.rank) + " -> " + label(r->rank) + " [receive] via " +
                   path(*r, channel));
        }
        if (next.m->nvlink_domain != r->m->nvlink_domain) {
          info(
              out, *r,
              ch + label(r->rank) + " -> " + label(next.rank) + " [send] via " + path(*r, channel));
        } else if (next.rank != r->rank) {
          info(out, *r, ch + label(r->rank) + " -> " + label(next.rank) + " via P2P/CUMEM");
        }
      }
    }
  }
  for (const RankRef* r : order) {
    info(out, *r,
         "ncclCommInitRank comm " + hex(r->comm) + " rank " + std::to_string(r->rank) + " nranks " +
             std::to_string(n) + " cudaDev " + std::to_string(r->local) + " nvmlDev " +
             std::to_string(r->local) + " busId " +
             bus_id(r->m->gpu_pci[static_cast<std::size_t>(r->local)]) + " commId " + hex(comm_id) +
             " - Init COMPLETE");
  }
}

}  // namespace

bool nccl_info_env(const std::string& nccl_debug, const std::string& nccl_debug_subsys) {
  std::string level;
  for (char c : nccl_debug) level += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  if (level != "INFO" && level != "TRACE") return false;
  if (nccl_debug_subsys.empty()) return true;  // NCCL's default: INIT, BOOTSTRAP, ENV
  // A comma-separated list; a leading ^ excludes the ones named.
  std::string list;
  for (char c : nccl_debug_subsys)
    list += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  bool exclude = !list.empty() && list.front() == '^';
  bool named = false;
  std::size_t start = exclude ? 1 : 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == "INIT" || item == "NET" || item == "ALL") named = true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return exclude ? !named : named;
}

NcclTestConfig parse_nccl_test_args(const std::vector<std::string>& args) {
  NcclTestConfig c;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    bool known = flag == "-b" || flag == "--minbytes" || flag == "-e" || flag == "--maxbytes" ||
                 flag == "-f" || flag == "--stepfactor" || flag == "-n" || flag == "--iters" ||
                 flag == "-w" || flag == "--warmup_iters" || flag == "-c" || flag == "--check" ||
                 flag == "-g" || flag == "--ngpus" || flag == "-t" || flag == "--nthreads" ||
                 flag == "-d" || flag == "--datatype" || flag == "-o" || flag == "--op" ||
                 flag == "-G" || flag == "--cudagraph" || flag == "-z" || flag == "--blocking";
    if (!known) continue;  // the binary path, mpirun flags and options that change nothing here
    if (value.empty()) {
      if (i + 1 >= args.size()) {
        throw core::InvalidInput("all_reduce_perf flag " + flag + " has no value");
      }
      value = args[++i];
    }
    if (flag == "-b" || flag == "--minbytes")
      c.min_bytes = parse_size(flag, value);
    else if (flag == "-e" || flag == "--maxbytes")
      c.max_bytes = parse_size(flag, value);
    else if (flag == "-f" || flag == "--stepfactor")
      c.step_factor = parse_size(flag, value);
    else if (flag == "-n" || flag == "--iters")
      c.iters = static_cast<int>(parse_size(flag, value));
    else if (flag == "-w" || flag == "--warmup_iters")
      c.warmup_iters = static_cast<int>(parse_size(flag, value));
    else if (flag == "-c" || flag == "--check")
      c.check = static_cast<int>(parse_size(flag, value));
  }
  if (c.min_bytes == 0 || c.max_bytes < c.min_bytes) {
    throw core::InvalidInput("all_reduce_perf sizes -b " + std::to_string(c.min_bytes) + " -e " +
                             std::to_string(c.max_bytes) +
                             " are not a range (need 0 < minbytes <= maxbytes)");
  }
  if (c.step_factor < 2) {
    throw core::InvalidInput("all_reduce_perf flag -f must be at least 2 (the size multiplier)");
  }
  return c;
}

double allreduce_test_seconds(const BandwidthEstimate& e, const NcclTestConfig& config) {
  double us = 0;
  for (std::uint64_t size = config.min_bytes; size <= config.max_bytes;) {
    us += 2.0 * (config.warmup_iters + config.iters) * allreduce_time_us(e, size / 4 * 4);
    if (size > config.max_bytes / config.step_factor) break;
    size *= config.step_factor;
  }
  return 3.0 + 0.2 * e.nodes + us / 1e6;  // communicator init grows with the node count
}

NcclTestResult run_allreduce_test(const std::vector<GroupMember>& members,
                                  const NcclTestConfig& config) {
  BandwidthEstimate est = estimate_allreduce(members);
  Rng rng(derive_seed(config.seed, "nccl/" + members.front().host));
  NcclTestResult r;
  std::string& out = r.output;
  char line[512];
  out += "# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703\n";
  out += "# Collective test starting: all_reduce_perf\n";
  std::snprintf(line, sizeof line,
                "# nThread 1 nGpus 1 minBytes %llu maxBytes %llu step: %llu(factor) warmup "
                "iters: %d iters: %d agg iters: 1 validation: %d graph: 0\n",
                static_cast<unsigned long long>(config.min_bytes),
                static_cast<unsigned long long>(config.max_bytes),
                static_cast<unsigned long long>(config.step_factor), config.warmup_iters,
                config.iters, config.check);
  out += line;
  out += "#\n# Using devices\n";
  int rank = 0;
  std::vector<int> pids;
  for (const auto& m : members) {
    int pid = 1000 + static_cast<int>(rng.below(60000));
    pids.push_back(pid);
    for (std::size_t d = 0; d < m.gpu_pci.size(); ++d) {
      // "00000000:18:00.0" -> [0000:18:00]
      std::string bus = m.gpu_pci[d];
      std::string hex = bus.size() >= 14 ? bus.substr(4, 10) : bus;
      for (char& ch : hex) {
        if (ch >= 'A' && ch <= 'F') ch = static_cast<char>(ch - 'A' + 'a');
      }
      std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %10s device %2zu [%s] %s\n",
                    rank++, pid + static_cast<int>(d), m.host.c_str(), d, hex.c_str(),
                    std::string(m.pool->gpu->smi_name).c_str());
      out += line;
    }
  }
  out += "#\n";
  if (config.nccl_info) append_nccl_info(out, members, pids, rng);
  out +=
      "#                                                              out-of-place                 "
      "      in-place          \n";
  out +=
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
      "time   algbw   busbw  #wrong \n";
  out +=
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
      "(us)  (GB/s)  (GB/s)         \n";

  if (est.failed) {
    // nccl-tests aborts at communicator init or on the first collective.
    std::size_t i = 0;
    for (; i < members.size(); ++i) {
      if (members[i].host == est.failed_host) break;
    }
    std::snprintf(line, sizeof line, "%s: %s\n", est.failed_host.c_str(), est.failure.c_str());
    out += line;
    std::snprintf(line, sizeof line, " .. %s pid %d: Test failure common.cu:1216\n",
                  est.failed_host.c_str(), i < pids.size() ? pids[i] : 0);
    out += line;
    r.exit_code = 1;
    return r;
  }

  const double bus_factor = allreduce_bus_factor(est.ranks);
  double bus_sum = 0;
  int bus_rows = 0;
  for (std::uint64_t size = config.min_bytes; size <= config.max_bytes;) {
    std::uint64_t count = size / 4;  // float
    std::uint64_t bytes = count * 4;
    std::snprintf(line, sizeof line, "%12llu  %12llu  %8s  %6s  %6d",
                  static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(count),
                  "float", "sum", -1);
    out += line;
    for (int placement = 0; placement < 2; ++placement) {
      double t = allreduce_time_us(est, bytes) * rng.between(0.985, 1.015);
      double algbw = static_cast<double>(bytes) / (t * 1e3);
      double busbw = algbw * bus_factor;
      bus_sum += busbw;
      ++bus_rows;
      out += "  " + fit(t, 7) + "  " + fit(algbw, 6) + "  " + fit(busbw, 6);
      out += config.check != 0 ? "       0" : "     N/A";
    }
    out += "\n";
    if (size > config.max_bytes / config.step_factor) break;
    size *= config.step_factor;
  }
  out += "# Out of bounds values : 0 OK\n";
  std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %g \n",
                bus_rows > 0 ? bus_sum / bus_rows : 0.0);
  out += line;
  out += "#\n# Collective test concluded: all_reduce_perf\n#\n";
  return r;
}

}  // namespace gpufleet::sim
