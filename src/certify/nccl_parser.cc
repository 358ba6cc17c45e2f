#include "certify/nccl_parser.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "certify/text_lines.h"
#include "core/json.h"

namespace gpufleet::certify {
namespace {

using namespace detail;

constexpr std::string_view kText = "nccl-tests";
constexpr std::string_view kJson = "nccl-tests JSON";
constexpr std::size_t kMaxRows = 10000;
constexpr std::size_t kMaxHosts = 20000;

void add_host(NcclResult& r, std::string_view host) {
  if (r.hosts.size() < kMaxHosts &&
      std::find(r.hosts.begin(), r.hosts.end(), host) == r.hosts.end()) {
    r.hosts.emplace_back(host);
  }
}

// Columns after size/count/type/redop[/root]: per placement time algbw busbw #wrong, plus
// i_min i_max i_p99 i_cv% with per-iteration timing; a trailing timestamp is two tokens.
struct Layout {
  bool root = true;
  bool per_iter = false;
  bool timestamp = false;
};

NcclPlacement read_placement(const std::vector<std::string_view>& t, std::size_t at,
                             std::size_t number, std::string_view line) {
  NcclPlacement p;
  auto num = [&](std::size_t i, const char* what) {
    auto v = to_double(t[i]);
    if (!v || *v < 0) {
      throw OutputError(kText, number, line,
                        std::string(what) + " \"" + std::string(t[i]) + "\" is not a number >= 0");
    }
    return *v;
  };
  p.time_us = num(at, "time");
  p.algbw_gbs = num(at + 1, "algbw");
  p.busbw_gbs = num(at + 2, "busbw");
  std::string_view w = t[at + 3];
  if (w != "N/A") {
    auto v = to_double(w);  // printed with %g: 1e+06 for a million wrong elements
    if (!v || *v < 0 || *v > 9.2e18) {
      throw OutputError(kText, number, line, "#wrong \"" + std::string(w) + "\" is not a count");
    }
    p.wrong = static_cast<std::int64_t>(*v);
  }
  return p;
}

void parse_row(NcclResult& r, const Layout& layout, std::size_t number, std::string_view line) {
  std::vector<std::string_view> t = split_ws(line);
  const std::size_t head = layout.root ? 5 : 4;
  const std::size_t per = layout.per_iter ? 8 : 4;
  std::size_t n = t.size() - (layout.timestamp && t.size() >= 2 ? 2 : 0);
  bool both = n == head + 2 * per;
  bool in_place_only = n == head + per;
  if (!both && !in_place_only) {
    throw OutputError(kText, number, line,
                      "a result row has " + std::to_string(t.size()) + " columns, expected " +
                          std::to_string(head + 2 * per) + " (size count type redop" +
                          (layout.root ? " root" : "") + " and time algbw busbw #wrong twice)");
  }
  NcclRow row;
  auto size = to_uint(t[0]);
  auto count = to_uint(t[1]);
  if (!size || !count) {
    throw OutputError(kText, number, line, "size and count must be whole numbers");
  }
  row.size = *size;
  row.count = *count;
  row.type = t[2];
  row.redop = t[3];
  if (layout.root && !to_int(t[4])) {
    throw OutputError(kText, number, line, "root \"" + std::string(t[4]) + "\" is not a rank");
  }
  if (both) {
    row.out_of_place = read_placement(t, head, number, line);
    row.in_place = read_placement(t, head + per, number, line);
  } else {
    row.in_place = read_placement(t, head, number, line);
  }
  if (r.rows.size() >= kMaxRows) {
    throw OutputError(kText, number, line,
                      "more than " + std::to_string(kMaxRows) + " result rows");
  }
  r.rows.push_back(std::move(row));
}

// The value after ':' of "# Avg bus bandwidth    : 312.45 OK".
std::string_view after_colon(std::string_view line) {
  std::size_t c = line.find(':');
  return c == std::string_view::npos ? std::string_view{} : trim(line.substr(c + 1));
}

}  // namespace

std::int64_t NcclResult::total_wrong() const noexcept {
  std::int64_t sum = 0;
  for (const NcclRow& row : rows) {
    for (const auto* p : {&row.out_of_place, &row.in_place}) {
      // Saturating: many rows of huge counts must not overflow.
      if (p->has_value() && (*p)->wrong) {
        sum = *(*p)->wrong > std::numeric_limits<std::int64_t>::max() - sum
                  ? std::numeric_limits<std::int64_t>::max()
                  : sum + *(*p)->wrong;
      }
    }
  }
  return sum;
}

std::string_view statistic_name(NcclStatistic s) noexcept {
  switch (s) {
    case NcclStatistic::LargestSize: return "largestSize";
    case NcclStatistic::Maximum: return "maximum";
    case NcclStatistic::Average: return "average";
  }
  return "largestSize";
}

NcclStatistic parse_statistic(std::string_view name) {
  for (auto s : {NcclStatistic::LargestSize, NcclStatistic::Maximum, NcclStatistic::Average}) {
    if (statistic_name(s) == name) return s;
  }
  throw core::InvalidInput("statistic \"" + std::string(name) +
                           "\" is not one of largestSize, maximum, average");
}

NcclResult parse_nccl_text(std::string_view text) {
  check_output_size(kText, text);
  NcclResult r;
  Layout layout;
  NcclTransportScanner transport;
  for_each_line(text, [&](std::size_t number, std::string_view line) {
    std::string_view s = trim(line);
    if (s.empty()) return;
    // "<host>:<pid>:<tid> [<dev>] NCCL INFO ...": before the row test, as a host name may
    // start with a digit. WARN lines go on to the failure test below.
    if (transport.add_line(s) && s.find(" NCCL WARN ") == std::string_view::npos) return;
    if (s.front() == '#') {
      std::string_view body = trim(s.substr(1));
      if (body.starts_with("Collective test starting:")) {
        r.collective = std::string(after_colon(body));
      } else if (body.starts_with("Collective test concluded")) {
        r.concluded = true;
      } else if (body.starts_with("Rank ")) {
        // "#  Rank  0 Group  0 Pid   6899 on host-a device  0 [0000:04:00] NVIDIA H100"
        auto t = split_ws(body);
        auto on = std::find(t.begin(), t.end(), std::string_view("on"));
        if (on != t.end() && on + 1 != t.end()) add_host(r, *(on + 1));
        ++r.ranks;  // old versions print "Rank N uses device D" without the host
      } else if (body.starts_with("Avg bus bandwidth")) {
        auto t = split_ws(after_colon(body));
        auto v = t.empty() ? std::nullopt : to_double(t[0]);
        // A negative or NaN average would pass a "value <= x" threshold and fail nothing.
        if (!v || !(*v >= 0)) {
          throw OutputError(kText, number, line, "the average bus bandwidth is not a number >= 0");
        }
        r.avg_busbw_gbs = *v;
      } else if (body.starts_with("Out of bounds values")) {
        auto t = split_ws(after_colon(body));
        auto v = t.empty() ? std::nullopt : to_int(t[0]);
        if (!v) throw OutputError(kText, number, line, "the out-of-bounds count is not a number");
        r.out_of_bounds = *v;
      } else if (body.starts_with("size ")) {
        // The column header says which optional columns the rows carry.
        auto t = split_ws(body);
        layout.root = std::find(t.begin(), t.end(), std::string_view("root")) != t.end();
        layout.per_iter = std::find(t.begin(), t.end(), std::string_view("i_min")) != t.end();
        layout.timestamp = std::find(t.begin(), t.end(), std::string_view("timestamp")) != t.end();
      }
      return;
    }
    // A row starts with the size; everything else is a failure line or launcher noise.
    if (s.front() >= '0' && s.front() <= '9' && s.find(" NCCL WARN ") == std::string_view::npos) {
      parse_row(r, layout, number, s);
      return;
    }
    if (icontains(s, "failure") || icontains(s, "error")) {
      if (icontains(s, "NCCL INFO")) return;  // NCCL_DEBUG=INFO chatter mentions "error"
      if (r.failures.size() < 100) r.failures.emplace_back(s.substr(0, 500));
    }
  });
  if (r.rows.empty() && r.failures.empty()) {
    throw OutputError(kText, 0, {},
                      "no result rows and no failure line: the run produced no measurement");
  }
  r.transports = transport.hosts();
  // In rank order (the "#  Rank" lines), not the order the ranks' processes raced to print.
  auto rank_of = [&](const NcclHostTransport& t) {
    return std::find(r.hosts.begin(), r.hosts.end(), t.host) - r.hosts.begin();
  };
  std::stable_sort(r.transports.begin(), r.transports.end(),
                   [&](const auto& a, const auto& b) { return rank_of(a) < rank_of(b); });
  return r;
}

NcclResult parse_nccl_json(std::string_view text) {
  check_output_size(kJson, text);
  core::Value doc;
  try {
    doc = core::parse_json(text, "nccl-tests JSON");
  } catch (const core::ParseError& e) {
    throw json_output_error(kJson, text, e);
  }
  auto fail = [](const std::string& what) { throw OutputError(kJson, 0, {}, what); };
  if (!doc.is_map()) fail("the document is not an object");
  NcclResult r;
  if (const core::Value* args = doc.find("args");
      args && args->is_list() && !args->as_list().empty()) {
    if (const std::string* prog = args->as_list().front().if_string()) {
      std::string_view p = *prog;
      if (auto slash = p.rfind('/'); slash != std::string_view::npos) p.remove_prefix(slash + 1);
      r.collective = std::string(p.substr(0, 200));
    }
  }
  if (const core::Value* devices = doc.get({"config", "devices"}); devices && devices->is_list()) {
    for (const core::Value& d : devices->as_list()) {
      ++r.ranks;
      std::string_view host = d.get_string({"hostname"});
      if (!host.empty()) add_host(r, host);
    }
  }
  const core::Value* results = doc.find("results");
  if (results == nullptr || !results->is_list()) fail("\"results\" is missing or not a list");
  if (results->as_list().size() > kMaxRows)
    fail("more than " + std::to_string(kMaxRows) + " results");
  auto number = [&](const core::Value& obj, std::string_view key, const std::string& where) {
    const core::Value* v = obj.find(key);
    if (v == nullptr || !v->is_number())
      fail(where + "." + std::string(key) + " is missing or not a number");
    double d = v->as_double();
    // Also bounds what is converted to an integer below (sizes, counts, #wrong).
    if (!std::isfinite(d) || d < 0 || d > 1e18) {
      fail(where + "." + std::string(key) + " is not a number in 0..1e18");
    }
    return d;
  };
  auto placement = [&](const core::Value& row, std::string_view key,
                       const std::string& where) -> std::optional<NcclPlacement> {
    const core::Value* p = row.find(key);
    if (p == nullptr || p->is_null()) return std::nullopt;
    std::string at = where + "." + std::string(key);
    if (!p->is_map()) fail(at + " is not an object");
    NcclPlacement out;
    out.time_us = p->find("time") ? number(*p, "time", at) : number(*p, "cpu_time", at);
    out.algbw_gbs = number(*p, "alg_bw", at);
    out.busbw_gbs = number(*p, "bus_bw", at);
    if (const core::Value* w = p->find("nwrong"); w && !w->is_null()) {
      out.wrong = static_cast<std::int64_t>(number(*p, "nwrong", at));
    }
    return out;
  };
  std::size_t i = 0;
  for (const core::Value& row : results->as_list()) {
    std::string where = "results[" + std::to_string(i++) + "]";
    if (!row.is_map()) fail(where + " is not an object");
    NcclRow out;
    out.size = static_cast<std::uint64_t>(number(row, "size", where));
    out.count = static_cast<std::uint64_t>(number(row, "count", where));
    out.type = std::string(row.get_string({"type"}));
    out.redop = std::string(row.get_string({"redop"}));
    out.out_of_place = placement(row, "out_of_place", where);
    out.in_place = placement(row, "in_place", where);
    if (!out.out_of_place && !out.in_place) fail(where + " has neither out_of_place nor in_place");
    r.rows.push_back(std::move(out));
  }
  if (const core::Value* avg = doc.get({"average_bus_bandwidth", "bandwidth"})) {
    if (!avg->is_number() || !(avg->as_double() >= 0) || !std::isfinite(avg->as_double())) {
      fail("average_bus_bandwidth.bandwidth is not a finite number >= 0");
    }
    r.avg_busbw_gbs = avg->as_double();
  }
  if (const core::Value* oob = doc.get({"out_of_bounds", "count"}); oob && oob->is_number()) {
    double d = oob->as_double();
    if (!(d >= 0 && d <= 1e18)) fail("out_of_bounds.count is not a number in 0..1e18");
    r.out_of_bounds = static_cast<std::int64_t>(d);
  }
  if (const core::Value* errors = doc.find("errors"); errors && errors->is_list()) {
    for (const core::Value& e : errors->as_list()) {
      if (const std::string* s = e.if_string(); s && !s->empty() && r.failures.size() < 100) {
        r.failures.push_back(s->substr(0, 500));
      }
    }
  }
  r.concluded = doc.find("end_time") != nullptr;
  if (r.rows.empty() && r.failures.empty()) {
    fail("no results and no errors: the run produced no measurement");
  }
  return r;
}

NcclResult parse_nccl(std::string_view text) {
  std::string_view s = trim(text.substr(0, std::min<std::size_t>(text.size(), 4096)));
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s = trim(s.substr(1));
  if (!s.empty() && s.front() == '{') return parse_nccl_json(text);
  return parse_nccl_text(text);
}

NcclMetrics nccl_metrics(const NcclResult& r, NcclStatistic statistic) {
  if (r.rows.empty()) {
    throw OutputError(
        kText, 0, {},
        "no result rows to take the " + std::string(statistic_name(statistic)) + " statistic from");
  }
  NcclMetrics m;
  m.wrong = r.total_wrong();
  auto each = [](const NcclRow& row, auto&& f) {
    if (row.out_of_place) f(*row.out_of_place);
    if (row.in_place) f(*row.in_place);
  };
  switch (statistic) {
    case NcclStatistic::LargestSize: {
      const NcclRow* largest = &r.rows.front();
      for (const NcclRow& row : r.rows) {
        if (row.size > largest->size) largest = &row;
      }
      m.size = largest->size;
      m.bus_bandwidth_gbs = m.alg_bandwidth_gbs = std::numeric_limits<double>::max();
      each(*largest, [&](const NcclPlacement& p) {
        m.bus_bandwidth_gbs = std::min(m.bus_bandwidth_gbs, p.busbw_gbs);
        m.alg_bandwidth_gbs = std::min(m.alg_bandwidth_gbs, p.algbw_gbs);
      });
      break;
    }
    case NcclStatistic::Maximum:
      for (const NcclRow& row : r.rows) {
        each(row, [&](const NcclPlacement& p) {
          m.bus_bandwidth_gbs = std::max(m.bus_bandwidth_gbs, p.busbw_gbs);
          m.alg_bandwidth_gbs = std::max(m.alg_bandwidth_gbs, p.algbw_gbs);
        });
      }
      break;
    case NcclStatistic::Average: {
      double bus = 0, alg = 0;
      int n = 0;
      for (const NcclRow& row : r.rows) {
        each(row, [&](const NcclPlacement& p) {
          bus += p.busbw_gbs;
          alg += p.algbw_gbs;
          ++n;
        });
      }
      m.bus_bandwidth_gbs = r.avg_busbw_gbs.value_or(n > 0 ? bus / n : 0);
      m.alg_bandwidth_gbs = n > 0 ? alg / n : 0;
      break;
    }
  }
  return m;
}

}  // namespace gpufleet::certify
