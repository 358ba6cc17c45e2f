// libFuzzer target: the kube module's readers of outside input: kubeconfig text, watch event
// lines, and JSON decoded straight into the compact cache form. The first byte picks the reader.
#include "core/json.h"
#include "fuzz_util.h"
#include "kube/api/compact_json.h"
#include "kube/api/trim.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "kube/watch_decoder.h"

namespace {

// The compact decoder must accept what parse_json accepts, refuse what it refuses, and give
// exactly what the core::Value path gives (prune, projection, encode): any difference is a
// finding.
void compact_differential(std::string_view text) {
  using namespace gpufleet;
  static const std::vector<std::string> keep{"metadata.name", "metadata.labels", "spec.taints",
                                             "status.conditions.type", "a.b"};
  static const core::JsonPrune keep_tree = kube::projection_tree(keep);
  static const core::JsonPrune prune = [] {
    core::JsonPrune p;
    p.add("status.images");
    p.add("metadata.managedFields");
    return p;
  }();
  kube::StringInterner interner(4096, 1 << 20);
  for (const core::JsonPrune* k : {static_cast<const core::JsonPrune*>(nullptr), &keep_tree}) {
    kube::CompactPtr direct;
    bool direct_ok = true;
    try {
      direct = kube::decode_compact_json(text, {&prune, k}, "fuzz", interner);
    } catch (const core::InvalidInput&) {
      direct_ok = false;
    }
    core::Value v;
    bool value_ok = true;
    try {
      v = core::parse_json(text, "fuzz", &prune);
    } catch (const core::InvalidInput&) {
      value_ok = false;
    }
    // A projection skips what it drops, so it may accept a document whose dropped parts are
    // over a limit; everything else must agree.
    if (direct_ok != value_ok && (k == nullptr || value_ok)) __builtin_trap();
    if (!direct_ok || !value_ok) continue;
    if (k != nullptr) v = kube::Projection(keep).apply(std::move(v));
    kube::CompactPtr encoded = kube::CompactObject::encode(v, interner);
    if (encoded->tape_bytes() != direct->tape_bytes() ||
        !(encoded->to_value() == direct->to_value())) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  if (size == 0) return 0;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      // Relative certificate paths resolve against a directory that does not exist, so the
      // fuzzer cannot make the reader open arbitrary files of this machine.
      fuzz::refuse_or_accept([&] {
        kube::load_kubeconfig_text(text, "fuzz-kubeconfig", "/nonexistent-fuzz-dir", "");
      });
      break;
    case 1: {
      kube::RequestInfo req{"watch", "pods", "default", ""};
      fuzz::refuse_or_accept([&] {
        try {
          kube::decode_watch_event(text, nullptr, req);
        } catch (const kube::ApiError&) {
          // An ERROR event is the server's error (410 Gone, ...): decoding it throws ApiError by
          // design, whatever its object holds.
        }
      });
      break;
    }
    default: fuzz::refuse_or_accept([&] { compact_differential(text); }); break;
  }
  return 0;
}
