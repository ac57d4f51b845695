// linear, decode template "streamk" (M <= 16, any K that CW * XK divides):
// Y = X · Wᵀ with W streamed once through a shared-memory ring of 8-row
// stages, the rows cut into K chunks. The generalization of "stream"'s
// MODE 1 (template_stream.cu, which needs K == CW * XK) to K = 14336, the
// down projection, and to CTAs of few rows (N = 4096 over 132 SMs).
//
// X is M x K, W is N x K (nn.Linear), Y is M x N, all bf16 row-major. CTA
// (bx, by) owns W rows RPC·bx .. +RPC and tokens 16·by .. +16 (M > 16 runs
// ceil_div(M, 16) token groups, each streaming W again: correct, not fast).
//
// A stage is 8 consecutive rows of W by KC = CW · XK columns: 8 bulk copies
// (cp.async.bulk, no tensor map) of 2·KC bytes, or one contiguous copy when
// KC == K, issued by lanes of one producer warp into a ring of STAGES
// buffers, each completing on an mbarrier, with an L2 evict-first policy
// (EF 1). The walk is chunk-major: for each of the K / KC chunks, the CTA's
// RPC / 8 row groups in order. CW consumer warps multiply on the tensor cores
// (mma.sync m16n8k16, bf16 in, fp32 accumulation): the tokens are the A
// operand (m16; rows past M are zero) and the 8 rows the B operand (n8).
// Consumer warp w owns columns w·XK .. (w+1)·XK of every chunk; it loads its
// X slice of a chunk (16 tokens × XK) into registers when the chunk starts
// (the ring keeps streaming meanwhile). After each stage the CW warps' 16 × 8
// partial sums are added in warp order (double-buffered, one named barrier
// per stage) and accumulated in chunk order into an fp32 table of the CTA's
// RPC × 16 outputs in shared memory; after the last chunk each output is
// rounded once and stored. Deterministic: no atomics, no workspace.
//
// Fragments: within each 32-wide k step, thread (g = lane / 4, t = lane % 4)
// reads k = 8t .. 8t+7 (16 bytes) of W row g from shared memory and of its
// token rows g, g + 8 from its X registers; words 0/1 feed one k16 mma and
// words 2/3 the next. The mma's own k order differs from memory order but
// the same permutation applies to W and X, so every product is formed.
//
// Rows past N are neither copied nor stored; tokens past M are zero and not
// stored.
//
// Grid: (ceil_div(N, RPC), ceil_div(M, 16), 1), block 32 * CW + 32; dynamic
// shared memory 256 + 1024 * CW + 64 * RPC + STAGES * 16 * CW * XK (the ring
// depth is read back from %dynamic_smem_size). Needs K % (CW * XK) == 0 and
// RPC % 8 == 0.
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

#if RPC % 8 != 0
#error "RPC must be a multiple of 8"
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
linear_streamk(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
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
  const int n0 = blockIdx.x * RPC, m0 = blockIdx.y * 16;
  const int chunks = K / kChunkCols;
  constexpr int kGroups = RPC / 8;

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
        const int row0 = n0 + 8 * s;
        int rows = N - row0;
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
  for (int o = threadIdx.x; o < 16 * RPC; o += 32 * CW) {
    const int m = o / RPC, rr = o - m * RPC;
    if (m < mrows && n0 + rr < N) Y[static_cast<long long>(m0 + m) * N + n0 + rr] = __float2bfloat16_rn(sums[rr * 16 + m]);
  }
}
