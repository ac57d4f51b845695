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

// scale_axis 1 (per row) or 2 (per column): element i is multiplied by
// 10^uniform(scale_lo, scale_hi) drawn once for its row i / row_len or its
// column i % row_len, from a stream of its own.
extern "C" __global__ void ks_fill(void* out, long long n, int dtype, int kind, double a, double b,
                                   unsigned long long seed, int scale_axis, double scale_lo,
                                   double scale_hi, long long row_len) {
  const unsigned long long scale_seed = ks_mix(seed ^ 0xa0761d6478bd642full);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    double v = ks_draw(kind, a, b, seed, i);
    if (scale_axis != 0) {
      long long group = scale_axis == 1 ? i / row_len : i % row_len;
      v *= exp10(ks_draw(1, scale_lo, scale_hi, scale_seed, group));
    }
    switch (dtype) {
      case 0: ((float*)out)[i] = (float)v; break;
      case 1: ((double*)out)[i] = v; break;
      // Half types: drawn in fp32, then rounded, so that the value is the one
      // an fp32 pipeline casting to half would hold (docs/evaluation.md).
      case 2: ((__half*)out)[i] = __float2half_rn((float)v); break;
      case 3: ((__nv_bfloat16*)out)[i] = __float2bfloat16_rn((float)v); break;
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
  unsigned long long nonfinite_want;
  unsigned long long nonfinite_got;
  unsigned long long max_excess;
};

// Quarter-octave bin of a positive value x among 256: bin 0 for 0 (and for
// NaN), bin b in 1..255 for x in [2^((b-offset)/4), 2^((b-offset+1)/4)), the
// ends clamped into bins 1 and 255.
__device__ __forceinline__ int ks_quarter_octave_bin(double x, int offset) {
  if (!(x > 0.0)) return 0;
  int b = (int)floor(4.0 * log2(x)) + offset;
  return b < 1 ? 1 : (b > 255 ? 255 : b);
}

// Bin of a relative error in the histogram: about 2^-56 .. 2^8.
__device__ __forceinline__ int ks_rel_bin(double rel) { return ks_quarter_octave_bin(rel, 224); }

// Elementwise check |got - want| <= scale*atol + rtol*|want|. A non-finite value
// on either side fails (NaN is never a match, not even for NaN); an element
// still holding the poison is unwritten. When `hist` is not null, the
// relative errors |got-want|/|want| of elements with |want| >= hist_min_abs
// are counted in 256 quarter-octave bins (ks_rel_bin).
// With group_axis 1 (rows) or 2 (columns), an element's atol is the smaller
// of `atol` and group_atol[its row i / row_len, or its column i % row_len]
// (ks_group_atol): inputs scaled row by row must be right row by row.
// max_excess: the largest max(0, |got-want| - rtol*|want|) / atol over the
// finite elements (what `scale` would have to be for every element to pass).
extern "C" __global__ void ks_compare(const void* got, const void* want, long long n, int dtype,
                                      double atol_all, double rtol, KsCompareResults* out,
                                      unsigned long long* hist, double hist_min_abs,
                                      const double* group_atol, long long row_len, int group_axis,
                                      double scale) {
  __shared__ unsigned int block_hist[256];
  if (hist) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) block_hist[i] = 0;
    __syncthreads();
  }
  double sum_diff = 0.0, sum_want = 0.0;
  unsigned long long bad = 0, unwritten = 0, worst = 0, nonfinite_want = 0, nonfinite_got = 0;
  float max_rel = 0.0f, max_excess = 0.0f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    bool poisoned = false, unused = false;
    double g = ks_load(got, dtype, i, &poisoned);
    double w = ks_load(want, dtype, i, &unused);
    float violation = 0.0f;
    bool gf = isfinite(g), wf = isfinite(w);
    if (!wf) ++nonfinite_want;
    if (poisoned) {
      ++unwritten;
      ++bad;
      violation = 3.0e38f;
    } else if (gf && wf) {
      double atol = atol_all;
      if (group_axis != 0) atol = fmin(atol, group_atol[group_axis == 1 ? i / row_len : i % row_len]);
      double d = fabs(g - w);
      sum_diff += d * d;
      sum_want += w * w;
      double limit = scale * atol + rtol * fabs(w);
      double excess = d - rtol * fabs(w);
      if (excess > 0) max_excess = fmaxf(max_excess, (float)fmin(atol > 0 ? excess / atol : 1e30, 1e30));
      double v = limit > 0 ? d / limit : (d > 0 ? 1e30 : 0.0);
      violation = (float)fmin(v, 1e30);
      if (d > limit) ++bad;
      float rel = (float)fmin(d / (fabs(w) + atol + 1e-300), 1e30);
      max_rel = fmaxf(max_rel, rel);
      if (hist && fabs(w) >= hist_min_abs) atomicAdd(&block_hist[ks_rel_bin(d / fabs(w))], 1u);
    } else {
      if (wf) ++nonfinite_got;
      ++bad;
      violation = 1.0e38f;
      max_rel = 1.0e30f;
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
    nonfinite_want += __shfl_down_sync(0xffffffffu, nonfinite_want, offset);
    nonfinite_got += __shfl_down_sync(0xffffffffu, nonfinite_got, offset);
    unsigned long long other = __shfl_down_sync(0xffffffffu, worst, offset);
    worst = other > worst ? other : worst;
    max_rel = fmaxf(max_rel, __shfl_down_sync(0xffffffffu, max_rel, offset));
    max_excess = fmaxf(max_excess, __shfl_down_sync(0xffffffffu, max_excess, offset));
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out->sum_sq_diff, sum_diff);
    atomicAdd(&out->sum_sq_want, sum_want);
    if (bad) atomicAdd(&out->bad, bad);
    if (unwritten) atomicAdd(&out->unwritten, unwritten);
    if (nonfinite_want) atomicAdd(&out->nonfinite_want, nonfinite_want);
    if (nonfinite_got) atomicAdd(&out->nonfinite_got, nonfinite_got);
    if (worst) atomicMax(&out->worst, worst);
    if (max_rel > 0.0f) atomicMax(&out->max_rel, (unsigned long long)__float_as_uint(max_rel));
    if (max_excess > 0.0f) atomicMax(&out->max_excess, (unsigned long long)__float_as_uint(max_excess));
  }
  if (hist) {
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
      if (block_hist[i]) atomicAdd(&hist[i], (unsigned long long)block_hist[i]);
    }
  }
}

// group_atol[g] = fraction × RMS of `want` over row g (axis 1: the elements
// g*row_len .. g*row_len+row_len-1) or column g (axis 2: every row_len-th
// element from g). One block per row; one thread per column.
extern "C" __global__ void ks_group_atol(const void* want, long long n, int dtype, long long row_len,
                                         int axis, double fraction, double* group_atol) {
  __shared__ double partial[256];
  long long rows = n / row_len;
  if (axis == 1) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
      double sum = 0.0;
      for (long long c = threadIdx.x; c < row_len; c += blockDim.x) {
        bool unused = false;
        double w = ks_load(want, dtype, r * row_len + c, &unused);
        if (isfinite(w)) sum += w * w;
      }
      partial[threadIdx.x] = sum;
      __syncthreads();
      for (int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
      }
      if (threadIdx.x == 0) group_atol[r] = fraction * sqrt(partial[0] / (double)row_len);
      __syncthreads();
    }
    return;
  }
  for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < row_len;
       c += (long long)gridDim.x * blockDim.x) {
    double sum = 0.0;
    for (long long r = 0; r < rows; ++r) {
      bool unused = false;
      double w = ks_load(want, dtype, r * row_len + c, &unused);
      if (isfinite(w)) sum += w * w;
    }
    group_atol[c] = fraction * sqrt(sum / (double)rows);
  }
}

// Magnitudes of `want` in quarter octaves: bin 0 holds zeros and non-finite
// values, bin b in 1..255 the |w| in [2^((b-128)/4), 2^((b-127)/4)) (the
// ends clamped into bins 1 and 255); count[b] and mass[b] (the sum of w^2)
// are added to, so they start zeroed. For the L2 floor of half-precision
// outputs: how much of the output's mass its largest elements hold.
extern "C" __global__ void ks_magnitude_hist(const void* want, long long n, int dtype,
                                             unsigned long long* count, double* mass) {
  __shared__ unsigned int block_count[256];
  __shared__ double block_mass[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    block_count[i] = 0;
    block_mass[i] = 0.0;
  }
  __syncthreads();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    bool unused = false;
    double w = fabs(ks_load(want, dtype, i, &unused));
    if (!isfinite(w) || w == 0.0) continue;
    const int b = ks_quarter_octave_bin(w, 128);
    atomicAdd(&block_count[b], 1u);
    atomicAdd(&block_mass[b], w * w);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    if (block_count[i]) {
      atomicAdd(&count[i], (unsigned long long)block_count[i]);
      atomicAdd(&mass[i], block_mass[i]);
    }
  }
}

// Counts 32-bit words that differ from `pattern` (guard regions).
extern "C" __global__ void ks_count_ne(const unsigned* p, long long words, unsigned pattern,
                                       unsigned long long* count) {
  unsigned long long local = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words;
       i += (long long)gridDim.x * blockDim.x) {
    local += p[i] != pattern;
  }
  for (int offset = 16; offset > 0; offset >>= 1) local += __shfl_down_sync(0xffffffffu, local, offset);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(count, local);
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

// Peak tensor-core rates through mma.sync: each warp keeps 8 independent
// accumulator tiles busy. kind 0: tf32 m16n8k8 (2048 flops per mma),
// 1: fp16 m16n8k16 (4096), 2: bf16 m16n8k16 (4096). Inputs are whatever the
// registers hold: the rate does not depend on the values.
extern "C" __global__ void ks_mma_peak(float* out, int iterations, int kind) {
#if __CUDA_ARCH__ >= 800
  unsigned a0 = 0x3c003c00u ^ threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
  unsigned b0 = 0x3c003c00u ^ (threadIdx.x * 7), b1 = b0 + 5;
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[j][k] = 0.0f;
  }
  if (kind == 0) {
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      }
    }
  } else if (kind == 1) {
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      }
    }
  } else {
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      }
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (s == 12345.678f) out[0] = s;
#endif
}

// One wgmma on the 64 accumulators d[] with descriptors da, db (scale-d on).
#define KS_WGMMA(INSTRUCTION, IMMEDIATES)                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" INSTRUCTION       \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65" IMMEDIATES "\n}\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
               : "l"(da), "l"(db), "r"(1))

// Peak tensor-core rates through wgmma (Hopper's warpgroup MMA, sm_90a):
// each warpgroup issues m64n128 products from shared-memory descriptors,
// four per commit group. kind 0: tf32 k8 (131072 flops per wgmma), 1: fp16
// k16 (262144), 2: bf16 k16 (262144). The tiles' values do not change the
// rate. Compiled only for the arch-specific feature set; elsewhere the
// kernel is empty and never launched.
extern "C" __global__ void ks_wgmma_peak(float* out, int iterations, int kind) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A (64 x 32 B) at 0 and B (128 x 32 B) at 4 KiB, as 8 x 16 B core
  // matrices: 128 B apart along K (leading), 256 B apart along M/N (stride).
  __shared__ __align__(128) unsigned tiles[2048];
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) tiles[i] = 0x3c003c00u ^ (i & 7);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const unsigned long long base = static_cast<unsigned long long>(__cvta_generic_to_shared(tiles));
  const unsigned long long layout = (8ull << 16) | (16ull << 32);  // LBO 128 B, SBO 256 B, no swizzle
  const unsigned long long da = ((base & 0x3FFFF) >> 4) | layout;
  const unsigned long long db = (((base + 4096) & 0x3FFFF) >> 4) | layout;
  float d[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) d[j] = 0.0f;
  for (int i = 0; i < iterations; ++i) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    if (kind == 0) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        KS_WGMMA("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", ", p, 1, 1;");
      }
    } else if (kind == 1) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        KS_WGMMA("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", ", p, 1, 1, 0, 0;");
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        KS_WGMMA("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", ", p, 1, 1, 0, 0;");
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 64; ++j) s += d[j];
  if (s == 12345.678f) out[0] = s;
#endif
}
)";

}  // namespace ksearch::internal
