#include "core/hash.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstring>

namespace ksearch::internal {
namespace {

std::string ToHex(const unsigned char* bytes, unsigned length) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(length * 2, '0');
  for (unsigned i = 0; i < length; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) { return Hasher().Add(data).HexDigest(); }

Hasher::Hasher() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Hasher::~Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Hasher& Hasher::Add(std::string_view field) {
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  unsigned long long length = field.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));
  EVP_DigestUpdate(ctx, prefix, sizeof(prefix));
  EVP_DigestUpdate(ctx, field.data(), field.size());
  return *this;
}

Hasher& Hasher::Add(long long value) { return Add(std::to_string(value)); }

Hasher& Hasher::Add(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return Add(std::string_view(text));
}

std::string Hasher::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &length);
  return ToHex(digest, length);
}

}  // namespace ksearch::internal
