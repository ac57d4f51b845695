// A certificate and its key in PEM, and a self-signed one made on the spot,
// for the mock server's HTTPS (MockLlmServer::Options::tls).
#ifndef KSEARCH_TLS_CREDENTIALS_H_
#define KSEARCH_TLS_CREDENTIALS_H_

#include <string>
#include <vector>

#include "ksearch/status.h"

namespace ksearch {

struct TlsCredentials {
  std::string certificate_pem;
  std::string private_key_pem;
};

// A fresh self-signed certificate (EC P-256 key) valid for `hosts` (DNS names
// or IP addresses, as subjectAltName entries; the first is also the CN), from
// an hour ago for `valid_days`. For tests and local mock servers only.
// Errors: kInvalidArgument (no hosts), kInternal (OpenSSL failed).
[[nodiscard]] StatusOr<TlsCredentials> GenerateSelfSignedCertificate(
    const std::vector<std::string>& hosts, int valid_days = 2);

}  // namespace ksearch

#endif  // KSEARCH_TLS_CREDENTIALS_H_
