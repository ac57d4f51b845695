// linear_swiglu, decode template "streamk" (M <= 16): Y = silu(X · Wgᵀ) ·
// (X · Wuᵀ), linear's "streamk" (problems/linear/template_streamk.cu: W
// streamed once through a shared-memory ring of 8-row stages of
// KC = CW · XK columns, the tokens as the A operand of mma.sync m16n8k16,
// each warp's X slice of a chunk in registers, the CTA's sums in an fp32 table
// in shared memory in a fixed order) over the merged weight: CTA bx owns
// output columns (RPC / 2)·bx .. +RPC/2 and streams their RPC / 2 gate rows,
// then their RPC / 2 up rows; when the table is written out each output is
// silu(gate) · up in fp32, rounded once.
//
// X is M x K, W is 2N x K (rows 0 .. N-1 gate, N .. 2N-1 up), Y is M x N,
// all bf16 row-major.
//
// Grid: (ceil_div(N, RPC / 2), ceil_div(M, 16), 1), block 32 * CW + 32;
// dynamic shared memory 256 + 1024 * CW + 64 * RPC + STAGES * 16 * CW * XK.
// Needs K % (CW * XK) == 0 and RPC % 16 == 0.
#include <cuda_bf16.h>

#ifndef CW
#define CW 8
#endif
#ifndef XK
#define XK 256  // K columns per consumer warp and chunk (KC = CW * XK)
#endif
#ifndef RPC
#define RPC 32  // W rows per CTA
#endif
#ifndef EF
#define EF 1  // 1: W copies carry an L2 evict-first policy; 0: no hint
#endif

#if RPC % 16 != 0
#error "RPC must be a multiple of 16 (8-row stages of gate rows, then of up rows)"
#endif

namespace {

constexpr int kSteps = XK / 32;                    // 32-wide k steps per warp and stage
constexpr int kChunkCols = CW * XK;                // KC
constexpr int kBarBytes = 256;                     // full[16] + empty[16] mbarriers
constexpr int kRedBytes = 2 * CW * 4 * 32 * 4;     // double-buffered per-stage partials
constexpr int kSumBytes = RPC * 16 * 4;            // the CTA's outputs, fp32

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void WaitParity(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      " .reg .pred p;\n"
      " WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ uint4 LoadShared(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

__device__ __forceinline__ void Mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                    unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One copy of `bytes` from global `src` into shared `dst`, completing on `bar`.
__device__ __forceinline__ void BulkCopy(unsigned dst, const void* src, unsigned bytes, unsigned bar,
                                         unsigned long long policy) {
  if (EF) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
        "%4;" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(policy)
        : "memory");
  } else {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * CW + 32, 1)
linear_swiglu_streamk(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                      __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned long long* full = reinterpret_cast<unsigned long long*>(smem);
  unsigned long long* empty = full + 16;
  float* red = reinterpret_cast<float*>(smem + kBarBytes);              // [2][CW][4][32]
  float* sums = reinterpret_cast<float*>(smem + kBarBytes + kRedBytes);  // [RPC][16]
  unsigned char* ring = smem + kBarBytes + kRedBytes + kSumBytes;
  const int stage_bytes = 16 * kChunkCols;  // 8 rows of KC bf16
  unsigned dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  int stages = static_cast<int>((dyn - kBarBytes - kRedBytes - kSumBytes) / stage_bytes);
  stages = stages > 16 ? 16 : stages;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n0 = blockIdx.x * (RPC / 2), m0 = blockIdx.y * 16;  // output columns n0 .. n0 + RPC / 2
  const int chunks = K / kChunkCols;
  constexpr int kGroups = RPC / 8, kHalfGroups = RPC / 16;

  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SmemAddr(full + i)));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(empty + i)), "r"(CW));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == CW) {
    // Producer warp: lane 0 arms each stage's barrier, lanes 0..7 copy its rows.
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    int slot = 0;
    unsigned round = 0;
    for (int c = 0; c < chunks; ++c) {
      for (int s = 0; s < kGroups; ++s) {
        if (round > 0) WaitParity(SmemAddr(empty + slot), (round - 1) & 1);
        // Row groups 0 .. kHalfGroups - 1 are gate rows, the rest the matching up rows.
        const int col0 = n0 + 8 * (s % kHalfGroups);
        const int row0 = (s < kHalfGroups ? 0 : N) + col0;
        int rows = N - col0;
        rows = rows < 0 ? 0 : (rows > 8 ? 8 : rows);
        const unsigned bar = SmemAddr(full + slot);
        if (lane == 0) {
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                       "r"(static_cast<unsigned>(rows) * 2u * kChunkCols)
                       : "memory");
        }
        __syncwarp();
        const unsigned dst = SmemAddr(ring + slot * stage_bytes);
        const __nv_bfloat16* src = W + static_cast<long long>(row0) * K + static_cast<long long>(c) * kChunkCols;
        if (kChunkCols == K) {
          // Whole rows: the stage is one contiguous run of W.
          if (lane == 0 && rows > 0) BulkCopy(dst, src, static_cast<unsigned>(rows) * 2u * K, bar, policy);
        } else if (lane < rows) {
          BulkCopy(dst + lane * 2 * kChunkCols, src + static_cast<long long>(lane) * K, 2u * kChunkCols, bar, policy);
        }
        if (++slot == stages) {
          slot = 0;
          ++round;
        }
      }
    }
    return;
  }

  const int g = lane >> 2, t4 = lane & 3;
  const int mrows = M - m0;
  const bool lo = g < mrows, hi = g + 8 < mrows;
  const __nv_bfloat16* x_lo = X + static_cast<long long>(m0 + (lo ? g : 0)) * K + warp * XK + 8 * t4;
  const __nv_bfloat16* x_hi = X + static_cast<long long>(m0 + (hi ? g + 8 : 0)) * K + warp * XK + 8 * t4;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // This thread's 16 bytes of W row g in a stage.
  const unsigned b_off = g * (2 * kChunkCols) + 2 * (warp * XK) + 16 * t4;
  const unsigned ring_addr = SmemAddr(ring);
  int slot = 0, s_all = 0;
  unsigned round = 0;
  for (int c = 0; c < chunks; ++c) {
    uint4 xl[kSteps], xh[kSteps];
    const long long k0 = static_cast<long long>(c) * kChunkCols;
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      xl[i] = lo ? __ldg(reinterpret_cast<const uint4*>(x_lo + k0 + 32 * i)) : zero;
      xh[i] = hi ? __ldg(reinterpret_cast<const uint4*>(x_hi + k0 + 32 * i)) : zero;
    }
    for (int s = 0; s < kGroups; ++s, ++s_all) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      WaitParity(SmemAddr(full + slot), round & 1);
      const unsigned base = ring_addr + slot * stage_bytes + b_off;
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const uint4 wv = LoadShared(base + 64 * i);
        Mma(acc, xl[i].x, xh[i].x, xl[i].y, xh[i].y, wv.x, wv.y);
        Mma(acc, xl[i].z, xh[i].z, xl[i].w, xh[i].w, wv.z, wv.w);
      }
      __syncwarp();
      if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddr(empty + slot)) : "memory");
      if (++slot == stages) {
        slot = 0;
        ++round;
      }
      float* rb = red + (s_all & 1) * (CW * 4 * 32);
#pragma unroll
      for (int r = 0; r < 4; ++r) rb[(warp * 4 + r) * 32 + lane] = acc[r];
      asm volatile("bar.sync 1, %0;" ::"n"(32 * CW) : "memory");
      // Token m, stage row n: lane (m % 8) * 4 + n / 2, register (m / 8) * 2 + n % 2.
      // Thread (m, n) alone updates sums[8s + n][m].
      if (threadIdx.x < 128) {
        const int m = threadIdx.x >> 3, n = threadIdx.x & 7;
        const int l = (m & 7) * 4 + (n >> 1), r = (m >> 3) * 2 + (n & 1);
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < CW; ++w) sum += rb[(w * 4 + r) * 32 + l];
        float& total = sums[(8 * s + n) * 16 + m];
        total = c == 0 ? sum : total + sum;
      }
    }
  }
  // Every stage's sums are in the table (the last writers passed no barrier
  // since: wait for them).
  asm volatile("bar.sync 1, %0;" ::"n"(32 * CW) : "memory");
  for (int o = threadIdx.x; o < 16 * (RPC / 2); o += 32 * CW) {
    const int m = o / (RPC / 2), c = o - m * (RPC / 2);
    if (m >= mrows || n0 + c >= N) continue;
    const float g = sums[c * 16 + m], u = sums[(RPC / 2 + c) * 16 + m];
    Y[static_cast<long long>(m0 + m) * N + n0 + c] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
  }
}
