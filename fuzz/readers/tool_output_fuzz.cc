// libFuzzer target: parsers of tool output and small value grammars: /dev/kmsg lines,
// all_reduce_perf arguments, Kubernetes quantities, Go durations, semantic versions and
// version constraints. The first byte picks the parser.
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/quantity.h"
#include "core/semver.h"
#include "fuzz_util.h"
#include "sim/kmsg_log.h"
#include "sim/nccl_output.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  if (size == 0) return 0;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0: {
      sim::KmsgRecord r;
      (void)sim::parse_kmsg_line(text, r);
      break;
    }
    case 1: {
      std::vector<std::string> args;
      std::size_t start = 0;
      while (start <= text.size()) {
        std::size_t sp = text.find(' ', start);
        if (sp == std::string_view::npos) sp = text.size();
        args.emplace_back(text.substr(start, sp - start));
        start = sp + 1;
      }
      fuzz::refuse_or_accept([&] { sim::parse_nccl_test_args(args); });
      break;
    }
    case 2: fuzz::refuse_or_accept([&] { (void)core::Quantity::parse(text); }); break;
    case 3: fuzz::refuse_or_accept([&] { (void)core::parse_duration(text); }); break;
    case 4: fuzz::refuse_or_accept([&] { (void)core::SemVer::parse(text, true); }); break;
    default: fuzz::refuse_or_accept([&] { (void)core::VersionConstraint::parse(text); }); break;
  }
  return 0;
}
