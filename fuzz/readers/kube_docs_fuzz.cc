// libFuzzer target: the kube module's readers of outside input: kubeconfig text and watch
// event lines. The first byte picks the reader.
#include "fuzz_util.h"
#include "kube/config.h"
#include "kube/watch_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  if (size == 0) return 0;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    // Relative certificate paths resolve against a directory that does not exist, so the
    // fuzzer cannot make the reader open arbitrary files of this machine.
    fuzz::refuse_or_accept(
        [&] { kube::load_kubeconfig_text(text, "fuzz-kubeconfig", "/nonexistent-fuzz-dir", ""); });
  } else {
    kube::RequestInfo req{"watch", "pods", "default", ""};
    fuzz::refuse_or_accept([&] { kube::decode_watch_event(text, nullptr, req); });
  }
  return 0;
}
