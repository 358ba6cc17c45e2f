// A self-signed serving certificate for tests of HTTPS endpoints (the admission webhook): an
// EC P-256 key and an X.509 certificate for 127.0.0.1 and localhost, made with OpenSSL in memory.
// The certificate is its own CA (caBundle = cert_pem).
#pragma once

#include <string>

namespace gpufleet::testing {

struct ServingCert {
  std::string cert_pem;
  std::string key_pem;
};

// Throws std::runtime_error when OpenSSL fails.
ServingCert make_self_signed_cert(const std::string& common_name = "gpufleet-test");

// Writes cert_pem and key_pem as dir/tls.crt and dir/tls.key (the kubernetes.io/tls layout).
void write_cert_dir(const ServingCert& cert, const std::string& dir);

}  // namespace gpufleet::testing
