// Verifies OpenSSH signatures (`ssh-keygen -Y sign`, the SSHSIG format of OpenSSH's
// PROTOCOL.sshsig) made with Ed25519 keys, offline and without ssh-keygen: a bundle's
// checksums.txt.sig against a public key a team already holds.
#pragma once

#include <string>
#include <string_view>

namespace gpufleet::recipe {

// The namespace gpufleet signs bundles under (`ssh-keygen -Y sign -n gpufleet-bundle`), so
// that a signature made for something else (a Git commit, a file) is not accepted.
inline constexpr std::string_view kBundleSignatureNamespace = "gpufleet-bundle";

struct SshPublicKey {
  std::string type;     // "ssh-ed25519"
  std::string key;      // 32 raw bytes
  std::string comment;  // the text after the key, if any
};

// One line "ssh-ed25519 AAAA... comment" (an id_ed25519.pub file, or an allowed_signers-style
// line whose first field is a principal). Throws InvalidInput naming `source` when it is not
// an Ed25519 public key.
SshPublicKey parse_ssh_public_key(std::string_view text, std::string_view source);

// Empty when `signature` (the armored text of a .sig file) is a valid SSHSIG signature of
// `message` under `ns` by `key`; otherwise why not ("signed by a different key: ...",
// "the signature does not match the file", "namespace ...").
std::string sshsig_verify(std::string_view message, std::string_view signature,
                          const SshPublicKey& key, std::string_view ns);

// SHA256:<base64> fingerprint as ssh-keygen -l prints it.
std::string ssh_fingerprint(const SshPublicKey& key);

}  // namespace gpufleet::recipe
