// add_rmsnorm template "rows": h = x + residual (bf16) and
// y = h * rsqrt(mean(h^2) + eps) * weight (bf16), one pass over memory.
// A row is owned by TPR threads (one warp up to a whole block); a block holds
// ROWS such row groups side by side and each group walks ITER consecutive rows,
// with the next row's x and residual loads issued before the current row is
// reduced and stored (a two-deep register pipeline), so a group always has a
// row's loads in flight. Every access is 16 bytes (8 bf16); h is kept packed
// as bf16 in the registers that held x (y is computed from the rounded h, so
// nothing is lost), the sum of squares is taken in fp32 with warp shuffles and,
// when a row spans several warps, a named barrier per row group (groups of one
// block never wait for each other).
// Tunable through the -D params:
//   TPR    threads per row: 32, 64, 128, 256, 512 or 1024
//   ROWS   row groups per block (block = TPR * ROWS threads, at most 1024;
//          at most 15 when TPR > 32: one named barrier each)
//   ITEMS  16-byte vectors per thread per row (TPR * 8 * ITEMS must cover hidden)
//   ITER   rows each group handles, one after the other (1: no pipeline)
//   LDH    x/residual loads: 0 plain; 1 non-coherent, no L1 allocation, L2
//          evict-first policy; 2 streaming (ld.global.cs); 3 non-coherent, no
//          L1 allocation, 256-byte L2 prefetch
//   STH    h/y stores: 0 plain; 1 streaming (st.global.cs); 2 L2 evict-first policy
//   WEARLY 1: load this thread's slice of weight before x and residual
//          (registers); 0: after the reduction (an L1 hit)
//   MINB   blocks per SM the registers must allow (__launch_bounds__'s
//          second argument; 1 adds nothing to the block-size bound)
// Grid: (ceil_div(tokens, ROWS * ITER), 1, 1). Block: (TPR * ROWS, 1, 1).
// Needs hidden % 8 == 0.
#include <cuda_bf16.h>

#ifndef TPR
#define TPR 256
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef ITER
#define ITER 1
#endif
#ifndef LDH
#define LDH 0
#endif
#ifndef STH
#define STH 0
#endif
#ifndef WEARLY
#define WEARLY 0
#endif
#ifndef MINB
#define MINB 1
#endif

#define WARPS_PER_ROW (TPR / 32)

__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long pol = 0;
#if LDH == 1 || STH == 2
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}

__device__ __forceinline__ uint4 load_in(const __nv_bfloat16* p, unsigned long long pol) {
  uint4 v;
#if LDH == 1
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(pol));
#elif LDH == 2
  v = __ldcs(reinterpret_cast<const uint4*>(p));
#elif LDH == 3
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
#else
  (void)pol;
  v = *reinterpret_cast<const uint4*>(p);
#endif
  return v;
}

__device__ __forceinline__ void store_out(__nv_bfloat16* p, const uint4& v, unsigned long long pol) {
#if STH == 1
  __stcs(reinterpret_cast<uint4*>(p), v);
#elif STH == 2
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
               :
               : "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
               : "memory");
#else
  (void)pol;
  *reinterpret_cast<uint4*>(p) = v;
#endif
}

__device__ __forceinline__ float2 unpack(unsigned int word) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&word));
}

__device__ __forceinline__ unsigned int pack(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const unsigned int*>(&pair);
}

__device__ __forceinline__ unsigned int& word(uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

__device__ __forceinline__ unsigned int word(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

extern "C" __global__ void __launch_bounds__(TPR * ROWS, MINB)
add_rmsnorm_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
                 const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ h,
                 __nv_bfloat16* __restrict__ y, int tokens, int hidden, float eps) {
  const int group = ROWS == 1 ? 0 : (int)(threadIdx.x / TPR);
  const int t = ROWS == 1 ? (int)threadIdx.x : (int)(threadIdx.x % TPR);
  const long long first = ((long long)blockIdx.x * ROWS + group) * ITER;
  if (first >= tokens) return;  // a whole row group leaves: no barrier of it is left waiting
  const unsigned long long pol = evict_first_policy();
#if WARPS_PER_ROW > 1
  __shared__ float warp_sums[ROWS][2][WARPS_PER_ROW];
#endif

#if WEARLY
  uint4 w[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int c = (i * TPR + t) * 8;
    if (c < hidden) w[i] = __ldg(reinterpret_cast<const uint4*>(weight + c));
  }
#endif

  uint4 a[2][ITEMS], b[2][ITEMS];
  {
    const long long base = first * hidden;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (i * TPR + t) * 8;
      if (c < hidden) {
        a[0][i] = load_in(x + base + c, pol);
        b[0][i] = load_in(residual + base + c, pol);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < ITER; ++r) {
    const int cur = r & 1, nxt = cur ^ 1;
    const long long row = first + r;
    if (row < tokens) {  // uniform across the row group
    const long long base = row * hidden;
    if (r + 1 < ITER && row + 1 < tokens) {  // the next row's loads go out first
      const long long next = base + hidden;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int c = (i * TPR + t) * 8;
        if (c < hidden) {
          a[nxt][i] = load_in(x + next + c, pol);
          b[nxt][i] = load_in(residual + next + c, pol);
        }
      }
    }
    // h = bf16(x + residual), kept packed in a[cur]; sum of squares of the rounded h.
    float sum_sq = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (i * TPR + t) * 8;
      if (c < hidden) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 fa = unpack(word(a[cur][i], j)), fb = unpack(word(b[cur][i], j));
          const unsigned int s = pack(fa.x + fb.x, fa.y + fb.y);
          word(a[cur][i], j) = s;
          const float2 fs = unpack(s);
          sum_sq += fs.x * fs.x + fs.y * fs.y;
        }
        store_out(h + base + c, a[cur][i], pol);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
#if WARPS_PER_ROW > 1
    // Two slots alternate by row, so one barrier per row suffices: a warp
    // that runs ahead writes the other slot, never one still being read.
    float* sums = warp_sums[group][cur];
    if ((t & 31) == 0) sums[t >> 5] = sum_sq;
#if ROWS == 1
    __syncthreads();
#else
    asm volatile("bar.sync %0, %1;" : : "r"(group + 1), "r"(TPR) : "memory");
#endif
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < WARPS_PER_ROW; ++k) total += sums[k];
#else
    const float total = sum_sq;
#endif
    const float scale = rsqrtf(total / hidden + eps);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int c = (i * TPR + t) * 8;
      if (c < hidden) {
#if WEARLY
        const uint4 wv = w[i];
#else
        const uint4 wv = __ldg(reinterpret_cast<const uint4*>(weight + c));
#endif
        uint4 out;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 fh = unpack(word(a[cur][i], j)), fw = unpack(word(wv, j));
          word(out, j) = pack(fh.x * scale * fw.x, fh.y * scale * fw.y);
        }
        store_out(y + base + c, out, pol);
      }
    }
    }
  }
}
