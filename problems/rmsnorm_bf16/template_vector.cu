// rmsnorm_bf16 template "vector": y = x * rsqrt(mean(x^2) + eps) * weight (bf16),
// add_rmsnorm's "vector" without the residual add: one block per token, in a
// single pass over memory: each thread loads VEC bf16 at a time (up to 16
// bytes), keeps its part of the row in registers between the sum and the
// scaling, and the sum of squares is reduced with warp shuffles.
// Tunable through the -D params:
//   THREADS  threads per block (a multiple of 32, at most 1024)
//   VEC      bf16 per load and store: 2, 4 or 8 (needs hidden % VEC == 0)
//   ITEMS    vectors per thread (THREADS * VEC * ITEMS must cover hidden)
//   CS       1: streaming cache hints (ld.cs/st.cs) for x and y
// Grid: (tokens, 1, 1). Block: (THREADS, 1, 1).
#include <cuda_bf16.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef CS
#define CS 0
#endif

#if VEC == 8
typedef uint4 raw_t;
#elif VEC == 4
typedef uint2 raw_t;
#else
typedef unsigned int raw_t;
#endif

// VEC bf16 as VEC / 2 words of two, loaded and stored as one raw_t.
struct __align__(sizeof(raw_t)) Pack {
  unsigned int word[VEC / 2];
  __device__ __forceinline__ float2 get(int j) const {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&word[j]));
  }
  __device__ __forceinline__ void set(int j, float a, float b) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
    word[j] = *reinterpret_cast<const unsigned int*>(&pair);
  }
};

__device__ __forceinline__ Pack load_stream(const __nv_bfloat16* p) {
  Pack k;
#if CS
  *reinterpret_cast<raw_t*>(k.word) = __ldcs(reinterpret_cast<const raw_t*>(p));
#else
  *reinterpret_cast<raw_t*>(k.word) = *reinterpret_cast<const raw_t*>(p);
#endif
  return k;
}

__device__ __forceinline__ void store_stream(__nv_bfloat16* p, const Pack& k) {
#if CS
  __stcs(reinterpret_cast<raw_t*>(p), *reinterpret_cast<const raw_t*>(k.word));
#else
  *reinterpret_cast<raw_t*>(p) = *reinterpret_cast<const raw_t*>(k.word);
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_bf16_vec(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
            __nv_bfloat16* __restrict__ y, int tokens, int hidden, float eps) {
  const long long row = blockIdx.x;
  if (row >= tokens) return;
  const long long base = row * hidden;
  float v[ITEMS][VEC];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (i * THREADS + threadIdx.x) * VEC;
    if (c < hidden) {
      const Pack a = load_stream(x + base + c);
#pragma unroll
      for (int j = 0; j < VEC / 2; ++j) {
        const float2 fa = a.get(j);
        v[i][2 * j] = fa.x;
        v[i][2 * j + 1] = fa.y;
        sum_sq += fa.x * fa.x + fa.y * fa.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i][j] = 0.0f;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  __shared__ float warp_sums[THREADS / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum_sq;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) total += warp_sums[w];
  const float scale = rsqrtf(total / hidden + eps);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (i * THREADS + threadIdx.x) * VEC;
    if (c < hidden) {
      Pack wv;  // shared by every row: a plain load keeps it cached
      *reinterpret_cast<raw_t*>(wv.word) = *reinterpret_cast<const raw_t*>(weight + c);
      Pack out;
#pragma unroll
      for (int j = 0; j < VEC / 2; ++j) {
        const float2 fw = wv.get(j);
        out.set(j, v[i][2 * j] * scale * fw.x, v[i][2 * j + 1] * scale * fw.y);
      }
      store_stream(y + base + c, out);
    }
  }
}
