// List helpers as Kubernetes' CEL list library provides them: isSorted, sum, min, max,
// indexOf, lastIndexOf; plus flatten, slice, distinct and sort from cel-go's lists extension.
#include <algorithm>

#include "cel/eval_context.h"
#include "cel/functions.h"

namespace gpufleet::cel {

Val list_index_of(const Val* a, bool last) {
  const Val& list = a[0];
  std::size_t n = list.size();
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t i = last ? n - 1 - k : k;
    if (equals(list.list_at(i), a[1])) return Val::integer(static_cast<std::int64_t>(i));
  }
  return Val::integer(-1);
}

namespace {

using K = ValKind;

bool is_list(const Val* a, std::size_t n, std::size_t want) {
  return n == want && a[0].kind() == K::List;
}

// Compares two elements; an error value when they have no ordering.
bool ordered(const Val& x, const Val& y, int* c, Val* err) {
  *c = compare(x, y);
  if (*c == 3) {
    Val args[2] = {x, y};
    *err = no_such_overload("_<_", args, 2);
    return false;
  }
  return true;
}

Val fn_is_sorted(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!is_list(a, n, 1)) return no_such_overload("isSorted", a, n);
  ctx.charge(a[0].size());
  for (std::size_t i = 1; i < a[0].size(); ++i) {
    int c;
    Val err;
    if (!ordered(a[0].list_at(i - 1), a[0].list_at(i), &c, &err)) return err;
    if (c == 1) return Val::boolean(false);
  }
  return Val::boolean(true);
}

Val fn_sum(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!is_list(a, n, 1)) return no_such_overload("sum", a, n);
  ctx.charge(a[0].size());
  if (a[0].size() == 0) return Val::integer(0);
  Val total = a[0].list_at(0);
  for (std::size_t i = 1; i < a[0].size(); ++i) {
    Val item = a[0].list_at(i);
    if (item.kind() != total.kind()) return Val::error("sum() needs elements of one numeric type");
    switch (total.kind()) {
      case K::Int: {
        std::int64_t r;
        if (__builtin_add_overflow(total.as_int(), item.as_int(), &r))
          return Val::error("integer overflow in sum()");
        total = Val::integer(r);
        break;
      }
      case K::Uint: {
        std::uint64_t r;
        if (__builtin_add_overflow(total.as_uint(), item.as_uint(), &r))
          return Val::error("integer overflow in sum()");
        total = Val::uinteger(r);
        break;
      }
      case K::Double: total = Val::dbl(total.as_double() + item.as_double()); break;
      case K::Duration: {
        std::int64_t s = total.seconds() + item.seconds();
        std::int64_t ns = std::int64_t{total.nanos()} + item.nanos();
        s += ns / 1000000000;
        ns %= 1000000000;
        total = Val::duration(s, static_cast<std::int32_t>(ns));
        break;
      }
      default:
        return Val::error("sum() needs numbers or durations, found " +
                          std::string(item.type_name()));
    }
  }
  return total;
}

Val extreme(EvalContext& ctx, const Val* a, std::size_t n, bool want_max) {
  const char* name = want_max ? "max" : "min";
  if (!is_list(a, n, 1)) return no_such_overload(name, a, n);
  if (a[0].size() == 0) return Val::error(std::string(name) + "() of an empty list");
  ctx.charge(a[0].size());
  Val best = a[0].list_at(0);
  for (std::size_t i = 1; i < a[0].size(); ++i) {
    Val item = a[0].list_at(i);
    int c;
    Val err;
    if (!ordered(item, best, &c, &err)) return err;
    if ((want_max && c == 1) || (!want_max && c == -1)) best = item;
  }
  return best;
}
Val fn_min(EvalContext& ctx, const Val* a, std::size_t n) { return extreme(ctx, a, n, false); }
Val fn_max(EvalContext& ctx, const Val* a, std::size_t n) { return extreme(ctx, a, n, true); }

Val fn_flatten(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!is_list(a, n, 1)) return no_such_overload("flatten", a, n);
  std::vector<Val> out;
  for (std::size_t i = 0; i < a[0].size(); ++i) {
    Val item = a[0].list_at(i);
    if (item.kind() == K::List) {
      for (std::size_t j = 0; j < item.size(); ++j) out.push_back(item.list_at(j));
    } else {
      out.push_back(item);
    }
  }
  ctx.charge(out.size());
  return Val::list(std::move(out));
}

Val fn_slice(EvalContext& ctx, const Val* a, std::size_t n) {
  if (n != 3 || a[0].kind() != K::List || a[1].kind() != K::Int || a[2].kind() != K::Int) {
    return no_such_overload("slice", a, n);
  }
  std::int64_t from = a[1].as_int(), to = a[2].as_int();
  auto size = static_cast<std::int64_t>(a[0].size());
  if (from < 0 || to > size || from > to) {
    return Val::error("slice(" + std::to_string(from) + ", " + std::to_string(to) +
                      ") out of range for a list of size " + std::to_string(size));
  }
  std::vector<Val> out;
  for (std::int64_t i = from; i < to; ++i) out.push_back(a[0].list_at(static_cast<std::size_t>(i)));
  ctx.charge(out.size());
  return Val::list(std::move(out));
}

Val fn_distinct(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!is_list(a, n, 1)) return no_such_overload("distinct", a, n);
  std::vector<Val> out;
  ctx.charge(a[0].size() * a[0].size() / 16);
  for (std::size_t i = 0; i < a[0].size(); ++i) {
    Val item = a[0].list_at(i);
    bool seen = false;
    for (const Val& o : out) seen = seen || equals(o, item);
    if (!seen) out.push_back(item);
  }
  return Val::list(std::move(out));
}

Val fn_sort(EvalContext& ctx, const Val* a, std::size_t n) {
  if (!is_list(a, n, 1)) return no_such_overload("sort", a, n);
  std::vector<Val> out;
  for (std::size_t i = 0; i < a[0].size(); ++i) out.push_back(a[0].list_at(i));
  for (std::size_t i = 1; i < out.size(); ++i) {
    int c = compare(out[0], out[i]);
    if (c == 3) {
      Val args[2] = {out[0], out[i]};
      return no_such_overload("sort", args, 2);
    }
  }
  ctx.charge(out.size() * 4);
  std::stable_sort(out.begin(), out.end(),
                   [](const Val& x, const Val& y) { return compare(x, y) == -1; });
  return Val::list(std::move(out));
}

}  // namespace

void register_list_functions(std::vector<FunctionDecl>& out) {
  out.push_back({"isSorted", fn_is_sorted, {".(list(A))->bool"}, {}});
  out.push_back({"sum", fn_sum, {".(list(A))->A"}, {}});
  out.push_back({"min", fn_min, {".(list(A))->A"}, {}});
  out.push_back({"max", fn_max, {".(list(A))->A"}, {}});
  out.push_back({"flatten", fn_flatten, {".(list(dyn))->list(dyn)"}, {}});
  out.push_back({"slice", fn_slice, {".(list(A), int, int)->list(A)"}, {}});
  out.push_back({"distinct", fn_distinct, {".(list(A))->list(A)"}, {}});
  out.push_back({"sort", fn_sort, {".(list(A))->list(A)"}, {}});
}

}  // namespace gpufleet::cel
