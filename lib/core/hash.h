// Stable content hashes (SHA-256, hex) for fingerprints and cache keys.
#ifndef KSEARCH_CORE_HASH_H_
#define KSEARCH_CORE_HASH_H_

#include <initializer_list>
#include <string>
#include <string_view>

namespace ksearch::internal {

// Hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// Hashes several fields unambiguously (each is length-prefixed), so that
// ("ab", "c") and ("a", "bc") differ.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  Hasher& Add(std::string_view field);
  Hasher& Add(long long value);
  Hasher& Add(double value);
  std::string HexDigest();  // finishes; the hasher must not be used after

 private:
  void* ctx_;  // EVP_MD_CTX*, kept out of this header
};

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_HASH_H_
