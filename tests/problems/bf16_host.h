// bf16 on the host for the problems' GPU tests: conversion both ways and the
// comparison their CPU cross-checks make (one bf16 step of slack).
#ifndef KSEARCH_TESTS_PROBLEMS_BF16_HOST_H_
#define KSEARCH_TESTS_PROBLEMS_BF16_HOST_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ksearch::testing {

inline float FromBf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t ToBf16(float f) {  // round to nearest even (finite values)
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Elements more than one bf16 step (of the larger magnitude) apart; the
// first is described in `first`.
inline int64_t Bf16Mismatches(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                              std::string* first) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = FromBf16(got[i]), w = FromBf16(want[i]);
    const float step = std::ldexp(1.0f, std::ilogb(std::max(std::fabs(w), 1e-30f)) - 7);
    if (!(std::fabs(g - w) <= step)) {
      if (bad++ == 0)
        *first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                 std::to_string(w);
    }
  }
  return bad;
}

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_PROBLEMS_BF16_HOST_H_
