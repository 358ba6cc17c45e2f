#include "sentinel/kmsg_monitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <vector>

#include "agent/nodehealth.h"
#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/log.h"
#include "core/text.h"
#include "core/xid_catalog.h"

namespace gpufleet::sentinel {
namespace {

int rank(std::string_view state) { return state == "Fatal" ? 2 : state == "Warning" ? 1 : 0; }

constexpr std::string_view kStateFile = "kmsg-state.json";
// An open fault's message grows by one "; then …" per distinct follow-up up to this many bytes
// (under NodeHealth's 1,024), then says that more followed; the kernel events keep them all.
constexpr std::size_t kMaxFaultMessage = 900;
constexpr std::string_view kMoreFollowUps = "; and more (see the sentinel.kernel events)";

}  // namespace

XidHealth xid_health(const core::XidCatalog& catalog, int code) {
  XidHealth h;
  h.reason = "Xid" + std::to_string(code);
  const core::XidInfo* x = catalog.find(code);
  if (x == nullptr) {
    h.state = "Warning";  // unknown to the catalog: worth a look, not an action
    return h;
  }
  h.state = x->severity == core::XidSeverity::Critical  ? "Fatal"
            : x->severity == core::XidSeverity::Warning ? "Warning"
                                                        : "";
  h.needs_reboot = x->action == core::XidAction::RebootNode;
  return h;
}

std::map<std::string, GpuIdentity> parse_gpu_query_csv(std::string_view csv) {
  std::map<std::string, GpuIdentity> out;
  int col_index = -1;
  int col_pci = -1;
  int col_uuid = -1;
  bool header = true;
  while (!csv.empty()) {
    auto nl = csv.find('\n');
    std::string_view line = csv.substr(0, nl);
    csv = nl == std::string_view::npos ? std::string_view{} : csv.substr(nl + 1);
    if (core::trim(line).empty()) continue;
    auto cells = core::split_trimmed(line);
    if (header) {
      header = false;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        // "memory.total [MiB]": the name is the first token.
        std::string_view name = cells[i].substr(0, cells[i].find(' '));
        if (name == "index") col_index = static_cast<int>(i);
        if (name == "pci.bus_id") col_pci = static_cast<int>(i);
        if (name == "uuid") col_uuid = static_cast<int>(i);
      }
      if (col_pci < 0) return out;  // not the query we know: no mapping rather than a wrong one
      continue;
    }
    if (static_cast<std::size_t>(col_pci) >= cells.size()) continue;
    std::string pci = normalise_pci(cells[static_cast<std::size_t>(col_pci)]);
    if (pci.empty()) continue;
    GpuIdentity id;
    if (col_index >= 0 && static_cast<std::size_t>(col_index) < cells.size()) {
      std::string_view v = cells[static_cast<std::size_t>(col_index)];
      int n = 0;
      bool ok = !v.empty() && v.size() < 4;
      for (char c : v) {
        if (c < '0' || c > '9') ok = false;
        n = n * 10 + (c - '0');
      }
      if (ok) id.index = n;
    }
    if (col_uuid >= 0 && static_cast<std::size_t>(col_uuid) < cells.size()) {
      std::string_view u = cells[static_cast<std::size_t>(col_uuid)];
      if (u.starts_with("GPU-") || u.starts_with("MIG-")) id.uuid = std::string(u);
    }
    out[pci] = id;
  }
  return out;
}

KmsgMonitor::KmsgMonitor(const agent::NodeContext& node, KmsgMonitorOptions options)
    : node_(node), options_(options) {
  load_state();
}

KmsgMonitor::~KmsgMonitor() {
  if (fd_ >= 0) ::close(fd_);
}

std::string KmsgMonitor::current_boot_id() const {
  std::error_code ec;
  const auto path = node_.host_path("/proc/sys/kernel/random/boot_id");
  if (std::filesystem::is_regular_file(path, ec)) {
    try {
      core::InputLimits limits;
      limits.max_bytes = 256;
      std::string id(core::trim(core::read_file(path.string(), limits)));
      if (!id.empty()) return id;
    } catch (const std::exception&) {
      // Fall back to the identity the agent started with.
    }
  }
  return node_.identity.boot_id;
}

void KmsgMonitor::load_state() {
  const auto path = node_.state_dir / kStateFile;
  std::error_code ec;
  if (node_.state_dir.empty() || !std::filesystem::exists(path, ec)) return;
  try {
    core::InputLimits limits;
    limits.max_bytes = std::size_t{1} << 20;
    core::Value v = core::parse_json(core::read_file(path.string(), limits), path.string());
    boot_id_ = std::string(v.get_string({"bootId"}));
    if (const core::Value* s = v.find("lastSeq"); s != nullptr && s->is_int() && s->as_int() >= 0) {
      last_seq_ = static_cast<std::uint64_t>(s->as_int());
      have_seq_ = true;
    } else if (s != nullptr && s->is_uint()) {
      last_seq_ = s->as_uint();
      have_seq_ = true;
    }
    if (const core::Value* f = v.find("faults"); f != nullptr && f->is_map()) {
      for (const auto& e : f->as_map()) {
        Fault fault;
        fault.state = std::string(e.value.get_string({"state"}));
        fault.reason = std::string(e.value.get_string({"reason"}));
        fault.entity_kind = std::string(e.value.get_string({"entityKind"}, "GPU"));
        fault.message = std::string(e.value.get_string({"message"}));
        const core::Value* r = e.value.find("needsReboot");
        fault.needs_reboot = r != nullptr && r->is_bool() && r->as_bool();
        if (rank(fault.state) > 0) faults_[e.key] = fault;
      }
    }
  } catch (const std::exception& e) {
    // A damaged state file must not stop the monitor: start over (re-emitting this boot's
    // records is at-least-once, which consumers handle).
    core::log::warn("sentinel: kmsg state unreadable, starting over",
                    {{"path", path.string()}, {"error", e.what()}});
    boot_id_.clear();
    have_seq_ = false;
    faults_.clear();
  }
}

void KmsgMonitor::save_state() {
  if (node_.state_dir.empty()) return;
  core::Value v = core::Value::map();
  v["bootId"] = boot_id_;
  if (have_seq_) v["lastSeq"] = last_seq_;
  core::Value f = core::Value::map();
  for (const auto& [entity, fault] : faults_) {
    core::Value e = core::Value::map();
    e["state"] = fault.state;
    e["reason"] = fault.reason;
    e["entityKind"] = fault.entity_kind;
    e["needsReboot"] = fault.needs_reboot;
    e["message"] = fault.message;
    f[entity] = std::move(e);
  }
  v["faults"] = std::move(f);
  core::write_file_atomic((node_.state_dir / kStateFile).string(), core::to_json(v));
}

const GpuIdentity* KmsgMonitor::gpu_for(const std::string& pci) {
  auto it = gpus_.find(pci);
  if (it != gpus_.end()) return &it->second;
  if (gpus_loaded_) return nullptr;
  gpus_loaded_ = true;  // once per poll (reset there), so an unknown address costs one read
  const auto path = node_.host_path("/run/nvidia-smi/query-gpu.csv");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return nullptr;
  try {
    core::InputLimits limits;
    limits.max_bytes = std::size_t{1} << 20;
    // Merge: a GPU that fell off the bus leaves nvidia-smi's list, but keeps its identity here.
    for (auto& [k, id] : parse_gpu_query_csv(core::read_file(path.string(), limits))) {
      gpus_[k] = id;
    }
  } catch (const std::exception&) {
    return nullptr;
  }
  it = gpus_.find(pci);
  return it == gpus_.end() ? nullptr : &it->second;
}

void KmsgMonitor::poll(agent::Emitter& out) {
  // What the previous poll handled is journalled by now (the agent appends a poll's batch
  // when poll() returns), so its position may be made durable.
  if (dirty_) {
    save_state();
    dirty_ = false;
  }
  gpus_loaded_ = false;

  const std::string boot = current_boot_id();
  if (!boot.empty() && boot != boot_id_) new_boot(boot, out);

  const std::string path = node_.host_path("/dev/kmsg").string();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // no kernel log here: nothing to report
  if (S_ISCHR(st.st_mode)) {
    read_char_device(path, out);
    return;
  }
  // Nothing new since the last read: a stat instead of reading and skipping the whole ring.
  const std::int64_t mtime_ns =
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (st.st_size == file_size_ && mtime_ns == file_mtime_ns_ &&
      static_cast<std::uint64_t>(st.st_ino) == file_inode_) {
    return;
  }
  core::InputLimits limits;
  limits.max_bytes = options_.max_file_bytes;
  const std::string content = core::read_file(path, limits);
  file_size_ = static_cast<std::int64_t>(st.st_size);
  file_mtime_ns_ = mtime_ns;
  file_inode_ = static_cast<std::uint64_t>(st.st_ino);
  // No boot id, but the ring's newest record is older than what we handled: the ring
  // restarted (a reboot the boot id did not tell us about). Start over with it.
  if (have_seq_) {
    std::string_view tail = content;
    while (!tail.empty() && tail.back() == '\n') tail.remove_suffix(1);
    const auto nl = tail.rfind('\n');
    auto last = parse_kmsg_record(nl == std::string_view::npos ? tail : tail.substr(nl + 1));
    if (last && last->seq < last_seq_) new_boot(boot_id_, out);
  }
  std::string_view rest = content;
  std::size_t handled = 0;
  while (!rest.empty() && handled < options_.max_records_per_poll) {
    auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    handle_line(line, out);
    ++handled;
  }
}

void KmsgMonitor::new_boot(const std::string& boot, agent::Emitter& out) {
  if (!boot_id_.empty() || have_seq_) {
    ++stats_.reboots;
    // The old boot's faults are gone with it; the new boot reports afresh.
    std::vector<std::string> entities;
    for (const auto& [entity, fault] : faults_) entities.push_back(entity);
    for (const auto& entity : entities) {
      clear_entity(entity, "NodeRebooted",
                   "the node rebooted" + (boot.empty() ? std::string() : " (boot id " + boot + ")"),
                   out);
    }
    bursts_.clear();
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  boot_id_ = boot;
  have_seq_ = false;
  last_seq_ = 0;
  dirty_ = true;
}

void KmsgMonitor::read_char_device(const std::string& path, agent::Emitter& out) {
  if (fd_ < 0) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
      throw core::InvalidInput(path + " cannot be opened: " + std::strerror(errno) +
                               " (the agent needs read access to /dev/kmsg: CAP_SYSLOG)");
    }
  }
  std::vector<char> buf(kMaxKmsgLine + 1);
  for (std::size_t i = 0; i < options_.max_records_per_poll; ++i) {
    // One read() returns exactly one record on /dev/kmsg.
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EPIPE) continue;  // overwritten before we read it: the seq gap counts it
      if (errno == EINTR) continue;
      if (errno == EINVAL) {  // a record larger than the buffer
        ++stats_.malformed;
        continue;
      }
      throw core::InvalidInput(path + " read failed: " + std::strerror(errno));
    }
    if (n == 0) return;
    std::string_view rec(buf.data(), static_cast<std::size_t>(n));
    handle_line(rec.substr(0, rec.find('\n')), out);
  }
}

void KmsgMonitor::handle_line(std::string_view line, agent::Emitter& out) {
  if (line.empty()) return;
  if (line.front() == ' ') return;  // a dictionary continuation line ("  SUBSYSTEM=pci")
  if (have_seq_) {
    // Old records are skipped on their sequence number alone (no text decoding).
    const auto c1 = line.find(',');
    const auto c2 = c1 == std::string_view::npos ? c1 : line.find(',', c1 + 1);
    std::uint64_t seq = 0;
    if (c2 != std::string_view::npos) {
      auto [p, ec] = std::from_chars(line.data() + c1 + 1, line.data() + c2, seq);
      if (ec == std::errc() && p == line.data() + c2 && seq <= last_seq_ &&
          line.size() <= kMaxKmsgLine && line.find(';') != std::string_view::npos) {
        return;
      }
    }
  }
  auto rec = parse_kmsg_record(line);
  if (!rec) {
    ++stats_.malformed;
    return;
  }
  if (have_seq_ && rec->seq <= last_seq_) return;  // handled before (resume)
  if (have_seq_ && rec->seq > last_seq_ + 1) stats_.lost += rec->seq - last_seq_ - 1;
  last_seq_ = rec->seq;
  have_seq_ = true;
  dirty_ = true;
  ++stats_.records;
  if (auto ev = parse_kernel_event(rec->text)) handle_event(*rec, *ev, out);
}

void KmsgMonitor::set_entity(const std::string& entity, const Fault& f, std::string_view message,
                             agent::Emitter& out) {
  auto it = faults_.find(entity);
  if (it == faults_.end() || rank(f.state) > rank(it->second.state)) {
    // A new fault: the entity goes to a worse state (healthy → Warning or Fatal, Warning →
    // Fatal). This signal is its identity.
    Fault fresh = f;
    if (it != faults_.end()) fresh.needs_reboot = fresh.needs_reboot || it->second.needs_reboot;
    fresh.message = std::string(message);
    faults_[entity] = fresh;
    dirty_ = true;
    emit_entity(entity, fresh, out);
    return;
  }
  // The entity is already at this state or worse: the signal belongs to the open fault (a
  // repeat of its Xid after the burst window, the driver's Xid 154 recovery action that
  // follows it, another Xid of the same error). It never downgrades the entity and never
  // becomes a fault of its own; what it adds is kept: a reboot the driver now asks for, and
  // a line in the message.
  Fault& open = it->second;
  if (f.needs_reboot && !open.needs_reboot) {
    open.needs_reboot = true;
    dirty_ = true;
  }
  if (rank(f.state) < rank(open.state) || f.reason == open.reason) return;
  if (open.message.find(message) != std::string::npos) return;  // said before
  if (open.message.empty()) {
    open.message = std::string(message);  // a fault a version before messages were kept left
  } else if (open.message.size() + message.size() > kMaxFaultMessage) {
    if (open.message.ends_with(kMoreFollowUps)) return;
    open.message += kMoreFollowUps;
  } else {
    open.message.append("; then ").append(message);
  }
  dirty_ = true;
  emit_entity(entity, open, out);
}

void KmsgMonitor::emit_entity(const std::string& entity, const Fault& f, agent::Emitter& out) {
  core::Value h = core::Value::map();
  h["check"] = kXidCheck;
  h["entity"] = entity;
  h["entityKind"] = f.entity_kind;
  h["state"] = f.state;
  h["reason"] = f.reason;
  h["message"] = f.message;
  out.emit(agent::kHealthKind, h);
}

void KmsgMonitor::clear_entity(const std::string& entity, std::string_view reason,
                               std::string_view message, agent::Emitter& out) {
  auto it = faults_.find(entity);
  if (it == faults_.end()) return;
  core::Value h = core::Value::map();
  h["check"] = kXidCheck;
  h["entity"] = entity;
  h["entityKind"] = it->second.entity_kind;
  h["state"] = "Healthy";
  h["reason"] = reason;
  h["message"] = message;
  faults_.erase(it);
  dirty_ = true;
  out.emit(agent::kHealthKind, h);
}

void KmsgMonitor::handle_event(const KmsgRecord& r, const KernelEvent& ev, agent::Emitter& out) {
  ++stats_.events;
  const core::XidCatalog& catalog = core::XidCatalog::builtin();

  std::string entity;
  std::string entity_kind = "GPU";
  const GpuIdentity* gpu = nullptr;
  if (ev.kind == KernelEventKind::SXid) {
    entity = "nvswitch" + std::to_string(ev.nvswitch);
    entity_kind = "NVSwitch";
  } else {
    gpu = gpu_for(ev.pci);
    entity = gpu != nullptr && !gpu->uuid.empty() ? gpu->uuid : "PCI:" + ev.pci;
  }

  // Burst suppression: one event per (kind, code, address[, action]) per window.
  std::string key = std::string(kind_name(ev.kind)) + "/" + std::to_string(ev.code) + "/" + ev.pci +
                    "/" + ev.recovery_action;
  auto [bit, fresh] = bursts_.try_emplace(key);
  Burst& burst = bit->second;
  if (!fresh && r.usec >= burst.last_usec &&
      r.usec - burst.last_usec < options_.burst_window_usec) {
    burst.last_usec = r.usec;
    ++burst.suppressed;
    ++stats_.suppressed;
    return;
  }
  const std::uint64_t folded = burst.suppressed;
  burst.last_usec = r.usec;
  burst.suppressed = 0;
  burst.order = ++burst_order_;
  if (bursts_.size() > options_.max_keys) {
    auto oldest = bursts_.begin();
    for (auto i = bursts_.begin(); i != bursts_.end(); ++i) {
      if (i->second.order < oldest->second.order) oldest = i;
    }
    bursts_.erase(oldest);
  }

  // Severity and recommended action from the catalog.
  std::string severity = "unknown";
  std::string action = "unknown";
  std::string name;
  Fault fault;
  fault.entity_kind = entity_kind;
  if (ev.kind == KernelEventKind::Xid) {
    XidHealth health = xid_health(catalog, ev.code);
    fault.reason = std::move(health.reason);
    fault.state = std::move(health.state);
    fault.needs_reboot = health.needs_reboot;
    if (const core::XidInfo* x = catalog.find(ev.code)) {
      severity = core::severity_name(x->severity);
      action = core::action_name(x->action);
      name = x->name;
    } else {
      name = "Xid not in the catalog";
    }
    if (ev.code == 154) {
      // The driver names the action itself; it overrides the catalog's "follow the action".
      const std::string& a = ev.recovery_action;
      action = a.empty() ? action : a;
      fault.reason = "RecoveryAction";
      fault.state = a == "None" ? "" : a == "Drain P2P" ? "Warning" : "Fatal";
      fault.needs_reboot = a.find("Reboot") != std::string::npos;
    }
  } else if (ev.kind == KernelEventKind::FellOffBus) {
    fault.reason = "GpuFellOffBus";
    fault.state = "Fatal";
    fault.needs_reboot = true;
    severity = core::severity_name(core::XidSeverity::Critical);
    action = core::action_name(core::XidAction::RebootNode);
    name = "GPU has fallen off the bus";
  } else {
    fault.reason = "SXid" + std::to_string(ev.code);
    const core::SXidInfo* s = catalog.find_sxid(ev.code);
    const bool fatal = ev.sxid_fatal || (s != nullptr && s->fatal);
    fault.state = fatal ? "Fatal" : "Warning";
    severity =
        core::severity_name(fatal ? core::XidSeverity::Critical : core::XidSeverity::Warning);
    action = fatal ? core::action_name(core::XidAction::ResetGpu)
                   : core::action_name(core::XidAction::Ignore);
    name = s != nullptr ? s->text : "SXid not in the catalog";
  }

  core::Value e = core::Value::map();
  e["type"] = kind_name(ev.kind);
  e["code"] = ev.code;
  e["pci"] = ev.pci;
  e["entity"] = entity;
  e["entityKind"] = entity_kind;
  if (gpu != nullptr && gpu->index >= 0) e["gpu"] = gpu->index;
  if (gpu != nullptr && !gpu->uuid.empty()) e["uuid"] = gpu->uuid;
  if (ev.nvswitch >= 0) e["nvswitch"] = ev.nvswitch;
  e["severity"] = severity;
  e["action"] = action;
  if (!name.empty()) e["name"] = name;
  e["text"] = ev.text;
  if (ev.pid) e["pid"] = *ev.pid;
  if (!ev.process.empty()) e["process"] = ev.process;
  e["bootId"] = boot_id_;
  e["seq"] = r.seq;
  e["usec"] = r.usec;
  if (folded > 0) e["suppressedBefore"] = folded;
  out.emit(kKernelEventKind, e);
  ++stats_.emitted;

  const std::string message = fault.reason + " on " + entity + (name.empty() ? "" : ": " + name) +
                              " (action " + action + ")";
  if (ev.kind == KernelEventKind::Xid && ev.code == 154 && ev.recovery_action == "None") {
    // The outcome of a successful GPU reset: the fault is cancelled, unless it needs a reboot.
    auto it = faults_.find(entity);
    if (it != faults_.end() && !it->second.needs_reboot) {
      clear_entity(entity, "GpuResetSucceeded", "the driver reports no recovery action pending",
                   out);
      // A repeat of the old Xid after the reset is a new fault, not part of the old burst.
      for (auto b = bursts_.begin(); b != bursts_.end();) {
        b = b->first.find("/" + ev.pci + "/") != std::string::npos && b->first != key
                ? bursts_.erase(b)
                : std::next(b);
      }
    }
    return;
  }
  if (!fault.state.empty()) set_entity(entity, fault, message, out);
}

std::unique_ptr<agent::Monitor> make_kmsg_monitor(const agent::NodeContext& node) {
  return std::make_unique<KmsgMonitor>(node);
}

}  // namespace gpufleet::sentinel
