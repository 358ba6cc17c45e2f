// libFuzzer target: parse and check arbitrary text as a CEL expression. Any input must
// either compile or raise CompileError with a position; nothing may crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cel/cel.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet::cel;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  static const Env checked = [] {
    Env env;
    env.variable("event").variable("node", "map(string, dyn)").variable("value", "int");
    env.variable("names", "list(string)").container("gpufleet.test");
    return env;
  }();
  static const Env unchecked = Env().disable_check();
  for (const Env* env : {&checked, &unchecked}) {
    try {
      Program p = compile(text, *env);
      (void)p.result_type();
    } catch (const CompileError& e) {
      if (e.line() == 0 || e.column() == 0) __builtin_trap();  // errors must carry a position
    }
  }
  return 0;
}
