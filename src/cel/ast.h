// The parsed expression tree. The compiler annotates nodes in place (resolved variables,
// functions, folded constants) and the evaluator walks the annotated tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cel/value.h"

namespace gpufleet::cel {

struct EvalContext;
// Builtin function implementation: arguments are already evaluated and error-free.
using FnImpl = Val (*)(EvalContext& ctx, const Val* args, std::size_t n);

enum class ExprKind : std::uint8_t {
  Const,
  Ident,
  Select,         // target.name, or has(target.name) when test_only
  Call,           // name(args) or target.name(args)
  List,           // [args...]
  Map,            // {args[0]: args[1], ...}
  Struct,         // Name{field: value}: message construction (not supported at evaluation)
  Comprehension,  // a macro: all, exists, exists_one, map, filter
};

enum class MacroKind : std::uint8_t { All, Exists, ExistsOne, Map, MapFilter, Filter };

// What the evaluator does with a node, decided by the compiler.
enum class Op : std::uint8_t {
  Unresolved,
  Const,
  Var,   // activation variable by candidate names, then field selections
  Slot,  // comprehension variable
  Select,
  Has,
  Index,
  And,
  Or,
  Not,
  Cond,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  In,
  Call,  // builtin through `fn`
  List,
  Map,
  Comprehension,
  Fail,  // evaluates to the error in `value` (e.g. unknown function with checks off)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One way a (possibly qualified) variable reference may resolve at run time.
struct VarCandidate {
  std::string name;                 // activation variable name ("a.b")
  std::vector<std::string> fields;  // selections applied to it afterwards ("c")
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  std::size_t offset = 0;    // byte offset in the source, for error positions
  std::uint32_t height = 1;  // longest path to a leaf, bounded by the parser
  Val value;                 // Const
  std::string name;          // Ident name, Select field, Call function, Struct type name
  ExprPtr target;            // Select operand, receiver of a Call
  std::vector<ExprPtr> args;
  std::vector<std::string> field_names;  // Struct field names (parallel to args)
  bool test_only = false;                // has()
  bool leading_dot = false;              // `.name`: resolve from the root namespace
  MacroKind macro = MacroKind::All;      // Comprehension: args = {range, step[, transform]}
  std::string iter_var;

  // Annotations from the compiler.
  Op op = Op::Unresolved;
  int slot = -1;  // Slot, or the iteration slot of a Comprehension
  FnImpl fn = nullptr;
  std::vector<VarCandidate> candidates;
  std::shared_ptr<const void> aux;  // per-call precomputed data (a compiled regex)
};

}  // namespace gpufleet::cel
