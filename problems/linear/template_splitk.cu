// linear, decode template (M <= 16): Y = X · Wᵀ with the weights streamed once.
//
// X is M x K, W is N x K (nn.Linear), Y is M x N, all bf16 row-major. At
// decode sizes the op is a read of W (N·K·2 bytes) at memory bandwidth; the
// arithmetic (16·N·K multiply-adds at M = 16) is too much for fp32 FMA at
// that speed, so it runs on the tensor cores: mma.sync m16n8k16 (bf16 in,
// fp32 accumulation) with the up-to-16 rows of X as the A operand (rows past
// M are zero) and 8 rows of W as the B operand.
//
// Block: KW warps. Block (bx, by) computes Y[16·by .. +16][8·NT·bx .. +8·NT]:
// every warp owns the same NT tiles of 8 rows of W and a share of K (64-wide
// chunks; SPAN 0: c = warp, warp + KW, warp + 2·KW, …, the KW warps side by
// side along each row; SPAN 1: a contiguous run of K / 64 / KW chunks per
// warp), so each W row is read once, 128 contiguous bytes per warp and chunk.
// The KW partial sums of every output are added in shared memory in warp
// order (deterministic), and each output is rounded to bf16 once.
//
// Fragments come straight from global memory, 16 bytes per load: in a chunk
// thread (g = lane / 4, t = lane % 4) reads k = t·8 .. t·8+7 and
// 32 + t·8 .. 32 + t·8+7 of row g of the W tile (and of rows g and g+8 of X).
// The mma's own k order inside a chunk differs from the memory order, but
// the same permutation applies to X and W, so every product X[m][k]·W[n][k]
// is formed and only the order of the fp32 additions changes.
//
// The loop issues the loads of U chunks before their mma's (U·NT·2 + U·4
// 16-byte loads in flight per thread). W is read with L1 no-allocate (it is
// streamed once); X (at most 16 rows) stays in L1/L2.
//
// Grid: (ceil_div(N, 8 * NT), ceil_div(M, 16), 1), block 32 * KW.
// Needs K % 64 == 0 (rows 16-byte aligned, whole chunks); any M, N >= 1
// (M > 16 runs ceil_div(M, 16) row groups, each reading all of W).
#include <cuda_bf16.h>

#ifndef NT
#define NT 2
#endif
#ifndef KW
#define KW 8
#endif
#ifndef U
#define U 2
#endif
#ifndef SPAN
#define SPAN 0
#endif

namespace {

__device__ __forceinline__ uint4 LoadStream(const __nv_bfloat16* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 LoadCached(const __nv_bfloat16* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

__device__ __forceinline__ unsigned Word(const uint4 (&v)[2], int w) {
  const uint4& q = v[w >> 2];
  switch (w & 3) {
    case 0: return q.x;
    case 1: return q.y;
    case 2: return q.z;
    default: return q.w;
  }
}

__device__ __forceinline__ void Mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                    unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * KW)
linear_splitk(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W, __nv_bfloat16* __restrict__ Y,
              int M, int N, int K) {
  __shared__ float partial[KW][NT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * (8 * NT), m0 = blockIdx.y * 16;
  const bool lo = m0 + g < M, hi = m0 + g + 8 < M;
  const __nv_bfloat16* x_lo = X + (long long)(lo ? m0 + g : 0) * K + t * 8;
  const __nv_bfloat16* x_hi = X + (long long)(hi ? m0 + g + 8 : 0) * K + t * 8;
  const __nv_bfloat16* w_row[NT];
  bool w_ok[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int n = n0 + 8 * j + g;
    w_ok[j] = n < N;
    w_row[j] = W + (long long)(w_ok[j] ? n : 0) * K + t * 8;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  const int chunks = K / 64;
  // SPAN 0: chunk c of warp w at iteration i, unrolled step u: w + (i·U + u)·KW
  // (the warps of a block side by side along each row); SPAN 1: each warp
  // a contiguous run of ceil(chunks / KW) chunks.
  const int span = (chunks + KW - 1) / KW;
  const int first = SPAN ? warp * span : warp, stride = SPAN ? 1 : KW;
  const int end = SPAN ? min(chunks, first + span) : chunks;
  for (int c0 = first; c0 < end; c0 += stride * U) {
    uint4 wv[U][NT][2], xl[U][2], xh[U][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * stride;
      const bool in = c < end;
      const long long k = (long long)c * 64;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        wv[u][j][0] = in && w_ok[j] ? LoadStream(w_row[j] + k) : zero;
        wv[u][j][1] = in && w_ok[j] ? LoadStream(w_row[j] + k + 32) : zero;
      }
      xl[u][0] = in && lo ? LoadCached(x_lo + k) : zero;
      xl[u][1] = in && lo ? LoadCached(x_lo + k + 32) : zero;
      xh[u][0] = in && hi ? LoadCached(x_hi + k) : zero;
      xh[u][1] = in && hi ? LoadCached(x_hi + k + 32) : zero;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const unsigned a0 = Word(xl[u], 2 * s), a1 = Word(xh[u], 2 * s);
        const unsigned a2 = Word(xl[u], 2 * s + 1), a3 = Word(xh[u], 2 * s + 1);
#pragma unroll
        for (int j = 0; j < NT; ++j) Mma(acc[j], a0, a1, a2, a3, Word(wv[u][j], 2 * s), Word(wv[u][j], 2 * s + 1));
      }
    }
  }

#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) partial[warp][j * 4 + r][lane] = acc[j][r];
  }
  __syncthreads();
  // Output i of the block: fragment register r of tile j in lane l, with
  // i = (j * 4 + r) * 32 + l: row g + 8 * (r / 2), column 8 * j + 2 * t + r % 2.
  for (int i = threadIdx.x; i < NT * 4 * 32; i += 32 * KW) {
    const int jr = i >> 5, l = i & 31;
    const int j = jr >> 2, r = jr & 3;
    const int m = m0 + (l >> 2) + 8 * (r >> 1), n = n0 + 8 * j + 2 * (l & 3) + (r & 1);
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < KW; ++w) sum += partial[w][jr][l];
    if (m < M && n < N) Y[(long long)m * N + n] = __float2bfloat16_rn(sum);
  }
}
