// libFuzzer target: what `gpufleet bundle pull` reads from a registry and the user: OCI
// references, docker config.json credentials and bundle archives (unpacked into a scratch
// folder, then removed). The first byte picks the reader.
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "fuzz_util.h"
#include "recipe/bundle_archive.h"
#include "recipe/oci_client.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpufleet;
  if (size == 0) return 0;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: fuzz::refuse_or_accept([&] { recipe::parse_oci_reference(text, "REF", true); }); break;
    case 1:
      fuzz::refuse_or_accept([&] {
        try {
          recipe::registry_credentials(std::string(text), "fuzz.json", "127.0.0.1:5000");
        } catch (const recipe::CredentialHelperError&) {
          // A well-formed file naming a helper this machine lacks (docker-credential-NAME from
          // PATH): an answer about the environment, not a refusal of the input.
        }
      });
      break;
    default: {
      static const std::string scratch = [] {
        std::string t = std::filesystem::temp_directory_path().string() + "/oci-fuzz-XXXXXX";
        if (::mkdtemp(t.data()) == nullptr) __builtin_trap();
        return t;
      }();
      const std::string out = scratch + "/out";
      // Small limits: the fuzzer explores the checks, not the disk.
      fuzz::refuse_or_accept([&] {
        recipe::unpack_bundle_archive(std::string(text), out, "fuzz", {1000, 1u << 20});
      });
      std::error_code ec;
      std::filesystem::remove_all(out, ec);
      break;
    }
  }
  return 0;
}
