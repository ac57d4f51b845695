// In-memory stand-ins for host headers that language models habitually
// include in device code (<cstdint>, <cmath>, …). NVRTC has no host C++
// library; rather than failing a candidate over an include line, the compiler
// supplies these.
#ifndef KSEARCH_CUDA_STANDIN_HEADERS_H_
#define KSEARCH_CUDA_STANDIN_HEADERS_H_

namespace ksearch::internal {

struct StandinHeader {
  const char* name;
  const char* text;
};

inline constexpr char kStdintText[] = R"(#pragma once
typedef signed char int8_t; typedef unsigned char uint8_t;
typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t;
typedef long long intptr_t; typedef unsigned long long uintptr_t;
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT32_MIN (-2147483647 - 1)
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-9223372036854775807LL - 1)
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
namespace std {
using ::int8_t; using ::uint8_t; using ::int16_t; using ::uint16_t; using ::int32_t;
using ::uint32_t; using ::int64_t; using ::uint64_t; using ::intptr_t; using ::uintptr_t;
}
)";

inline constexpr char kFloatText[] = R"(#pragma once
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-016
)";

// CUDA's math functions (expf, sqrtf, …) are built into NVRTC; this adds the
// std:: spellings models often use.
inline constexpr char kMathText[] = R"(#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
namespace std {
#define KSEARCH_STD_UNARY(name) \
  __device__ inline float name(float x) { return ::name##f(x); } \
  __device__ inline double name(double x) { return ::name(x); }
KSEARCH_STD_UNARY(exp) KSEARCH_STD_UNARY(exp2) KSEARCH_STD_UNARY(log) KSEARCH_STD_UNARY(log2)
KSEARCH_STD_UNARY(sqrt) KSEARCH_STD_UNARY(rsqrt) KSEARCH_STD_UNARY(fabs) KSEARCH_STD_UNARY(tanh)
KSEARCH_STD_UNARY(floor) KSEARCH_STD_UNARY(ceil) KSEARCH_STD_UNARY(sin) KSEARCH_STD_UNARY(cos)
KSEARCH_STD_UNARY(erf) KSEARCH_STD_UNARY(round) KSEARCH_STD_UNARY(trunc)
#undef KSEARCH_STD_UNARY
__device__ inline float abs(float x) { return ::fabsf(x); }
__device__ inline double abs(double x) { return ::fabs(x); }
__device__ inline float pow(float x, float y) { return ::powf(x, y); }
__device__ inline double pow(double x, double y) { return ::pow(x, y); }
__device__ inline float fmax(float x, float y) { return ::fmaxf(x, y); }
__device__ inline double fmax(double x, double y) { return ::fmax(x, y); }
__device__ inline float fmin(float x, float y) { return ::fminf(x, y); }
__device__ inline double fmin(double x, double y) { return ::fmin(x, y); }
__device__ inline bool isnan(float x) { return ::isnan(x); }
__device__ inline bool isinf(float x) { return ::isinf(x); }
__device__ inline bool isfinite(float x) { return ::isfinite(x); }
}
)";

inline constexpr char kAssertText[] = R"(#pragma once
#define assert(e) ((e) ? (void)0 : __trap())
)";

inline constexpr char kLimitsText[] = R"(#pragma once
#define CHAR_BIT 8
#define INT_MAX 2147483647
#define INT_MIN (-2147483647 - 1)
#define UINT_MAX 4294967295U
#define LLONG_MAX 9223372036854775807LL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define ULLONG_MAX 18446744073709551615ULL
)";

inline constexpr char kEmptyText[] = "#pragma once\n";

inline constexpr StandinHeader kStandinHeaders[] = {
    {"cstdint", kStdintText}, {"stdint.h", kStdintText}, {"cfloat", kFloatText},
    {"float.h", kFloatText},  {"cmath", kMathText},      {"math.h", kMathText},
    {"cassert", kAssertText}, {"assert.h", kAssertText}, {"cstdio", kEmptyText},
    {"stdio.h", kEmptyText},  {"cstdlib", kEmptyText},   {"stdlib.h", kEmptyText},
    {"cstddef", kEmptyText},  {"stddef.h", kEmptyText},  {"climits", kLimitsText},
    {"limits.h", kLimitsText},
};

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_STANDIN_HEADERS_H_
