// The builtin function table: implementations and the overload signatures the checker uses.
#pragma once

#include <string_view>
#include <vector>

#include "cel/ast.h"
#include "cel/types.h"

namespace gpufleet::cel {

struct Overload {
  bool receiver = false;  // called as target.name(args); params[0] is the target
  std::vector<Type> params;
  Type result;
};

struct FunctionDecl {
  std::string_view name;  // "size", "_+_", "strings.quote"
  FnImpl impl = nullptr;
  // Signatures: "(int, int)->int" for global calls, ".(string, string)->bool" for receiver
  // calls (the first type is the receiver), "*(string)->int" for both styles.
  std::vector<std::string_view> signatures;
  std::vector<Overload> overloads;  // parsed from `signatures` when the table is built
};

// nullptr when no builtin has this name.
const FunctionDecl* find_function(std::string_view name);

// Each stdlib source file contributes its functions.
void register_core_functions(std::vector<FunctionDecl>& out);
void register_time_functions(std::vector<FunctionDecl>& out);
void register_string_functions(std::vector<FunctionDecl>& out);
void register_list_functions(std::vector<FunctionDecl>& out);
void register_regex_functions(std::vector<FunctionDecl>& out);
void register_kubernetes_functions(std::vector<FunctionDecl>& out);

}  // namespace gpufleet::cel
