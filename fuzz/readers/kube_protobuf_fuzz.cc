// libFuzzer target: the Kubernetes protobuf readers (kube/api/compact_protobuf.h), which take
// bytes straight from the API server. The first byte picks the reader: 0 a whole body (magic +
// Unknown) decoded as its kind, 1 a streamed list body, 2 a watch stream of Pod frames. Bad
// input must end in core::InvalidInput (ParseError, UnsupportedProtobuf), never a crash.
#include "fuzz_util.h"
#include "kube/api/compact_protobuf.h"
#include "kube/api/trim.h"

namespace {

using namespace gpufleet;

const core::JsonPrune& prune() {
  static const core::JsonPrune p = [] {
    core::JsonPrune t;
    t.add("metadata.managedFields.fieldsV1.f:spec");
    t.add("status.images");
    return t;
  }();
  return p;
}

const core::JsonPrune& keep() {
  static const core::JsonPrune k = kube::projection_tree(kube::node_health_fields());
  return k;
}

void decode_both_ways(std::string_view message, const kube::ProtobufKind& kind,
                      const kube::ProtobufEnvelope* type_meta, kube::StringInterner& interner) {
  fuzz::refuse_or_accept([&] {
    kube::decode_compact_protobuf(message, kind, {&prune(), nullptr}, type_meta, "fuzz", interner);
  });
  fuzz::refuse_or_accept([&] {
    kube::decode_compact_protobuf(message, kind, {nullptr, &keep()}, type_meta, "fuzz", interner);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  kube::StringInterner interner(4096, 1 << 20);
  static const kube::ProtobufKind node = *kube::ProtobufKind::find("Node");
  static const kube::ProtobufKind pod = *kube::ProtobufKind::find("Pod");
  switch (data[0] % 3) {
    case 0:
      fuzz::refuse_or_accept([&] {
        kube::ProtobufEnvelope env = kube::unwrap_protobuf(bytes, "fuzz");
        decode_both_ways(env.raw, env.kind == "Pod" ? pod : node, &env, interner);
      });
      (void)kube::protobuf_status_json(bytes);
      break;
    case 1:
      fuzz::refuse_or_accept([&] {
        kube::ProtobufListSplitter split(
            [&](std::string_view item) { decode_both_ways(item, node, nullptr, interner); });
        split.feed(bytes.substr(0, bytes.size() / 2));
        split.feed(bytes.substr(bytes.size() / 2));
        split.finish();
      });
      break;
    default:
      fuzz::refuse_or_accept([&] {
        kube::ProtobufFrameSplitter frames;
        frames.feed(bytes);
        while (auto frame = frames.next_frame()) {
          std::string type;
          std::string status;
          fuzz::refuse_or_accept([&] {
            kube::decode_compact_protobuf_watch_event(*frame, pod, {&prune(), nullptr}, type,
                                                      status, interner);
          });
        }
      });
      break;
  }
  return 0;
}
