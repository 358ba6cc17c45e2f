// matches(): RE2 regular expressions (linear time, no backtracking blow-ups).
#include <re2/re2.h>

#include <memory>

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

}  // namespace

void register_regex_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"matches", fn_matches, {"*(string, string)->bool"}, {}});
}

}  // namespace gpufleet::cel
