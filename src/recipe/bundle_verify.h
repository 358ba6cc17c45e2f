// `gpufleet verify DIR --key KEY.pub`: a bundle is exactly what was signed. The detached
// signature checksums.txt.sig (SSHSIG, Ed25519) covers checksums.txt, which lists the SHA-256
// of every other file; nothing may be missing, changed or added.
#pragma once

#include <string>

namespace gpufleet::recipe {

inline constexpr std::string_view kSignatureFile = "checksums.txt.sig";

struct VerifyReport {
  bool ok = false;
  std::string first_bad;  // the first file that fails ("checksums.txt.sig", a bundle path)
  std::string reason;     // why
  std::size_t files = 0;  // files whose checksum was checked
  std::string signer;     // fingerprint of the key that signed
};

// Checks, in order: the signature over checksums.txt with `public_key_file`, then every file
// checksums.txt lists (in its order), then that no other file is present. Stops at the first
// failure. Throws InvalidInput for an unreadable key file or a directory that is not a bundle.
VerifyReport verify_bundle(const std::string& dir, const std::string& public_key_file);

}  // namespace gpufleet::recipe
