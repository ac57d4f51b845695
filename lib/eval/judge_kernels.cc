#include "eval/judge_kernels.h"

namespace ksearch::internal {

const char kJudgeKernelSource[] = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// splitmix64: a counter-based generator; element i of stream (seed) is a pure
// function of (seed, i), so generation is parallel and reproducible.
__device__ __forceinline__ unsigned long long ks_mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ double ks_unit(unsigned long long bits) {
  // 53 random bits in (0, 1).
  return ((double)(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ double ks_draw(int kind, double a, double b, unsigned long long seed,
                                          long long i) {
  unsigned long long r1 = ks_mix(seed ^ ks_mix((unsigned long long)i * 2ull));
  if (kind == 1) return a + (b - a) * ks_unit(r1);
  unsigned long long r2 = ks_mix(seed ^ ks_mix((unsigned long long)i * 2ull + 1ull));
  double u1 = ks_unit(r1), u2 = ks_unit(r2);
  return a + b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
}

extern "C" __global__ void ks_fill(void* out, long long n, int dtype, int kind, double a, double b,
                                   unsigned long long seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    double v = ks_draw(kind, a, b, seed, i);
    switch (dtype) {
      case 0: ((float*)out)[i] = (float)v; break;
      case 1: ((double*)out)[i] = v; break;
      case 2: ((__half*)out)[i] = __double2half(v); break;
      case 3: ((__nv_bfloat16*)out)[i] = __double2bfloat16(v); break;
      case 4: ((int*)out)[i] = (int)llrint(v); break;
      case 5: ((long long*)out)[i] = llrint(v); break;
      default: ((unsigned char*)out)[i] = (unsigned char)((long long)llrint(v) & 255); break;
    }
  }
}

__device__ __forceinline__ double ks_load(const void* p, int dtype, long long i, bool* poisoned) {
  switch (dtype) {
    case 0: {
      unsigned bits = ((const unsigned*)p)[i];
      *poisoned = bits == 0x7fbadbadu;
      return (double)__uint_as_float(bits);
    }
    case 1: {
      unsigned long long bits = ((const unsigned long long*)p)[i];
      *poisoned = bits == 0x7fbadbad7fbadbadull;
      return __longlong_as_double((long long)bits);
    }
    case 2: {
      unsigned short bits = ((const unsigned short*)p)[i];
      *poisoned = bits == 0x7dadu;
      return (double)__half2float(__ushort_as_half(bits));
    }
    default: {
      unsigned short bits = ((const unsigned short*)p)[i];
      *poisoned = bits == 0x7fadu;
      return (double)__bfloat162float(__ushort_as_bfloat16(bits));
    }
  }
}

struct KsCompareResults {
  double sum_sq_diff;
  double sum_sq_want;
  unsigned long long bad;
  unsigned long long unwritten;
  unsigned long long worst;
  unsigned long long max_rel;
};

// Elementwise check |got - want| <= atol + rtol*|want|; exactly one of them
// non-finite fails; an element still holding the poison is unwritten.
extern "C" __global__ void ks_compare(const void* got, const void* want, long long n, int dtype,
                                      double atol, double rtol, KsCompareResults* out) {
  double sum_diff = 0.0, sum_want = 0.0;
  unsigned long long bad = 0, unwritten = 0, worst = 0;
  float max_rel = 0.0f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    bool poisoned = false, unused = false;
    double g = ks_load(got, dtype, i, &poisoned);
    double w = ks_load(want, dtype, i, &unused);
    float violation = 0.0f;
    if (poisoned) {
      ++unwritten;
      ++bad;
      violation = 3.0e38f;
    } else {
      bool gf = isfinite(g), wf = isfinite(w);
      if (gf && wf) {
        double d = fabs(g - w);
        sum_diff += d * d;
        sum_want += w * w;
        double limit = atol + rtol * fabs(w);
        double v = limit > 0 ? d / limit : (d > 0 ? 1e30 : 0.0);
        violation = (float)fmin(v, 1e30);
        if (d > limit) ++bad;
        float rel = (float)fmin(d / (fabs(w) + atol + 1e-300), 1e30);
        max_rel = fmaxf(max_rel, rel);
      } else if (gf != wf || (!(isnan(g) && isnan(w)) && g != w)) {
        ++bad;
        violation = 1.0e38f;
        max_rel = 1.0e30f;
      }
    }
    if (violation > 0.0f) {
      unsigned long long key =
          ((unsigned long long)__float_as_uint(violation) << 32) | (unsigned long long)(i & 0xffffffffll);
      worst = key > worst ? key : worst;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    sum_diff += __shfl_down_sync(0xffffffffu, sum_diff, offset);
    sum_want += __shfl_down_sync(0xffffffffu, sum_want, offset);
    bad += __shfl_down_sync(0xffffffffu, bad, offset);
    unwritten += __shfl_down_sync(0xffffffffu, unwritten, offset);
    unsigned long long other = __shfl_down_sync(0xffffffffu, worst, offset);
    worst = other > worst ? other : worst;
    max_rel = fmaxf(max_rel, __shfl_down_sync(0xffffffffu, max_rel, offset));
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out->sum_sq_diff, sum_diff);
    atomicAdd(&out->sum_sq_want, sum_want);
    if (bad) atomicAdd(&out->bad, bad);
    if (unwritten) atomicAdd(&out->unwritten, unwritten);
    if (worst) atomicMax(&out->worst, worst);
    if (max_rel > 0.0f) atomicMax(&out->max_rel, (unsigned long long)__float_as_uint(max_rel));
  }
}

// Counts 32-bit words that differ between two buffers (input-modified check).
extern "C" __global__ void ks_diff_words(const unsigned* a, const unsigned* b, long long words,
                                         unsigned long long* count) {
  unsigned long long local = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words;
       i += (long long)gridDim.x * blockDim.x) {
    local += a[i] != b[i];
  }
  for (int offset = 16; offset > 0; offset >>= 1) local += __shfl_down_sync(0xffffffffu, local, offset);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
}

// Reads one element of any float dtype as double (for reporting values).
extern "C" __global__ void ks_read(const void* p, int dtype, long long i, double* out) {
  bool unused = false;
  *out = ks_load(p, dtype, i, &unused);
}

// Peak fp32 FMA rate: 8 independent chains per thread, 2 flops per FMA.
extern "C" __global__ void ks_fma_peak(float* out, int iterations, float seed) {
  float a0 = seed + threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5,
        a6 = a0 + 6, a7 = a0 + 7;
  const float m = 0.999999f, c = 1e-7f;
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      a0 = fmaf(a0, m, c); a1 = fmaf(a1, m, c); a2 = fmaf(a2, m, c); a3 = fmaf(a3, m, c);
      a4 = fmaf(a4, m, c); a5 = fmaf(a5, m, c); a6 = fmaf(a6, m, c); a7 = fmaf(a7, m, c);
    }
  }
  float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s == 12345.678f) out[0] = s;  // keeps the chains alive
}
)";

}  // namespace ksearch::internal
