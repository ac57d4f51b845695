// rope template "vector": rotate-half RoPE in place on q and k, bf16 storage,
// fp32 arithmetic, one rounding per element.
//
// A token's rows (q's heads, then k's kv_heads) are cut into units: VEC
// elements of a row's first half and the VEC elements head_dim/2 further on,
// loaded as two 16-byte (VEC 8) or 8-byte (VEC 4) vectors. A row has
// lanes = head_dim / (2 * VEC) units; THREADS is a multiple of lanes, so a
// thread always holds the same chunk j of every row it visits and loads the
// token's cos/sin for that chunk once, then reuses them for each of its
// heads (several heads per block, q and k alike). UNROLL units are loaded
// before any is computed so that many loads are in flight.
// Tunable through the -D params:
//   THREADS  threads per block (a multiple of lanes)
//   VEC      bf16 per load: 4 or 8 (head_dim % (2 * VEC) == 0)
//   TOKENS   tokens per block (consecutive)
//   UNROLL   units per thread in flight
//   SPLIT    blocks per token along the units (the grid's y): decode has few
//            tokens, so the heads of one token spread over SPLIT blocks
//   CS       1: streaming cache hints (ld.cs/st.cs) on q and k
// Grid: (ceil(tokens / TOKENS), SPLIT, 1). Block: (THREADS, 1, 1).
#include <cuda_bf16.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef TOKENS
#define TOKENS 1
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef CS
#define CS 1
#endif

#if VEC == 8
typedef uint4 raw_t;
#elif VEC == 4
typedef uint2 raw_t;
#else
#error "VEC must be 4 or 8"
#endif

// VEC bf16 as VEC / 2 words of two.
struct __align__(sizeof(raw_t)) Pack {
  unsigned int word[VEC / 2];
  __device__ __forceinline__ float2 get(int w) const {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&word[w]));
  }
  __device__ __forceinline__ void set(int w, float a, float b) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
    word[w] = *reinterpret_cast<const unsigned int*>(&pair);
  }
};

__device__ __forceinline__ Pack load_row(const __nv_bfloat16* p) {
  Pack v;
#if CS
  *reinterpret_cast<raw_t*>(v.word) = __ldcs(reinterpret_cast<const raw_t*>(p));
#else
  *reinterpret_cast<raw_t*>(v.word) = *reinterpret_cast<const raw_t*>(p);
#endif
  return v;
}

__device__ __forceinline__ void store_row(__nv_bfloat16* p, const Pack& v) {
#if CS
  __stcs(reinterpret_cast<raw_t*>(p), *reinterpret_cast<const raw_t*>(v.word));
#else
  *reinterpret_cast<raw_t*>(p) = *reinterpret_cast<const raw_t*>(v.word);
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS)
rope_vec(__nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ k, const float* __restrict__ cos_t,
         const float* __restrict__ sin_t, int tokens, int heads, int kv_heads, int head_dim) {
  const int half = head_dim / 2;
  const int lanes = half / VEC;
  const int j = threadIdx.x % lanes;  // the same for every unit of this thread
  const int units = (heads + kv_heads) * lanes;
  for (int tt = 0; tt < TOKENS; ++tt) {
    const long long t = (long long)blockIdx.x * TOKENS + tt;
    if (t >= tokens) return;
    // This chunk's cos and sin, once for all the token's heads.
    float c[VEC], s[VEC];
    const float4* cp = reinterpret_cast<const float4*>(cos_t + t * half + j * VEC);
    const float4* sp = reinterpret_cast<const float4*>(sin_t + t * half + j * VEC);
#pragma unroll
    for (int v = 0; v < VEC / 4; ++v) {
      const float4 cv = __ldg(cp + v), sv = __ldg(sp + v);
      c[4 * v] = cv.x, c[4 * v + 1] = cv.y, c[4 * v + 2] = cv.z, c[4 * v + 3] = cv.w;
      s[4 * v] = sv.x, s[4 * v + 1] = sv.y, s[4 * v + 2] = sv.z, s[4 * v + 3] = sv.w;
    }
    for (int u0 = blockIdx.y * THREADS + threadIdx.x; u0 < units; u0 += THREADS * SPLIT * UNROLL) {
      __nv_bfloat16* row[UNROLL];
      Pack lo[UNROLL], hi[UNROLL];
#pragma unroll
      for (int r = 0; r < UNROLL; ++r) {
        const int u = u0 + r * THREADS * SPLIT;
        row[r] = nullptr;
        if (u < units) {
          const int h = u / lanes;
          row[r] = (h < heads ? q + (t * heads + h) * head_dim : k + (t * kv_heads + (h - heads)) * head_dim) +
                   j * VEC;
          lo[r] = load_row(row[r]);
          hi[r] = load_row(row[r] + half);
        }
      }
#pragma unroll
      for (int r = 0; r < UNROLL; ++r) {
        if (!row[r]) continue;
        Pack a, b;
#pragma unroll
        for (int w = 0; w < VEC / 2; ++w) {
          const float2 x1 = lo[r].get(w), x2 = hi[r].get(w);
          const float c0 = c[2 * w], c1 = c[2 * w + 1], s0 = s[2 * w], s1 = s[2 * w + 1];
          a.set(w, fmaf(x1.x, c0, -(x2.x * s0)), fmaf(x1.y, c1, -(x2.y * s1)));
          b.set(w, fmaf(x2.x, c0, x1.x * s0), fmaf(x2.y, c1, x1.y * s1));
        }
        store_row(row[r], a);
        store_row(row[r] + half, b);
      }
    }
  }
}
