#include "certify/dcgm_parser.h"

#include <algorithm>

#include "certify/text_lines.h"
#include "core/json.h"

namespace gpufleet::certify {
namespace {

using namespace detail;

constexpr std::string_view kFormat = "DCGM diagnostic";
constexpr std::size_t kMaxResults = 20000;

[[noreturn]] void fail(const std::string& what) { throw OutputError(kFormat, 0, {}, what); }

std::optional<DcgmStatus> status_of(std::string_view s) {
  s = trim(s);
  if (iequals(s, "pass") || iequals(s, "passed")) return DcgmStatus::Pass;
  if (iequals(s, "fail") || iequals(s, "failed")) return DcgmStatus::Fail;
  if (iequals(s, "warn") || iequals(s, "warning")) return DcgmStatus::Warn;
  if (iequals(s, "skip") || iequals(s, "skipped")) return DcgmStatus::Skip;
  if (iequals(s, "not run") || iequals(s, "notrun")) return DcgmStatus::NotRun;
  return std::nullopt;
}

std::optional<std::int64_t> int_field(const core::Value& obj, std::string_view key) {
  const core::Value* v = obj.find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int()) return v->as_int();
  if (v->is_number()) {
    double d = v->as_double();
    if (!(d >= -1e15 && d <= 1e15)) return std::nullopt;  // no integer conversion overflow
    return static_cast<std::int64_t>(d);
  }
  if (const std::string* s = v->if_string()) return to_int(*s);
  return std::nullopt;
}

// "0", "0,1,2", 3
std::vector<int> gpu_ids(const core::Value& v, const std::string& where) {
  std::vector<int> out;
  if (v.is_int()) {
    out.push_back(static_cast<int>(v.as_int()));
  } else if (const std::string* s = v.if_string()) {
    std::string_view rest = *s;
    while (!rest.empty()) {
      std::size_t comma = rest.find(',');
      auto id = to_int(trim(rest.substr(0, comma)));
      if (!id || *id < 0 || *id > 1023) fail(where + " GPU id list \"" + *s + "\" does not read");
      out.push_back(static_cast<int>(*id));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  } else {
    fail(where + " GPU id is neither a number nor a string");
  }
  return out;
}

void read_strings(const core::Value* v, std::vector<std::string>& out) {
  if (v == nullptr) return;
  if (const std::string* s = v->if_string()) {
    out.push_back(s->substr(0, 1000));
    return;
  }
  if (!v->is_list()) return;
  for (const core::Value& e : v->as_list()) {
    if (const std::string* s = e.if_string(); s && out.size() < 50)
      out.push_back(s->substr(0, 1000));
  }
}

}  // namespace

std::string_view dcgm_status_name(DcgmStatus s) noexcept {
  switch (s) {
    case DcgmStatus::Pass: return "Pass";
    case DcgmStatus::Fail: return "Fail";
    case DcgmStatus::Warn: return "Warn";
    case DcgmStatus::Skip: return "Skip";
    case DcgmStatus::NotRun: return "NotRun";
  }
  return "NotRun";
}

int DcgmReport::failures() const noexcept {
  return static_cast<int>(std::count_if(results.begin(), results.end(), [](const DcgmResult& r) {
    return r.status == DcgmStatus::Fail;
  }));
}

int DcgmReport::warnings() const noexcept {
  return static_cast<int>(std::count_if(results.begin(), results.end(), [](const DcgmResult& r) {
    return r.status == DcgmStatus::Warn;
  }));
}

std::vector<int> DcgmReport::failed_gpus() const {
  std::vector<int> out;
  for (const DcgmResult& r : results) {
    if (r.status == DcgmStatus::Fail) out.insert(out.end(), r.gpus.begin(), r.gpus.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

DcgmReport parse_dcgm(std::string_view text) {
  check_output_size(kFormat, text);
  // dcgmi can print a line of its own before the document.
  std::size_t brace = text.find('{');
  if (brace == std::string_view::npos) {
    std::string_view first;
    for_each_line(text, [&](std::size_t n, std::string_view l) {
      if (n == 1) first = l;
    });
    throw OutputError(kFormat, 1, first, "no JSON document in the output");
  }
  std::size_t skipped_lines = static_cast<std::size_t>(
      std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(brace), '\n'));
  std::string_view json = text.substr(brace);
  core::Value doc;
  try {
    doc = core::parse_json(json, "dcgmi diag");
  } catch (const core::ParseError& e) {
    throw json_output_error(kFormat, json, e, skipped_lines);
  }
  DcgmReport report;
  const core::Value* root = nullptr;
  if ((root = doc.find("DCGM GPU Diagnostic")) != nullptr) {
    report.major_version = 3;
  } else if ((root = doc.find("DCGM Diagnostic")) != nullptr) {
    report.major_version = 4;
  } else {
    fail("neither \"DCGM GPU Diagnostic\" (3.x) nor \"DCGM Diagnostic\" (4.x) at the top level");
  }
  if (!root->is_map()) fail("the diagnostic is not an object");
  report.version = std::string(root->get_string({"version"}).substr(0, 64));
  if (report.version.starts_with("4.")) report.major_version = 4;
  if (const core::Value* err = root->find("runtime_error"); err && err->is_string()) {
    fail("dcgmi reported a runtime error: " + err->as_string().substr(0, 500));
  }
  const core::Value* categories = root->find("test_categories");
  if (categories == nullptr || !categories->is_list())
    fail("\"test_categories\" is missing or not a list");
  std::size_t ci = 0;
  for (const core::Value& category : categories->as_list()) {
    std::string cwhere = "test_categories[" + std::to_string(ci++) + "]";
    if (!category.is_map()) continue;  // DCGM 3.x has been seen emitting nulls between entries
    const core::Value* tests = category.find("tests");
    if (tests == nullptr || !tests->is_list()) fail(cwhere + ".tests is missing or not a list");
    std::size_t ti = 0;
    for (const core::Value& test : tests->as_list()) {
      std::string twhere = cwhere + ".tests[" + std::to_string(ti++) + "]";
      if (!test.is_map()) continue;
      const core::Value* results = test.find("results");
      if (results == nullptr || !results->is_list())
        fail(twhere + ".results is missing or not a list");
      std::size_t ri = 0;
      for (const core::Value& res : results->as_list()) {
        std::string where = twhere + ".results[" + std::to_string(ri++) + "]";
        if (!res.is_map()) fail(where + " is not an object");
        DcgmResult out;
        out.category = std::string(category.get_string({"category"}).substr(0, 100));
        out.test = std::string(test.get_string({"name"}).substr(0, 100));
        std::string_view status = res.get_string({"status"});
        auto st = status_of(status);
        if (!st)
          fail(where + " status \"" + std::string(status.substr(0, 50)) +
               "\" is not a DCGM status (Pass, Fail, Warn, Skip)");
        out.status = *st;
        if (const core::Value* g = res.find("entity_group")) {
          if (const std::string* s = g->if_string()) out.entity_group = s->substr(0, 32);
        }
        if (const core::Value* id = res.find("entity_id")) {
          out.gpus = gpu_ids(*id, where);
        } else if (const core::Value* id = res.find("gpu_id")) {
          out.gpus = gpu_ids(*id, where);
        } else if (const core::Value* id = res.find("gpu_ids")) {
          out.gpus = gpu_ids(*id, where);
        }
        if (const core::Value* warnings = res.find("warnings"); warnings && warnings->is_list()) {
          for (const core::Value& w : warnings->as_list()) {
            if (out.warnings.size() >= 50) break;
            DcgmWarning dw;
            if (const std::string* s = w.if_string()) {
              dw.text = s->substr(0, 1000);
            } else if (w.is_map()) {
              dw.text = std::string(w.get_string({"warning"}).substr(0, 1000));
              dw.error_id = int_field(w, "error_id");
              dw.category = int_field(w, "error_category");
              dw.severity = int_field(w, "error_severity");
            } else {
              continue;
            }
            out.warnings.push_back(std::move(dw));
          }
        }
        read_strings(res.find("info"), out.info);
        if (report.results.size() >= kMaxResults)
          fail("more than " + std::to_string(kMaxResults) + " results");
        report.results.push_back(std::move(out));
      }
    }
  }
  if (report.results.empty()) fail("no test results: the diagnostic ran nothing");
  return report;
}

}  // namespace gpufleet::certify
