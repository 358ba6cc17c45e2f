#include "support/promql_names.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/json.h"

namespace gpufleet::testing {
namespace {

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// Keywords followed by a list of label names in parentheses.
const std::set<std::string, std::less<>> kLabelListKeywords = {
    "by", "without", "on", "ignoring", "group_left", "group_right"};
// Aggregation operators, which may take their by/without list before the parentheses:
// `sum by (le) (x)`.
const std::set<std::string, std::less<>> kAggregations = {
    "sum",   "min",          "max",     "avg",  "group",    "stddev", "stdvar",
    "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"};
// Binary operators, modifiers and number literals spelled as words.
const std::set<std::string, std::less<>> kWordKeywords = {"bool",   "offset", "and", "or",
                                                          "unless", "atan2",  "inf", "nan"};

class Scanner {
 public:
  explicit Scanner(std::string_view expr) : s_(expr) {}

  std::vector<std::string> names() {
    std::set<std::string> out;
    int depth = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (is_space(c)) {
        ++i_;
      } else if (c == '#') {  // a comment runs to the end of the line
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == '"' || c == '\'' || c == '`') {
        i_ = end_of_string(i_);
      } else if (c == '{') {
        const std::size_t close = matching(i_, '{', '}');
        if (auto name = name_matcher(i_ + 1, close); !name.empty()) out.insert(name);
        i_ = close + 1;
      } else if (c == '[') {  // a range or subquery: durations only
        i_ = matching(i_, '[', ']') + 1;
      } else if (c == '$') {  // a Grafana variable: $name or ${name}
        ++i_;
        if (i_ < s_.size() && s_[i_] == '{') {
          i_ = matching(i_, '{', '}') + 1;
        } else {
          while (i_ < s_.size() && is_ident_char(s_[i_])) ++i_;
        }
      } else if (is_digit(c) || (c == '.' && i_ + 1 < s_.size() && is_digit(s_[i_ + 1]))) {
        // A number or a duration (5m, 1h30m, 0x1f, 1e3).
        while (i_ < s_.size() && (is_ident_char(s_[i_]) || s_[i_] == '.')) ++i_;
      } else if (is_ident_start(c)) {
        word(out);
      } else {
        if (c == '(') ++depth;
        if (c == ')' && --depth < 0) fail("')' without '('", i_);
        ++i_;
      }
    }
    if (depth != 0) fail("'(' without ')'", s_.size());
    return {out.begin(), out.end()};
  }

 private:
  [[noreturn]] void fail(const std::string& what, std::size_t at) const {
    throw std::invalid_argument(what + " at offset " + std::to_string(at) + " of \"" +
                                std::string(s_) + "\"");
  }

  std::size_t next_non_space(std::size_t j) const {
    while (j < s_.size() && is_space(s_[j])) ++j;
    return j;
  }

  // Whether one of the words starts at `at` (and ends there: "by" is not "bytes").
  bool starts_word(std::size_t at, std::string_view a, std::string_view b) const {
    std::size_t end = at;
    while (end < s_.size() && is_ident_char(s_[end])) ++end;
    const std::string w = lower(s_.substr(at, end - at));
    return w == a || w == b;
  }

  // The index after the closing quote of the string opening at `at`.
  std::size_t end_of_string(std::size_t at) const {
    const char quote = s_[at];
    for (std::size_t j = at + 1; j < s_.size(); ++j) {
      if (s_[j] == '\\' && quote != '`') {
        ++j;
      } else if (s_[j] == quote) {
        return j + 1;
      }
    }
    fail(std::string("unclosed string ") + quote, at);
  }

  // The index of the bracket closing the one at `at`, strings skipped.
  std::size_t matching(std::size_t at, char open, char close) const {
    int depth = 0;
    for (std::size_t j = at; j < s_.size();) {
      const char c = s_[j];
      if (c == '"' || c == '\'' || c == '`') {
        j = end_of_string(j);
        continue;
      }
      if (c == open) ++depth;
      if (c == close && --depth == 0) return j;
      ++j;
    }
    fail(std::string("unclosed '") + open + "'", at);
  }

  // The metric a selector's matchers name with __name__="x" (x unescaped only for \" and \\).
  std::string name_matcher(std::size_t from, std::size_t to) const {
    std::size_t j = from;
    while (j < to) {
      j = next_non_space(j);
      const std::size_t label_start = j;
      while (j < to && is_ident_char(s_[j])) ++j;
      const std::string_view label = s_.substr(label_start, j - label_start);
      j = next_non_space(j);
      const std::size_t op_start = j;
      while (j < to && (s_[j] == '=' || s_[j] == '!' || s_[j] == '~')) ++j;
      const std::string_view op = s_.substr(op_start, j - op_start);
      j = next_non_space(j);
      if (j >= to || (s_[j] != '"' && s_[j] != '\'' && s_[j] != '`')) return {};
      const std::size_t end = end_of_string(j);
      if (label == "__name__" && op == "=") {
        std::string value;
        for (std::size_t k = j + 1; k + 1 < end; ++k) {
          if (s_[k] == '\\' && k + 2 < end) ++k;
          value += s_[k];
        }
        return value;
      }
      j = next_non_space(end);
      if (j < to && s_[j] == ',') ++j;
    }
    return {};
  }

  // An identifier: a keyword (and its label list), a function, or a metric name.
  void word(std::set<std::string>& out) {
    const std::size_t start = i_;
    while (i_ < s_.size() && is_ident_char(s_[i_])) ++i_;
    const std::string_view w = s_.substr(start, i_ - start);
    const std::size_t next = next_non_space(i_);
    const bool call = next < s_.size() && s_[next] == '(';
    const std::string key = lower(w);
    if (kLabelListKeywords.contains(key)) {
      if (call) i_ = matching(next, '(', ')') + 1;
      return;
    }
    if (kWordKeywords.contains(key) || call) return;
    if (kAggregations.contains(key) && starts_word(next, "by", "without")) return;
    out.insert(std::string(w));
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string string_field(const core::Value& v, std::string_view key) {
  const core::Value* f = v.find(key);
  return f != nullptr && f->is_string() ? f->as_string() : std::string();
}

void collect_panels(const core::Value& holder, const std::string& dashboard,
                    std::vector<DashboardQuery>& out) {
  const core::Value* panels = holder.find("panels");
  if (panels == nullptr || !panels->is_list()) return;
  for (const core::Value& panel : panels->as_list()) {
    if (!panel.is_map()) continue;
    const std::string title = string_field(panel, "title");
    if (const core::Value* targets = panel.find("targets"); targets && targets->is_list()) {
      for (const core::Value& t : targets->as_list()) {
        if (!t.is_map() || t.find("expr") == nullptr) continue;
        out.push_back({dashboard, title, string_field(t, "refId"), string_field(t, "expr")});
      }
    }
    collect_panels(panel, dashboard, out);  // a row's collapsed panels
  }
}

}  // namespace

std::vector<std::string> promql_metric_names(std::string_view expr) {
  return Scanner(expr).names();
}

MetricFamilies parse_exposition_families(std::string_view text) {
  MetricFamilies out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    const bool type = line.starts_with("# TYPE ");
    if (!type && !line.starts_with("# HELP ")) continue;
    line.remove_prefix(7);
    const std::size_t sp = line.find(' ');
    const std::string name(line.substr(0, sp));
    if (name.empty()) continue;
    if (type) {
      std::string_view kind = sp == std::string_view::npos ? "untyped" : line.substr(sp + 1);
      while (!kind.empty() && is_space(kind.back())) kind.remove_suffix(1);
      out[name] = std::string(kind);
    } else {
      out.try_emplace(name, "untyped");
    }
  }
  return out;
}

std::string exported_family(std::string_view metric, const MetricFamilies& families) {
  if (families.contains(metric)) return std::string(metric);
  struct Suffix {
    std::string_view text;
    bool summary_too;
  };
  for (const Suffix& s : {Suffix{"_bucket", false}, Suffix{"_sum", true}, Suffix{"_count", true}}) {
    if (!metric.ends_with(s.text)) continue;
    const std::string_view base = metric.substr(0, metric.size() - s.text.size());
    auto it = families.find(base);
    if (it == families.end()) continue;
    if (it->second == "histogram" || (s.summary_too && it->second == "summary"))
      return std::string(base);
  }
  return {};
}

std::vector<DashboardQuery> dashboard_queries(std::string_view json, const std::string& dashboard) {
  core::Value doc;
  try {
    doc = core::parse_json(json, dashboard);
  } catch (const std::exception& e) {
    throw std::runtime_error(dashboard + ": not a JSON document: " + e.what());
  }
  std::vector<DashboardQuery> out;
  collect_panels(doc, dashboard, out);
  return out;
}

std::vector<DashboardQuery> read_dashboard_queries(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<DashboardQuery> out;
  for (const auto& f : files) {
    auto qs = dashboard_queries(read_file(f), f.filename().string());
    out.insert(out.end(), qs.begin(), qs.end());
  }
  return out;
}

std::vector<std::string> unexported_metrics(const std::vector<DashboardQuery>& queries,
                                            const MetricFamilies& families) {
  std::vector<std::string> out;
  for (const DashboardQuery& q : queries) {
    const std::string where = q.dashboard + ": panel \"" + q.panel + "\" (" + q.ref_id + "): ";
    std::vector<std::string> names;
    try {
      names = promql_metric_names(q.expr);
    } catch (const std::invalid_argument& e) {
      out.push_back(where + "the query does not parse: " + e.what());
      continue;
    }
    if (names.empty()) out.push_back(where + "the query reads no metric: " + q.expr);
    for (const std::string& n : names) {
      if (exported_family(n, families).empty()) {
        out.push_back(where + n + " is not exported by any process (query: " + q.expr + ")");
      }
    }
  }
  return out;
}

}  // namespace gpufleet::testing
