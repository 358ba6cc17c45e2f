#include "support/self_signed.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>

namespace gpufleet::testing {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("self-signed certificate: ") + what + " failed");
}

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  check(ext != nullptr, value);
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  check(ok == 1, "X509_add_ext");
}

std::string pem_of(const std::function<int(BIO*)>& write) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  check(bio != nullptr && write(bio.get()) == 1, "PEM write");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

ServingCert make_self_signed_cert(const std::string& common_name) {
  KeyPtr key(EVP_EC_gen("P-256"));  // quick to make, even under sanitizers
  check(key != nullptr, "EVP_EC_gen");
  CertPtr cert(X509_new());
  check(cert != nullptr, "X509_new");
  check(X509_set_version(cert.get(), 2) == 1, "X509_set_version");
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 7L * 24 * 3600);
  check(X509_set_pubkey(cert.get(), key.get()) == 1, "X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  check(X509_set_issuer_name(cert.get(), name) == 1, "X509_set_issuer_name");
  add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_extension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_extension(cert.get(), NID_ext_key_usage, "serverAuth");
  add_extension(cert.get(), NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "X509_sign");
  ServingCert out;
  out.cert_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  out.key_pem = pem_of([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  return out;
}

void write_cert_dir(const ServingCert& cert, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(std::filesystem::path(dir) / "tls.crt", std::ios::trunc) << cert.cert_pem;
  std::ofstream(std::filesystem::path(dir) / "tls.key", std::ios::trunc) << cert.key_pem;
}

}  // namespace gpufleet::testing
