// Self-signed certificates for local TLS servers (tests, the mock server).
#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ksearch/tls_credentials.h"
#include "llm/http_util.h"

namespace ksearch {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

Status OpenSslError(std::string_view call) {
  unsigned long code = ERR_get_error();
  char text[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  return InternalError(std::string(call) + ": " + text);
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long length = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(length));
}

Status AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, cert, cert, nullptr, nullptr, 0);
  Owned<X509_EXTENSION> extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
  if (!extension) return OpenSslError("X509V3_EXT_conf_nid(" + value + ")");
  if (X509_add_ext(cert, extension.get(), -1) != 1) return OpenSslError("X509_add_ext");
  return Status();
}

}  // namespace

StatusOr<TlsCredentials> GenerateSelfSignedCertificate(const std::vector<std::string>& hosts,
                                                       int valid_days) {
  if (hosts.empty()) return InvalidArgumentError("GenerateSelfSignedCertificate: no hosts");
  Owned<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("EVP_EC_gen(P-256)");
  Owned<X509> cert(X509_new());
  if (!cert) return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return OpenSslError("RAND_bytes");
  serial[0] &= 0x7f;  // a positive serial number
  BIGNUM* number = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(number, X509_get_serialNumber(cert.get()));
  BN_free(number);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(valid_days) * 86400);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("ksearch test"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(hosts.front().c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return OpenSslError("X509_set_pubkey");

  std::string alt_names;
  for (const std::string& host : hosts) {
    if (!alt_names.empty()) alt_names += ",";
    alt_names += (llm::IsIpLiteral(host) ? "IP:" : "DNS:") + host;
  }
  // CA:TRUE lets the certificate be its own trust anchor in a client's store.
  KSEARCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  KSEARCH_RETURN_IF_ERROR(
      AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign"));
  KSEARCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_ext_key_usage, "serverAuth"));
  KSEARCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_key_identifier, "hash"));
  KSEARCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_alt_name, alt_names));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return OpenSslError("X509_sign");

  Owned<BIO> cert_bio(BIO_new(BIO_s_mem()));
  Owned<BIO> key_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || !key_bio) return OpenSslError("BIO_new");
  if (PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1) {
    return OpenSslError("PEM_write_bio_X509");
  }
  if (PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr,
                               nullptr) != 1) {
    return OpenSslError("PEM_write_bio_PrivateKey");
  }
  return TlsCredentials{BioText(cert_bio.get()), BioText(key_bio.get())};
}

}  // namespace ksearch
