#include "recipe/sshsig.h"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/base64.h"
#include "core/errors.h"

namespace gpufleet::recipe {

namespace {

// SSH wire format reader: uint32 big-endian lengths before strings (RFC 4251).
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::optional<std::uint32_t> u32() {
    if (data_.size() < 4) return std::nullopt;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(data_[i]);
    data_.remove_prefix(4);
    return v;
  }
  std::optional<std::string> str() {
    auto n = u32();
    if (!n || data_.size() < *n) return std::nullopt;
    std::string s(data_.substr(0, *n));
    data_.remove_prefix(*n);
    return s;
  }
  std::optional<std::string> raw(std::size_t n) {
    if (data_.size() < n) return std::nullopt;
    std::string s(data_.substr(0, n));
    data_.remove_prefix(n);
    return s;
  }
  bool empty() const { return data_.empty(); }

 private:
  std::string_view data_;
};

void put_string(std::string& out, std::string_view s) {
  auto n = static_cast<std::uint32_t>(s.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
  out += s;
}

std::optional<std::string> digest(std::string_view alg, std::string_view message) {
  const EVP_MD* md = alg == "sha512" ? EVP_sha512() : alg == "sha256" ? EVP_sha256() : nullptr;
  if (md == nullptr) return std::nullopt;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_Digest(message.data(), message.size(), out, &len, md, nullptr) != 1) return std::nullopt;
  return std::string(reinterpret_cast<char*>(out), len);
}

bool ed25519_verify(const std::string& key, std::string_view data, const std::string& sig) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                  reinterpret_cast<const unsigned char*>(key.data()), key.size()),
      EVP_PKEY_free);
  if (!pkey) return false;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
}

std::string key_blob(const SshPublicKey& k) {
  std::string blob;
  put_string(blob, k.type);
  put_string(blob, k.key);
  return blob;
}

}  // namespace

SshPublicKey parse_ssh_public_key(std::string_view text, std::string_view source) {
  // Fields separated by blanks; the key type may follow a principal (allowed_signers).
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
      ++i;
    std::size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n' &&
           text[i] != '\r')
      ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  for (std::size_t f = 0; f + 1 < fields.size(); ++f) {
    if (fields[f] != "ssh-ed25519") continue;
    auto blob = core::base64_decode(fields[f + 1]);
    if (!blob) break;
    Reader r(*blob);
    auto type = r.str();
    auto key = r.str();
    if (!type || *type != "ssh-ed25519" || !key || key->size() != 32 || !r.empty()) break;
    SshPublicKey out{*type, *key, ""};
    for (std::size_t c = f + 2; c < fields.size(); ++c)
      out.comment += (out.comment.empty() ? "" : " ") + std::string(fields[c]);
    return out;
  }
  throw core::InvalidInput(std::string(source) +
                           ": not an SSH Ed25519 public key; give the .pub file of the signing "
                           "key (a line `ssh-ed25519 AAAA... comment`, as ssh-keygen -t ed25519 "
                           "writes it)");
}

std::string ssh_fingerprint(const SshPublicKey& key) {
  auto d = digest("sha256", key_blob(key));
  std::string b64 = core::base64_encode(*d);
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

std::string sshsig_verify(std::string_view message, std::string_view signature,
                          const SshPublicKey& key, std::string_view ns) {
  constexpr std::string_view begin = "-----BEGIN SSH SIGNATURE-----";
  constexpr std::string_view end = "-----END SSH SIGNATURE-----";
  std::size_t b = signature.find(begin), e = signature.find(end);
  if (b == std::string_view::npos || e == std::string_view::npos || e < b) {
    return "not an SSH signature (no BEGIN/END SSH SIGNATURE armor)";
  }
  std::string b64;
  for (char c : signature.substr(b + begin.size(), e - b - begin.size())) {
    if (c != '\n' && c != '\r' && c != ' ') b64 += c;
  }
  auto blob = core::base64_decode(b64);
  if (!blob) return "the signature's armored body is not base64";
  Reader r(*blob);
  auto magic = r.raw(6);
  auto version = r.u32();
  auto pub = r.str();
  auto sig_ns = r.str();
  auto reserved = r.str();
  auto hash_alg = r.str();
  auto sig = r.str();
  if (!magic || *magic != "SSHSIG" || !version || !pub || !sig_ns || !reserved || !hash_alg ||
      !sig || !r.empty()) {
    return "malformed SSHSIG signature";
  }
  if (*version != 1) return "unsupported SSHSIG version " + std::to_string(*version);
  Reader pr(*pub);
  auto ptype = pr.str();
  auto pkey = pr.str();
  if (!ptype || *ptype != "ssh-ed25519" || !pkey) {
    return "signed with a " + (ptype ? *ptype : std::string("malformed")) +
           " key; gpufleet verifies ssh-ed25519 signatures";
  }
  if (*pkey != key.key) {
    SshPublicKey signer{"ssh-ed25519", *pkey, ""};
    return "signed by a different key (" + ssh_fingerprint(signer) + ", not " +
           ssh_fingerprint(key) + ")";
  }
  if (*sig_ns != ns) {
    return "signed for namespace '" + *sig_ns + "', not '" + std::string(ns) +
           "' (sign with ssh-keygen -Y sign -n " + std::string(ns) + ")";
  }
  auto h = digest(*hash_alg, message);
  if (!h) return "unsupported hash algorithm '" + *hash_alg + "'";
  Reader sr(*sig);
  auto stype = sr.str();
  auto sbytes = sr.str();
  if (!stype || *stype != "ssh-ed25519" || !sbytes) return "malformed Ed25519 signature";
  std::string signed_data = "SSHSIG";
  put_string(signed_data, *sig_ns);
  put_string(signed_data, *reserved);
  put_string(signed_data, *hash_alg);
  put_string(signed_data, *h);
  if (!ed25519_verify(key.key, signed_data, *sbytes)) {
    return "the signature does not match the file (it was changed after signing)";
  }
  return "";
}

}  // namespace gpufleet::recipe
