// swiglu template "vector": out = silu(gate) * up, bf16, fp32 arithmetic.
// Each thread handles ITEMS vectors of VEC bf16 (16-byte loads at VEC 8),
// all loads issued before any arithmetic so that many are in flight.
// Tunable through the -D params:
//   THREADS  threads per block (a multiple of 32, at most 1024)
//   VEC      bf16 per load and store: 2, 4 or 8 (needs n % VEC == 0)
//   ITEMS    vectors per thread, strided by the block (1, 2, 4, 8)
//   CS       1: streaming cache hints (ld.cs/st.cs): every byte is used once
//   FAST     1: __expf (the hardware exponential) instead of expf
// Grid: (ceil(n / (THREADS * VEC * ITEMS)), 1, 1). Block: (THREADS, 1, 1).
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
#define CS 1
#endif
#ifndef FAST
#define FAST 0
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

__device__ __forceinline__ float silu(float g) {
#if FAST
  return g / (1.0f + __expf(-g));
#else
  return g / (1.0f + expf(-g));
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_vec(const __nv_bfloat16* __restrict__ gate, const __nv_bfloat16* __restrict__ up,
           __nv_bfloat16* __restrict__ out, long long n) {
  const long long first = (long long)blockIdx.x * (THREADS * VEC * ITEMS) + threadIdx.x * VEC;
  Pack g[ITEMS], u[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long at = first + (long long)i * THREADS * VEC;
    if (at < n) {
      g[i] = load_stream(gate + at);
      u[i] = load_stream(up + at);
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long at = first + (long long)i * THREADS * VEC;
    if (at < n) {
      Pack o;
#pragma unroll
      for (int j = 0; j < VEC / 2; ++j) {
        const float2 fg = g[i].get(j), fu = u[i].get(j);
        o.set(j, silu(fg.x) * fu.x, silu(fg.y) * fu.y);
      }
      store_stream(out + at, o);
    }
  }
}
