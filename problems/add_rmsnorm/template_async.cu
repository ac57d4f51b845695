// add_rmsnorm template "async": h = x + residual (bf16) and
// y = h * rsqrt(mean(h^2) + eps) * weight (bf16), one pass over memory, with
// the row's x and residual copied into shared memory by asynchronous copies
// instead of register loads. The bytes a block has in flight then cost no
// registers: with one 16 KB row per block, up to 13 blocks per SM keep their
// rows in flight at once (the register path of "vector" stops at 8 blocks of
// 256 threads, 128 KB per SM).
// Tunable through the -D params:
//   BLOCK  threads per block (a multiple of 32)
//   ITEMS  16-byte vectors per thread per row (BLOCK * 8 * ITEMS must cover hidden)
//   ITER   rows per block, 1 or 2: with 2 the second row's copies are issued
//          together with the first's, into a second buffer
//   ASYNC  1: every thread copies its own 16-byte pieces (cp.async.cg) and
//          reads back only those (no barrier before the sum);
//          2: one thread issues two bulk copies per row (cp.async.bulk, x and
//          residual, 2 * hidden bytes each) completing on an mbarrier
//   KEEP   1: keep h packed in registers for the second pass; 0: read x and
//          residual again from shared memory and recompute h (same bits)
// Grid: (ceil_div(tokens, ITER), 1, 1). Block: (BLOCK, 1, 1).
// Dynamic shared memory: 4 * hidden * ITER bytes. Needs hidden % 8 == 0.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef ITER
#define ITER 1
#endif
#ifndef ASYNC
#define ASYNC 1
#endif
#ifndef KEEP
#define KEEP 0
#endif

__device__ __forceinline__ float2 unpack(unsigned int word) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&word));
}

__device__ __forceinline__ unsigned int pack(float a, float b) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const unsigned int*>(&pair);
}

__device__ __forceinline__ unsigned int word(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

__device__ __forceinline__ unsigned int& word(uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// h = bf16(a + b), four pairs at a time.
__device__ __forceinline__ uint4 add_round(const uint4& a, const uint4& b) {
  uint4 s;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 fa = unpack(word(a, j)), fb = unpack(word(b, j));
    word(s, j) = pack(fa.x + fb.x, fa.y + fb.y);
  }
  return s;
}

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

#if ASYNC == 1
__device__ __forceinline__ void copy16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" : : "r"(smem_addr(dst)), "l"(src) : "memory");
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
add_rmsnorm_async(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
                  const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ h,
                  __nv_bfloat16* __restrict__ y, int tokens, int hidden, float eps) {
  extern __shared__ uint4 stage[];  // [ITER][x, residual][hidden / 8]
  __shared__ float warp_sums[ITER][BLOCK / 32];
  const int t = threadIdx.x;
  const int chunks = hidden / 8;
  const long long first = (long long)blockIdx.x * ITER;
  const int rows = (int)min((long long)ITER, (long long)tokens - first);

#if ASYNC == 2
  __shared__ __align__(8) unsigned long long full[ITER];
  if (t == 0) {
#pragma unroll
    for (int r = 0; r < ITER; ++r) {
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" : : "r"(smem_addr(&full[r])) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory");
    const unsigned int bytes = (unsigned int)hidden * 2u;
#pragma unroll
    for (int r = 0; r < ITER; ++r) {
      if (r < rows) {
        const long long base = (first + r) * hidden;
        uint4* sx = stage + (size_t)r * 2 * chunks;
        uint4* sr = sx + chunks;
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;"
                     : : "r"(smem_addr(&full[r])), "r"(2u * bytes) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     : : "r"(smem_addr(sx)), "l"(x + base), "r"(bytes), "r"(smem_addr(&full[r])) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     : : "r"(smem_addr(sr)), "l"(residual + base), "r"(bytes), "r"(smem_addr(&full[r])) : "memory");
      }
    }
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
#else
#pragma unroll
  for (int r = 0; r < ITER; ++r) {
    if (r < rows) {
      const long long base = (first + r) * hidden;
      uint4* sx = stage + (size_t)r * 2 * chunks;
      uint4* sr = sx + chunks;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int k = i * BLOCK + t;
        if (k < chunks) {
          copy16(sx + k, x + base + 8 * k);
          copy16(sr + k, residual + base + 8 * k);
        }
      }
    }
    asm volatile("cp.async.commit_group;" : : : "memory");
  }
#endif

#pragma unroll
  for (int r = 0; r < ITER; ++r) {
    if (r < rows) {
      const long long base = (first + r) * hidden;
      const uint4* sx = stage + (size_t)r * 2 * chunks;
      const uint4* sr = sx + chunks;
#if ASYNC == 2
      {
        const unsigned int bar = smem_addr(&full[r]);
        unsigned int done = 0;
        while (!done) {
          asm volatile(
              "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
              : "=r"(done)
              : "r"(bar)
              : "memory");
        }
      }
#else
      // Groups complete in order: row r's is done once at most ITER - 1 - r are pending.
      if (r == ITER - 1) {
        asm volatile("cp.async.wait_group 0;" : : : "memory");
      } else {
        asm volatile("cp.async.wait_group %0;" : : "n"(ITER - 1 > 0 ? ITER - 1 : 0) : "memory");
      }
#endif
      float sum_sq = 0.0f;
#if KEEP
      uint4 hv[ITEMS];
#endif
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int k = i * BLOCK + t;
        if (k < chunks) {
          const uint4 s = add_round(sx[k], sr[k]);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 fs = unpack(word(s, j));
            sum_sq += fs.x * fs.x + fs.y * fs.y;
          }
          *reinterpret_cast<uint4*>(h + base + 8 * k) = s;
#if KEEP
          hv[i] = s;
#endif
        }
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
      if ((t & 31) == 0) warp_sums[r][t >> 5] = sum_sq;
      __syncthreads();
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < BLOCK / 32; ++w) total += warp_sums[r][w];
      const float scale = rsqrtf(total / hidden + eps);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int k = i * BLOCK + t;
        if (k < chunks) {
#if KEEP
          const uint4 s = hv[i];
#else
          const uint4 s = add_round(sx[k], sr[k]);
#endif
          const uint4 wv = __ldg(reinterpret_cast<const uint4*>(weight) + k);
          uint4 out;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 fh = unpack(word(s, j)), fw = unpack(word(wv, j));
            word(out, j) = pack(fh.x * scale * fw.x, fh.y * scale * fw.y);
          }
          *reinterpret_cast<uint4*>(y + base + 8 * k) = out;
        }
      }
    }
  }
}
