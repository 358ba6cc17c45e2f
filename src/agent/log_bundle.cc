#include "agent/log_bundle.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include "core/atomic_file.h"
#include "core/gzip.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/subprocess.h"
#include "core/time.h"

namespace gpufleet::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Kernel lines worth keeping: the GPU driver, NVSwitches, the IB/RoCE NICs, PCIe errors.
bool about_hardware(std::string_view text) {
  for (std::string_view k : {"NVRM", "nvidia", "Xid", "SXid", "nvswitch", "NVSwitch", "mlx5",
                             "infiniband", "pcieport", "AER", "PCIe Bus Error", "nvlink"})
    if (text.find(k) != std::string_view::npos) return true;
  return false;
}

// The last `max` bytes of a file (a state file may be large; its end is the newest).
std::string tail_of(const fs::path& p, std::size_t max, bool& cut) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + p.string() + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(std::max<std::streamoff>(0, in.tellg()));
  cut = size > max;
  in.seekg(static_cast<std::streamoff>(cut ? size - max : 0));
  std::string out(std::min(size, max), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<std::size_t>(in.gcount()));
  return out;
}

// The kernel ring: on a node /dev/kmsg gives one record per read() and EAGAIN at the end
// (non-blocking); in simulation it is a file of the same records. Bounded in bytes read.
std::string read_kmsg(const fs::path& p, std::size_t keep, Clock::time_point deadline, bool& cut) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + p.string() + ": " + std::strerror(errno));
  std::deque<std::string> lines;
  std::size_t held = 0;
  std::string partial;
  auto take = [&](std::string_view line) {
    if (line.empty() || !about_hardware(line)) return;
    lines.emplace_back(line);
    held += line.size() + 1;
    while (held > keep && !lines.empty()) {
      held -= lines.front().size() + 1;
      lines.pop_front();
      cut = true;
    }
  };
  std::string buf(8192, '\0');  // the largest kmsg record
  std::size_t total = 0;
  constexpr std::size_t kMaxRead = 64 << 20;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue;  // a record overwritten while we read: skip it
    if (n <= 0) break;                      // EOF (a file) or EAGAIN (the device's end)
    total += static_cast<std::size_t>(n);
    partial.append(buf.data(), static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
      take(std::string_view(partial).substr(start, nl - start));
    partial.erase(0, start);
    if (total > kMaxRead || Clock::now() > deadline) {
      cut = true;
      break;
    }
  }
  ::close(fd);
  take(partial);
  std::string out;
  out.reserve(held);
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

std::string filter_kernel_lines(std::string_view text, std::size_t max_bytes, bool* truncated) {
  std::deque<std::string_view> lines;
  std::size_t held = 0;
  bool cut = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    if (line.empty() || !about_hardware(line)) continue;
    lines.push_back(line);
    held += line.size() + 1;
    while (held > max_bytes && !lines.empty()) {
      held -= lines.front().size() + 1;
      lines.pop_front();
      cut = true;
    }
  }
  if (truncated != nullptr) *truncated = cut;
  std::string out;
  for (auto l : lines) (out += l) += '\n';
  return out;
}

namespace {

// The ports of every InfiniBand device (state, rate, counters), bounded; null when the node
// has none.
core::Value read_infiniband(const fs::path& ib) {
  std::error_code ec;
  if (!fs::is_directory(ib, ec)) return core::Value();
  auto read_small = [](const fs::path& f) {
    bool cut = false;
    std::string s = tail_of(f, 256, cut);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  };
  core::Value ports = core::Value::map();
  std::vector<fs::path> devs;
  for (const auto& d : fs::directory_iterator(ib, ec)) devs.push_back(d.path());
  std::sort(devs.begin(), devs.end());
  for (const auto& d : devs) {
    if (ports.size() >= 64) break;
    std::error_code pec;
    for (const auto& port : fs::directory_iterator(d / "ports", pec)) {
      core::Value p = core::Value::map();
      for (const char* f : {"state", "phys_state", "rate"}) {
        std::error_code fec;
        if (fs::is_regular_file(port.path() / f, fec)) p[f] = read_small(port.path() / f);
      }
      core::Value counters = core::Value::map();
      std::error_code cec;
      for (const auto& c : fs::directory_iterator(port.path() / "counters", cec))
        if (counters.size() < 64) counters[c.path().filename().string()] = read_small(c.path());
      p["counters"] = std::move(counters);
      ports[d.filename().string() + "/" + port.path().filename().string()] = std::move(p);
    }
  }
  return ports;
}

// The GPU state command's output (nvidia-smi -q), within what is left of the deadline.
core::Value gpu_state(const LogBundleOptions& options, Clock::time_point deadline, bool& cut) {
  core::SubprocessOptions o;
  o.timeout =
      std::max(std::chrono::milliseconds(1),
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  o.max_output = options.section_bytes;
  core::SubprocessResult r = core::run_subprocess(options.gpu_state_command, o);
  if (!r.ok()) throw std::runtime_error(r.describe());
  cut = r.output.size() >= options.section_bytes;
  return core::Value(r.output);
}

core::Value string_list(const std::vector<std::string>& v) {
  core::Value l = core::Value::list();
  for (const auto& s : v) l.push_back(s);
  return l;
}

// Serializes and compresses `doc` with `sections`; over the bound (kernel text compresses
// ~10x, so this is rare) the biggest text section is halved from its oldest end until the
// bundle fits. False when it cannot be made to fit.
bool pack_within_bound(core::Value& doc, core::Value& sections, LogBundle& out,
                       std::size_t max_bytes, std::string& raw, std::string& packed) {
  for (int round = 0; round < 24; ++round) {
    doc["sections"] = sections;
    doc["truncated"] = string_list(out.truncated);
    doc["errors"] = string_list(out.errors);
    raw = core::to_json(doc);
    packed = core::gzip(raw);
    if (packed.size() <= max_bytes) return true;
    std::string biggest;
    std::size_t size = 0;
    for (const auto& [k, v] : sections.as_map())
      if (v.is_string() && v.as_string().size() > size) {
        size = v.as_string().size();
        biggest = k;
      }
    if (biggest.empty()) {
      sections = core::Value::map();  // nothing left to cut: the sections go
      out.errors.push_back("bundle: sections dropped to stay under " + std::to_string(max_bytes) +
                           " bytes");
      continue;
    }
    const std::string& text = sections[biggest].as_string();
    sections[biggest] = text.substr(text.size() / 2);
    if (std::find(out.truncated.begin(), out.truncated.end(), biggest) == out.truncated.end())
      out.truncated.push_back(biggest);
  }
  return packed.size() <= max_bytes;
}

// Writes the bundle whole, then keeps only the newest `keep` bundles in `dir` (bounded on
// disk too).
void store_bundle(const fs::path& dir, const fs::path& file, const std::string& packed,
                  std::size_t keep) {
  fs::create_directories(dir);
  core::write_file_atomic(file.string(), packed);
  std::vector<std::pair<fs::file_time_type, fs::path>> all;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().string().ends_with(".json.gz")) all.emplace_back(e.last_write_time(ec), e.path());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i + keep < all.size(); ++i)
    if (all[i].second != file) fs::remove(all[i].second, ec);
}

}  // namespace

LogBundle collect_log_bundle(const LogBundleSource& source, const fs::path& dir,
                             const std::string& node, const std::string& incident,
                             const LogBundleOptions& options) {
  const auto deadline = Clock::now() + options.deadline;
  LogBundle out;
  core::Value sections = core::Value::map();
  auto host = [&](std::string_view absolute) {
    return source.host_root / std::string(absolute.substr(1));
  };
  // Runs one section; its failure or the deadline is recorded, never thrown.
  auto section = [&](const std::string& name, const std::function<core::Value(bool&)>& read) {
    if (Clock::now() > deadline) {
      out.errors.push_back(name + ": not collected, the bundle's deadline passed");
      return;
    }
    try {
      bool cut = false;
      core::Value v = read(cut);
      if (v.is_null()) return;  // not on this node
      sections[name] = std::move(v);
      out.sections.push_back(name);
      if (cut) out.truncated.push_back(name);
    } catch (const std::exception& e) {
      out.errors.push_back(name + ": " + std::string(e.what()).substr(0, 300));
    }
  };
  section("kmsg", [&](bool& cut) {
    return core::Value(read_kmsg(host("/dev/kmsg"), options.kmsg_bytes, deadline, cut));
  });
  for (std::string_view f :
       {"/run/nvidia-smi/query-gpu.csv", "/run/nvidia-smi/nvlink-status.txt"}) {
    const fs::path p = host(f);
    section("nvidia-smi/" + p.filename().string(), [&](bool& cut) -> core::Value {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) return core::Value();
      return core::Value(tail_of(p, options.section_bytes, cut));
    });
  }
  if (!options.gpu_state_command.empty())
    section("nvidia-smi -q", [&](bool& cut) { return gpu_state(options, deadline, cut); });
  section("infiniband", [&](bool&) { return read_infiniband(host("/sys/class/infiniband")); });
  if (source.node_health) {
    section("nodehealth", [&](bool&) -> core::Value {
      core::Value h = source.node_health();
      core::Value keep = core::Value::map();
      for (const char* k : {"checks", "history", "remediation", "bootID"})
        if (const core::Value* v = h.get({"status", k})) keep[k] = *v;
      return keep;
    });
  }

  core::Value doc = core::Value::map();
  doc["node"] = node;
  doc["incident"] = incident;
  doc["collectedAt"] = core::Timestamp::now().to_rfc3339(core::TimestampPrecision::Seconds);
  std::string raw;
  std::string packed;
  if (!pack_within_bound(doc, sections, out, options.max_bundle_bytes, raw, packed)) {
    out.error = "the bundle stays over " + std::to_string(options.max_bundle_bytes) + " bytes";
    return out;
  }
  const fs::path file = dir / (incident + ".json.gz");
  try {
    store_bundle(dir, file, packed, options.keep);
  } catch (const std::exception& e) {
    out.error = std::string("cannot write ") + file.string() + ": " + e.what();
    return out;
  }
  out.ok = true;
  out.path = file.string();
  out.sha256 = core::sha256_hex(packed);
  out.bytes = packed.size();
  out.raw_bytes = raw.size();
  return out;
}

}  // namespace gpufleet::agent
