// Static cost estimation: a worst-case bound, in the evaluator's cost units (docs/cel.md, "Cost
// model"), of what one evaluation of a compiled expression can spend, given declared size
// bounds of its variables. Subsystems refuse a rule whose bound exceeds the runtime limit at
// admission, instead of finding out on the first event that it never finishes.
//
//   cel::Sizes sizes;
//   sizes.variable("history", cel::Shape::list(32, cel::Shape::object({{"check",
//                  cel::Shape::string(252)}})));
//   cel::CostEstimate c = cel::estimate_cost(program, sizes);
//   if (c.max > limit) ...  // c.costliest says which comprehension to bound
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufleet::core {
class Value;
}

namespace gpufleet::cel {

class Program;

// Size bounds of a value: lists and maps (entries), strings and bytes (bytes, not code points:
// a schema's maxLength of N characters is at most 4N bytes of UTF-8).
struct Shape;
using ShapePtr = std::shared_ptr<const Shape>;

struct Shape {
  // The undeclared size: the API server's largest request (3 MiB) counted as one entry or
  // byte each, as Kubernetes assumes for a field without maxItems/maxLength.
  static constexpr std::uint64_t kUnbounded = 3ull << 20;

  std::uint64_t max_size = kUnbounded;
  ShapePtr elem;  // list elements, or the values of a map (keys: key); null = undeclared
  ShapePtr key;   // map keys; null = undeclared
  std::map<std::string, ShapePtr, std::less<>> fields;  // named fields of an object
  bool is_list = false;        // iterating visits `elem`s (else a map's keys)
  bool rest_declared = false;  // entries other than `fields` have shape `elem` (null: none)

  static ShapePtr unbounded();
  static ShapePtr scalar();  // a number, bool, timestamp...: size 0
  static ShapePtr string(std::uint64_t max_bytes);
  static ShapePtr list(std::uint64_t max_items, ShapePtr elem = nullptr);
  static ShapePtr map(std::uint64_t max_entries, ShapePtr key = nullptr, ShapePtr value = nullptr);
  // An object with these fields and no others.
  static ShapePtr object(std::vector<std::pair<std::string, ShapePtr>> fields);
  // An object with these fields and others (at most max_entries in all) of shape `rest`
  // (null: undeclared).
  static ShapePtr object(std::vector<std::pair<std::string, ShapePtr>> fields, ShapePtr rest,
                         std::uint64_t max_entries = kUnbounded);
  // The exact bounds of one value (its sizes, recursively): an estimate over these bounds
  // must cover any evaluation over that value (the tests' and the fuzzer's oracle).
  static ShapePtr of(const core::Value& v);
};

// Declared shapes of an environment's variables; an undeclared variable is unbounded.
class Sizes {
 public:
  Sizes& variable(std::string name, ShapePtr shape);
  [[nodiscard]] ShapePtr find(std::string_view name) const;

 private:
  std::map<std::string, ShapePtr, std::less<>> vars_;
};

struct CostEstimate {
  std::uint64_t min = 0;  // the cheapest evaluation (short-circuits, empty ranges)
  std::uint64_t max = 0;  // the worst case under the declared sizes (saturates at UINT64_MAX)
  // The comprehension (or size-proportional call) that costs the most in the worst case, to
  // name in messages; empty when the expression has none.
  struct Hotspot {
    std::string text;      // its source text, shortened to 80 characters
    std::size_t line = 0;  // 1-based position in the source
    std::size_t column = 0;
    std::uint64_t cost = 0;   // its worst case
    std::uint64_t range = 0;  // the size it is proportional to (iterations, bytes)
    std::string unit;         // "iterations", "list elements", "bytes or elements"
    bool undeclared = false;  // that size is Shape::kUnbounded (no declared bound)
  } costliest;
  // "the costliest part is `history.all(h, ...)` at 1:5: up to 32 iterations, 4,500 units"
  [[nodiscard]] std::string describe_costliest() const;
};

// Walks the compiled tree bottom-up. A bound of the runtime cost: for any input within the
// declared sizes, evaluate() spends at most `max` units (tests/cel/cost_test.cc checks it).
CostEstimate estimate_cost(const Program& program, const Sizes& sizes);

}  // namespace gpufleet::cel
