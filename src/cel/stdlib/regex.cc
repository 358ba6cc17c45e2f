// matches(): RE2 regular expressions (linear time, no backtracking blow-ups).
#include <re2/re2.h>

#include <memory>
#include <vector>

#include "cel/eval_context.h"
#include "cel/functions.h"

namespace gpufleet::cel {

std::shared_ptr<const void> precompile_regex(std::string_view pattern, std::string* error) {
  RE2::Options opts;
  opts.set_log_errors(false);
  auto re = std::make_shared<RE2>(re2::StringPiece(pattern.data(), pattern.size()), opts);
  if (!re->ok()) {
    *error = re->error();
    return nullptr;
  }
  return re;
}

namespace {

Val fn_matches(EvalContext& ctx, const Val* a, std::size_t n) {
  if (n != 2 || a[0].kind() != ValKind::String || a[1].kind() != ValKind::String) {
    return no_such_overload("matches", a, n);
  }
  ctx.charge(a[0].size() / 8);
  std::string_view text = a[0].text();
  if (ctx.aux != nullptr) {
    return Val::boolean(RE2::PartialMatch(re2::StringPiece(text.data(), text.size()),
                                          *static_cast<const RE2*>(ctx.aux)));
  }
  std::string error;
  auto re = precompile_regex(a[1].text(), &error);
  if (!re)
    return Val::error("invalid regular expression '" + std::string(a[1].text()) + "': " + error);
  return Val::boolean(RE2::PartialMatch(re2::StringPiece(text.data(), text.size()),
                                        *static_cast<const RE2*>(re.get())));
}

// The compiled pattern of this call: precompiled when constant, else compiled now.
std::shared_ptr<const void> pattern_of(EvalContext& ctx, const Val& pattern, Val* error) {
  if (ctx.aux != nullptr) return std::shared_ptr<const void>(std::shared_ptr<void>(), ctx.aux);
  std::string why;
  auto re = precompile_regex(pattern.text(), &why);
  if (!re)
    *error = Val::error("invalid regular expression '" + std::string(pattern.text()) + "': " + why);
  return re;
}

// Kubernetes regex library: s.find(re) is the first match ('' when none), s.findAll(re[, n])
// the matches (at most n when n >= 0).
Val fn_find(EvalContext& ctx, const Val* a, std::size_t n) {
  if (n != 2 || a[0].kind() != ValKind::String || a[1].kind() != ValKind::String) {
    return no_such_overload("find", a, n);
  }
  ctx.charge(a[0].size() / 8);
  Val error;
  auto re = pattern_of(ctx, a[1], &error);
  if (!re) return error;
  const RE2& r = *static_cast<const RE2*>(re.get());
  re2::StringPiece text(a[0].text().data(), a[0].text().size()), match;
  if (!r.Match(text, 0, text.size(), RE2::UNANCHORED, &match, 1)) return Val::string("");
  return Val::string(std::string(match.data(), match.size()));
}

Val fn_find_all(EvalContext& ctx, const Val* a, std::size_t n) {
  if ((n != 2 && n != 3) || a[0].kind() != ValKind::String || a[1].kind() != ValKind::String ||
      (n == 3 && a[2].kind() != ValKind::Int)) {
    return no_such_overload("findAll", a, n);
  }
  std::int64_t limit = n == 3 ? a[2].as_int() : -1;
  ctx.charge(a[0].size() / 8);
  Val error;
  auto re = pattern_of(ctx, a[1], &error);
  if (!re) return error;
  const RE2& r = *static_cast<const RE2*>(re.get());
  re2::StringPiece text(a[0].text().data(), a[0].text().size()), match;
  std::vector<Val> out;
  std::size_t pos = 0;
  while (pos <= text.size() && (limit < 0 || static_cast<std::int64_t>(out.size()) < limit)) {
    if (!r.Match(text, pos, text.size(), RE2::UNANCHORED, &match, 1)) break;
    out.push_back(Val::string(std::string(match.data(), match.size())));
    std::size_t end = static_cast<std::size_t>(match.data() - text.data()) + match.size();
    pos = match.empty() ? end + 1 : end;  // an empty match must still advance
    ctx.charge(1);
  }
  return Val::list(std::move(out));
}

}  // namespace

void register_regex_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"matches", fn_matches, {"*(string, string)->bool"}, {}});
  out.push_back({"find", fn_find, {".(string, string)->string"}, {}});
  out.push_back({"findAll",
                 fn_find_all,
                 {".(string, string)->list(string)", ".(string, string, int)->list(string)"},
                 {}});
}

}  // namespace gpufleet::cel
