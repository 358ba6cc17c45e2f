#include "hostpkg/controller/status_view.h"

#include <algorithm>

namespace gpufleet::hostpkg {
namespace {

std::int64_t int_at(const core::Value& v, std::initializer_list<std::string_view> path) {
  const core::Value* x = v.get(path);
  return x != nullptr && x->is_int() ? x->as_int() : 0;
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

}  // namespace

std::string progress_bar(std::int64_t done, std::int64_t total, int width) {
  std::int64_t full = total > 0 ? std::clamp<std::int64_t>(done * width / total, 0, width) : 0;
  return "[" + std::string(static_cast<std::size_t>(full), '#') +
         std::string(static_cast<std::size_t>(width - full), '-') + "]";
}

std::string render_status(const std::vector<core::Value>& sets) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "PHASE", "PROGRESS", "ACTIVE", "FAILED",
                                                 "BLOCKED", "DRIFTED", "VALIDATING", "TARGET"}};
  for (const auto& s : sets) {
    rows.push_back({std::string(s.get_string({"metadata", "name"})),
                    std::string(s.get_string({"status", "phase"}, "Unknown")),
                    std::string(s.get_string({"status", "progress"}, "-")),
                    std::to_string(int_at(s, {"status", "inProgress"})),
                    std::to_string(int_at(s, {"status", "failed"})),
                    std::to_string(int_at(s, {"status", "blocked"})),
                    std::to_string(int_at(s, {"status", "drifted"})),
                    std::to_string(int_at(s, {"status", "validating"})),
                    std::string(s.get_string({"status", "target"}, "-"))});
  }
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], r[i].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i)
      line += i + 1 < r.size() ? pad(r[i], widths[i] + 2) : r[i];
    out += line + "\n";
  }
  for (const auto& s : sets) {
    std::string name(s.get_string({"metadata", "name"}));
    const core::Value* comps = s.get({"status", "compartments"});
    if (comps == nullptr || !comps->is_list() || comps->size() == 0) continue;
    out += "\n" + name + "\n";
    std::size_t cw = 0;
    for (const auto& c : comps->as_list()) cw = std::max(cw, c.get_string({"name"}).size());
    for (const auto& c : comps->as_list()) {
      std::int64_t done = int_at(c, {"done"}), nodes = int_at(c, {"nodes"});
      if (nodes == 0) {  // a bar of 0/0 and a batch size would describe a rollout that is not
        out += "  " + pad(std::string(c.get_string({"name"})), cw + 2) + "no nodes selected\n";
        continue;
      }
      std::string line = "  " + pad(std::string(c.get_string({"name"})), cw + 2) +
                         progress_bar(done, nodes) + " " + std::to_string(done) + "/" +
                         std::to_string(nodes);
      line += "  active " + std::to_string(int_at(c, {"inProgress"})) + "/" +
              std::to_string(int_at(c, {"budget"})) + "  batch " +
              std::to_string(int_at(c, {"batch"})) + " (size " +
              std::to_string(int_at(c, {"batchSize"})) + ")";
      if (int_at(c, {"failed"}) > 0) line += "  failed " + std::to_string(int_at(c, {"failed"}));
      const core::Value* stopped = c.get({"stopped"});
      if (stopped != nullptr && stopped->is_bool() && stopped->as_bool())
        line += "  STOPPED: " + std::string(c.get_string({"stopReason"}));
      out += line + "\n";
    }
    if (const core::Value* conds = s.get({"status", "conditions"}); conds && conds->is_list()) {
      for (const auto& c : conds->as_list()) {
        std::string type(c.get_string({"type"})), st(c.get_string({"status"}));
        bool bad =
            (type == "Ready")
                ? st != "True"
                : (type == "Stopped" || type == "Blocked" || type == "Drifted") && st == "True";
        if (bad && type != "Ready")
          out += "  " + type + ": " + std::string(c.get_string({"reason"})) + ": " +
                 std::string(c.get_string({"message"})) + "\n";
      }
    }
    if (const core::Value* m = s.get({"status", "nodeMessages"}); m && m->is_list()) {
      for (const auto& x : m->as_list())
        if (x.is_string()) out += "  node " + x.as_string() + "\n";
    }
  }
  return out;
}

core::Value status_document(const std::vector<core::Value>& sets) {
  core::Value list = core::Value::list();
  for (const auto& s : sets) {
    core::Value item;
    item["name"] = std::string(s.get_string({"metadata", "name"}));
    if (const core::Value* p = s.get({"spec", "deploymentPolicy"})) item["deploymentPolicy"] = *p;
    item["status"] = s.get({"status"}) != nullptr ? *s.get({"status"}) : core::Value::map();
    list.push_back(std::move(item));
  }
  core::Value doc;
  doc["hostPackageSets"] = std::move(list);
  return doc;
}

}  // namespace gpufleet::hostpkg
