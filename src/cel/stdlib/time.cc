// timestamp() and duration() conversions and their calendar/clock accessors.
#include "core/time.h"
#include "cel/eval_context.h"
#include "cel/functions.h"

namespace gpufleet::cel {
namespace {

using K = ValKind;

Val fn_timestamp(EvalContext&, const Val* a, std::size_t n) {
  switch (a[0].kind()) {
    case K::Timestamp: return a[0];
    case K::String: {
      auto t = core::Timestamp::try_parse_rfc3339(a[0].text());
      if (!t) {
        return Val::error("timestamp() cannot parse '" + std::string(a[0].text()) +
                          "' (expected RFC 3339 such as 2024-01-02T15:04:05Z, years 0001-9999)");
      }
      return Val::timestamp(*t);
    }
    case K::Int:
      if (!core::Timestamp::in_range(a[0].as_int()))
        return Val::error("timestamp() out of range: " + a[0].debug_string());
      return Val::timestamp(a[0].as_int(), 0);
    default: return no_such_overload("timestamp", a, n);
  }
}

Val fn_duration(EvalContext&, const Val* a, std::size_t n) {
  switch (a[0].kind()) {
    case K::Duration: return a[0];
    case K::String: {
      auto d = core::try_parse_duration(a[0].text());
      if (!d) {
        return Val::error("duration() cannot parse '" + std::string(a[0].text()) +
                          "' (expected e.g. 1h30m, 1.5s, 300ms, within +-10000 years)");
      }
      return Val::duration(*d);
    }
    default: return no_such_overload("duration", a, n);
  }
}

enum class Field {
  FullYear,
  Month,
  Date,
  DayOfMonth,
  DayOfWeek,
  DayOfYear,
  Hours,
  Minutes,
  Seconds,
  Millis
};

template <Field F>
Val accessor(EvalContext&, const Val* a, std::size_t n) {
  static constexpr const char* kNames[] = {
      "getFullYear",  "getMonth", "getDate",    "getDayOfMonth", "getDayOfWeek",
      "getDayOfYear", "getHours", "getMinutes", "getSeconds",    "getMilliseconds"};
  const char* name = kNames[static_cast<int>(F)];
  const Val& x = a[0];
  if (x.kind() == K::Duration && n == 1) {
    std::int64_t s = x.seconds();
    switch (F) {
      case Field::Hours: return Val::integer(s / 3600);
      case Field::Minutes: return Val::integer(s / 60);
      case Field::Seconds: return Val::integer(s);
      case Field::Millis: return Val::integer(s * 1000 + x.nanos() / 1000000);
      default: return no_such_overload(name, a, n);
    }
  }
  if (x.kind() != K::Timestamp || (n == 2 && a[1].kind() != K::String) || n > 2) {
    return no_such_overload(name, a, n);
  }
  std::int32_t offset = 0;
  if (n == 2) {
    auto off = core::zone_offset(a[1].text(), x.as_timestamp());
    if (!off) {
      return Val::error(
          "unknown time zone '" + std::string(a[1].text()) +
          "' (use an IANA name such as Europe/Paris, UTC, or an offset such as +05:30)");
    }
    offset = *off;
  }
  core::CivilTime c = core::civil_time(x.as_timestamp(), offset);
  switch (F) {
    case Field::FullYear: return Val::integer(c.year);
    case Field::Month: return Val::integer(c.month - 1);
    case Field::Date: return Val::integer(c.day);
    case Field::DayOfMonth: return Val::integer(c.day - 1);
    case Field::DayOfWeek: return Val::integer(c.day_of_week);
    case Field::DayOfYear: return Val::integer(c.day_of_year);
    case Field::Hours: return Val::integer(c.hour);
    case Field::Minutes: return Val::integer(c.minute);
    case Field::Seconds: return Val::integer(c.second);
    case Field::Millis: return Val::integer(x.nanos() / 1000000);
  }
  return no_such_overload(name, a, n);
}

}  // namespace

void register_time_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"timestamp",
                 fn_timestamp,
                 {"(string)->timestamp", "(int)->timestamp", "(timestamp)->timestamp"},
                 {}});
  out.push_back({"duration", fn_duration, {"(string)->duration", "(duration)->duration"}, {}});
  const std::vector<std::string_view> ts = {".(timestamp)->int", ".(timestamp, string)->int"};
  const std::vector<std::string_view> both = {".(timestamp)->int", ".(timestamp, string)->int",
                                              ".(duration)->int"};
  out.push_back({"getFullYear", accessor<Field::FullYear>, ts, {}});
  out.push_back({"getMonth", accessor<Field::Month>, ts, {}});
  out.push_back({"getDate", accessor<Field::Date>, ts, {}});
  out.push_back({"getDayOfMonth", accessor<Field::DayOfMonth>, ts, {}});
  out.push_back({"getDayOfWeek", accessor<Field::DayOfWeek>, ts, {}});
  out.push_back({"getDayOfYear", accessor<Field::DayOfYear>, ts, {}});
  out.push_back({"getHours", accessor<Field::Hours>, both, {}});
  out.push_back({"getMinutes", accessor<Field::Minutes>, both, {}});
  out.push_back({"getSeconds", accessor<Field::Seconds>, both, {}});
  out.push_back({"getMilliseconds", accessor<Field::Millis>, both, {}});
}

}  // namespace gpufleet::cel
