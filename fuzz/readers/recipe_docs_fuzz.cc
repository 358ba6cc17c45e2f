// libFuzzer target: the recipe module's document readers (Recipe, Snapshot) and the Helm
// release record decoder (base64, base64, gzip, JSON). The first byte picks the reader.
#include "fuzz_util.h"
#include "recipe/recipe.h"
#include "recipe/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  if (size == 0) return 0;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: fuzz::refuse_or_accept([&] { recipe::recipe_from_yaml(text, "fuzz.yaml"); }); break;
    case 1: fuzz::refuse_or_accept([&] { recipe::snapshot_from_text(text, "fuzz.yaml"); }); break;
    default: fuzz::refuse_or_accept([&] { recipe::decode_helm_release(text); }); break;
  }
  return 0;
}
