// attention, Hopper template: causal softmax(q k^T / sqrt(D)) v with the
// bottom-right mask, bf16 in and out, fp32 scores, fp32 online softmax and
// fp32 accumulators, on warpgroup MMA (wgmma, sm_90a only). D = 128.
//
// q, o: [B, Sq, H, D]; k, v: [B, Skv, H, D], contiguous row-major: position i
// of head h of batch b is at ((b*S + i)*H + h)*D. Query i sees key j when
// j <= i + (Skv - Sq) and j < Skv.
//
// One CTA of WG warpgroups per (64*WG-query tile, head, batch), heaviest tiles
// first. Warpgroup w owns rows 64w .. 64w + 63 of the tile:
//   S = Q K^T   wgmma m64nBNk16, A = Q and B = K both from shared memory
//               (K-major: the D values of a row are contiguous), 8 k-steps;
//   online softmax on the fp32 accumulators in registers (exp2 with the
//               scale and log2(e) folded into one factor);
//   O += P V    wgmma m64nPVNk16 with A = P from registers and B = V from
//               shared memory, MN-major (the D values of a key are
//               contiguous), read through the descriptor's transpose bit.
// P keeps fp32 precision: each probability is split into a bf16 part and a
// bf16 remainder (hi = rn(p), lo = rn(p - hi), about 16 bits) and both go
// through the tensor cores, two wgmma's per 16 keys (1.5x FlashAttention's
// MMA work); rounding P to bf16 once fails the problem's strict check.
//
// Shared memory (1024-byte aligned): Q (64*WG rows), then STAGES pairs of
// K and V tiles (BN rows each). Every tile is stored as two 64-column halves,
// each a stack of 128-byte rows in the 128-byte swizzled layout the
// descriptors name (16-byte chunk c of row r at chunk c ^ (r % 8)). Q comes
// by cp.async (rows past Sq zero-filled); K and V by TMA, four boxes per
// stage (the plan's tensor maps; rows past Skv zero-filled), completing on
// the stage's "full" mbarrier. Step t issues S_t = Q K_t^T and then the
// previous tile's O += P_{t-1} V_{t-1}, and runs tile t's softmax while that
// P V is on the tensor cores (so the previous V stays resident: STAGES >= 3).
// PW = 1: a producer warpgroup (setmaxnreg: 24 registers, the consumers 240
// or 160) streams the tiles, each stage refilled once every consumer warp
// has arrived on its "empty" mbarrier, so the consumer warpgroups drift
// freely. PW = 0: no producer; a CTA barrier opens each step and thread 0
// starts the tile STAGES - 2 ahead. Key tiles past the last key a tile's
// bottom row sees are never loaded; a warpgroup skips the trailing tiles
// none of its rows sees and masks only the tiles that cross its diagonal or
// the end of the keys. No wgmma sits in a branch (ptxas would serialize
// them): tile 0 is peeled.
//
// The rescale factor follows docs/notes/attention-templates.md (flash v3):
// base = rn(m * scale), p = 2^(fma(s, scale, -base)), alpha = 2^(base_old -
// base_new), exactly 1 while a row's max stays.
//
// Entry: attn_wgmma(q, kmap, vmap, o, B, H, Sq, Skv), grid
// (ceil_div(Sq, 64 * WG), H, B), block 128 * (WG + PW), dynamic shared memory
// 1024 + 256 * (64 * WG + 2 * STAGES * BN) bytes; kmap and vmap are
// {"tensor_map": "k" / "v", "box": [64, 1, "BN", 1], "swizzle": "128B"}.
// Measured on an H200 (docs/notes/attention-templates.md, "wgmma").
#include <cuda_bf16.h>

#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef WG
#define WG 2
#endif
#ifndef PVN
#define PVN 128
#endif
#ifndef PW
#define PW 1
#endif
#ifndef PP
#define PP 1
#endif

#define HD 128
#define BM (64 * WG)
#define THREADS (128 * WG)          // consumer threads
#define NT_ALL (THREADS + 128 * PW)  // with PW, a producer warpgroup more
// With PW the registers are rebalanced (setmaxnreg): the producer warpgroup
// keeps 24, the consumers get the rest, in multiples of 8.
#define CONSUMER_REGS (WG == 2 ? 240 : 160)
#define HALF_Q (BM * 128)          // bytes of one 64-column half of the Q tile
#define HALF_KV (BN * 128)         // bytes of one 64-column half of a K or V tile
#define STAGE_BYTES (4 * HALF_KV)  // K and V of one stage
// Key tiles loaded ahead of the one computed: the previous tile's V is still
// read while tile t is computed, so two buffers are busy.
#define LEAD (STAGES - 2)

#if (BN != 64 && BN != 128) || (PVN != 64 && PVN != 128) || LEAD < 1 || WG < 1 || WG > 3
#error "attn_wgmma: BN and PVN are 64 or 128, STAGES >= 3, WG 1..3"
#endif
#if PP && !(PW && WG == 2)
#error "attn_wgmma: PP (ping-pong) needs PW = 1 and WG = 2"
#endif

namespace {

__device__ __forceinline__ void WgmmaSS64(float (&d)[32], unsigned long long a, unsigned long long b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
}

__device__ __forceinline__ void WgmmaSS128(float (&d)[64], unsigned long long a, unsigned long long b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
}

__device__ __forceinline__ void WgmmaRS64(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}

__device__ __forceinline__ void WgmmaRS128(float (&d)[64], const unsigned (&a)[4], unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)
      : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle. K-major (Q, K): rows of
// 128 bytes, 8-row groups 1024 bytes apart (stride byte offset); the leading
// byte offset is unused there. MN-major (V): the leading byte offset is the
// distance between 64-element column blocks along N, the stride byte offset
// again the distance between 8-row groups along K. (With PVN = 64 one
// wgmma reads a single 64-column block and both offsets are set to 1024.)
__device__ __forceinline__ unsigned long long Desc(unsigned address, unsigned lbo) {
  return (unsigned long long)((address & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

// 2^x on the special-function unit, subnormal results flushed to zero (a
// probability under 2^-126 of the row max adds nothing to a sum >= 1).
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void CopyAsync(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void WgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void WgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from touching accumulators across a wgmma wait.
template <int N>
__device__ __forceinline__ void Pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Rows [r0, r0 + ROWS) of a [positions][H][HD] tensor (rows `pos` elements
// apart) into a tile of two swizzled 64-column halves (`half` bytes apart);
// rows at or past `limit` are zeros.
template <int ROWS>
__device__ __forceinline__ void LoadTile(unsigned dst, const __nv_bfloat16* base, long long pos, int r0, int limit,
                                         unsigned half) {
#pragma unroll
  for (int c = threadIdx.x; c < ROWS * 16; c += THREADS) {
    const int r = c >> 4, ch = c & 15, row = r0 + r;
    const bool ok = row < limit;
    CopyAsync(dst + (ch >> 3) * half + r * 128 + (((ch & 7) ^ (r & 7)) << 4), base + (ok ? row : 0) * pos + ch * 8,
              ok);
  }
}

__device__ __forceinline__ unsigned PackBf16(float lo_col, float hi_col, float& rem0, float& rem1) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo_col, hi_col);  // .x (low half) = the lower column
  rem0 = lo_col - __low2float(h);
  rem1 = hi_col - __high2float(h);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ unsigned PackBf16(float lo_col, float hi_col) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo_col, hi_col);
  return *reinterpret_cast<unsigned*>(&h);
}

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define WGMMA_S CAT(WgmmaSS, BN)
#define WGMMA_PV CAT(WgmmaRS, PVN)

// CUtensorMap's layout: 128 opaque bytes, 64-byte aligned (cuda.h is a host
// header). The plan's maps view k and v as [B][Skv][H][D] (innermost first:
// D, H, Skv, B) with a box of 64 x 1 x BN x 1 and 128-byte swizzle: one box
// is one 64-column half of a key tile, rows past Skv zero-filled.
struct __align__(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ void TmaHalf(unsigned dst, const TensorMap& map, int d0, int h, int row, int b, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(
          dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(d0), "r"(h), "r"(row), "r"(b), "r"(bar)
      : "memory");
}

// Thread 0 starts the copy of key tile n (K and V, four boxes) into its
// stage, completing on the stage's mbarrier.
__device__ __forceinline__ void IssueTile(int n, unsigned sKV, unsigned bars, const TensorMap& kmap,
                                          const TensorMap& vmap, int h, int b) {
  const unsigned st = sKV + (n % STAGES) * STAGE_BYTES, bar = bars + (n % STAGES) * 8;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(STAGE_BYTES) : "memory");
  TmaHalf(st, kmap, 0, h, n * BN, b, bar);
  TmaHalf(st + HALF_KV, kmap, 64, h, n * BN, b, bar);
  TmaHalf(st + 2 * HALF_KV, vmap, 0, h, n * BN, b, bar);
  TmaHalf(st + 3 * HALF_KV, vmap, 64, h, n * BN, b, bar);
}

__device__ __forceinline__ void WaitBar(unsigned bar, unsigned parity) {
  for (unsigned done = 0; !done;) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// The top of key tile t's step, for all threads of the CTA: a barrier (every
// warpgroup is done with the stage of tile t - 2, whose V the P V of step
// t - 1 read last), thread 0 starts tile t + LEAD into that stage, and all
// wait for tile t.
// With PW the producer warp has started every tile as soon as its stage was
// released (Release), and the top only waits for tile t.
__device__ __forceinline__ void Top(int t, int ntiles, unsigned sKV, unsigned bars, const TensorMap& kmap,
                                    const TensorMap& vmap, int h, int b) {
#if !PW
  __syncthreads();
  if (threadIdx.x == 0 && t + LEAD < ntiles) IssueTile(t + LEAD, sKV, bars, kmap, vmap, h, b);
#endif
  WaitBar(bars + (t % STAGES) * 8, (t / STAGES) & 1);
}

// With PW: this warp is done with key tile t's stage (its wgmma's that read
// it have completed); the stage's empty barrier counts one arrival per
// consumer warp. Without PW the barrier at the top of each step does this.
// PP: the two consumer warpgroups take turns issuing their MMAs (named
// barriers 2 and 3), so that one's softmax runs while the other's MMAs do.
// Turn(wg) waits for the other warpgroup's pass; Pass(wg) hands the turn on.
__device__ __forceinline__ void Turn(int wg) {
#if PP
  asm volatile("bar.sync %0, 256;" ::"r"(2 + wg) : "memory");
#endif
}
__device__ __forceinline__ void Pass(int wg) {
#if PP
  asm volatile("bar.arrive %0, 256;" ::"r"(3 - wg) : "memory");
#endif
}

__device__ __forceinline__ void Release(int t, unsigned empty_bars) {
#if PW
  if ((threadIdx.x & 31) == 0)
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(empty_bars + (t % STAGES) * 8) : "memory");
#endif
}

// S = Q K^T for this warpgroup's 64 rows and one key tile (8 k-steps).
__device__ __forceinline__ void MmaS(float (&sacc)[BN / 2], unsigned aQ, unsigned cK) {
#pragma unroll
  for (int ks = 0; ks < HD / 16; ++ks)
    WGMMA_S(sacc, Desc(aQ + (ks >> 2) * HALF_Q + (ks & 3) * 32, 16), Desc(cK + (ks >> 2) * HALF_KV + (ks & 3) * 32, 16),
            ks > 0);
}

// Masks tile k0's scores where needed, updates the running max m and sum l,
// turns the scores into p and returns the rescale factor of O per row half.
// Accumulator layout (m64nN): warp w of the warpgroup holds rows 16w ..
// 16w + 15; in 8-column block j, lane (g, t4) holds (g, 8j + 2t4 + e) in
// d[4j + e] and (g + 8, 8j + 2t4 + e) in d[4j + 2 + e], e = 0, 1.
__device__ __forceinline__ void Softmax(float (&sacc)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2], int k0,
                                        int row_a, int wrow0, int off, int Skv, float sl2) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int t4 = threadIdx.x & 3;
  if (k0 + BN > Skv || k0 + BN - 1 > wrow0 + off) {  // the tile crosses the diagonal or the end of the keys
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = row_a + ((e >> 1) << 3), jj = k0 + 8 * j + 2 * t4 + (e & 1);
        if (!(jj < Skv && jj <= i + off)) sacc[4 * j + e] = NEG_INF;
      }
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = NEG_INF;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(sacc[4 * j + 2 * hf], sacc[4 * j + 2 * hf + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[hf], mx);
    const float m_use = m_new == NEG_INF ? 0.0f : m_new;  // a row that sees no key yet
    const float base = __fmul_rn(m_use, sl2);               // rounded once, never contracted
    alpha[hf] = Exp2(__fmul_rn(m[hf], sl2) - base);        // m = -inf: 0
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 2 * hf; e < 2 * hf + 2; ++e) {
        const float p = Exp2(fmaf(sacc[4 * j + e], sl2, -base));  // -inf: 0
        sacc[4 * j + e] = p;
        sum += p;
      }
    l[hf] = l[hf] * alpha[hf] + sum;
    m[hf] = m_new;
  }
}

__device__ __forceinline__ void Rescale(float (&oacc)[HD / PVN][PVN / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int c = 0; c < HD / PVN; ++c)
#pragma unroll
    for (int j = 0; j < PVN / 8; ++j) {
      oacc[c][4 * j] *= alpha[0];
      oacc[c][4 * j + 1] *= alpha[0];
      oacc[c][4 * j + 2] *= alpha[1];
      oacc[c][4 * j + 3] *= alpha[1];
    }
}

// P as the A operand, split into hi + lo: for keys 16kk .. 16kk + 15 the
// m16n8k16-style fragment {(g, 2t4), (g + 8, 2t4), (g, 2t4 + 8),
// (g + 8, 2t4 + 8)}, i.e. accumulator blocks 2kk and 2kk + 1 of S.
__device__ __forceinline__ void SplitP(const float (&sacc)[BN / 2], unsigned (&phi)[BN / 16][4],
                                       unsigned (&plo)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int d0 = 8 * kk + 2 * r;  // = 4 * (2kk + (r >> 1)) + 2 * (r & 1)
      float r0, r1;
      phi[kk][r] = PackBf16(sacc[d0], sacc[d0 + 1], r0, r1);
      plo[kk][r] = PackBf16(r0, r1);
    }
}

// O += P V for one key tile: per 16 keys, the hi and the lo part of P
// against the same V rows (MN-major, transposed by the tensor cores).
__device__ __forceinline__ void PV(float (&oacc)[HD / PVN][PVN / 2], const unsigned (&phi)[BN / 16][4],
                                   const unsigned (&plo)[BN / 16][4], unsigned cV) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int c = 0; c < HD / PVN; ++c) {
      const unsigned long long dv = Desc(cV + kk * 16 * 128 + c * HALF_KV, PVN == 128 ? HALF_KV : 1024);
      WGMMA_PV(oacc[c], phi[kk], dv);
      WGMMA_PV(oacc[c], plo[kk], dv);
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(NT_ALL, 1)
attn_wgmma(const __nv_bfloat16* __restrict__ q, const __grid_constant__ TensorMap kmap,
           const __grid_constant__ TensorMap vmap, __nv_bfloat16* __restrict__ o, int B, int H, int Sq, int Skv) {
  extern __shared__ unsigned char shared_raw[];
  const unsigned sQ = ((unsigned)__cvta_generic_to_shared(shared_raw) + 1023u) & ~1023u;
  const unsigned sKV = sQ + 2 * HALF_Q;
  const float NEG_INF = -__int_as_float(0x7f800000);

  const int wg = threadIdx.x >> 7, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const int g = lane >> 2, t4 = lane & 3;
  const int qtile = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  const int q0 = qtile * BM, off = Skv - Sq;
  const int wrow0 = q0 + wg * 64;             // this warpgroup's first query row
  const int row_a = wrow0 + warp * 16 + g;    // this thread's rows: row_a and row_a + 8
  const long long pos = (long long)H * HD;
  const __nv_bfloat16* qb = q + ((long long)b * Sq * H + h) * HD;
  const float sl2 = rsqrtf((float)HD) * 1.4426950408889634f;  // softmax scale times log2(e)

  const int kend = min(Skv, q0 + BM + off);  // keys [0, kend) are visible to some row of the tile
  const int ntiles = (kend + BN - 1) / BN;
  const int wg_last = wrow0 + 63 + off;       // the last key any row of this warpgroup sees

  // full: key tile landed (one arrival and the bytes); empty (PW only): every
  // consumer warp is done with the stage.
  __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
  const unsigned bars = (unsigned)__cvta_generic_to_shared(full_bar);
  const unsigned empty_bars = (unsigned)__cvta_generic_to_shared(empty_bar);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bars + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(empty_bars + 8 * s), "r"(4 * WG));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
#if PW
  if (wg == WG) {  // the producer warpgroup: one thread streams every key tile
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory");
    if (threadIdx.x == THREADS)
      for (int n = 0; n < ntiles; ++n) {
        if (n >= STAGES) WaitBar(empty_bars + (n % STAGES) * 8, ((n / STAGES) - 1) & 1);
        IssueTile(n, sKV, bars, kmap, vmap, h, b);
      }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS) : "memory");
#else
  if (threadIdx.x == 0)
    for (int s = 0; s < LEAD && s < ntiles; ++s) IssueTile(s, sKV, bars, kmap, vmap, h, b);
#endif
  LoadTile<BM>(sQ, qb, pos, q0, Sq, HALF_Q);
  CommitCopies();
  WaitCopies<0>();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // Q, written by cp.async, is read by wgmma
#if PW
  asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory");  // Q is in, for all consumer warps
#endif
  // (without PW the barrier at the top of tile 0's step publishes Q)

  float oacc[HD / PVN][PVN / 2];
#pragma unroll
  for (int c = 0; c < HD / PVN; ++c)
#pragma unroll
    for (int i = 0; i < PVN / 2; ++i) oacc[c][i] = 0.0f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
  const unsigned aQ = sQ + wg * 64 * 128;
  // P of the last tile, as the A operand (see SplitP).
  unsigned phi[BN / 16][4], plo[BN / 16][4];
  float sacc[BN / 2], alpha[2];
  // Key tiles [0, nvis) hold keys some row of this warpgroup sees (at least
  // tile 0, since every row sees key 0); the CTA's other warpgroup may need
  // more, so the loads and barriers run to ntiles. No wgmma sits in a branch
  // (ptxas serializes wgmma's on divergent paths): tile 0 is peeled.
  const int nvis = min(ntiles, wg_last / BN + 1);
#if PP
  // Each warpgroup issues MMAs nvis + 1 times (S_0, S_t with P_{t-1} V_{t-1},
  // the last P V); the one with fewer turns takes empty ones at the end, and
  // warpgroup 1 hands warpgroup 0 the first turn and skips its last pass.
  const int nturns = max(min(ntiles, (q0 + 63 + off) / BN + 1), min(ntiles, (q0 + 127 + off) / BN + 1)) + 1;
  if (wg == 1) Pass(1);
#endif

  Top(0, ntiles, sKV, bars, kmap, vmap, h, b);
  Turn(wg);
  WgmmaFence();
  MmaS(sacc, aQ, sKV);
  WgmmaCommit();
  Pass(wg);
  WgmmaWait<0>();
  Pin(sacc);
  Softmax(sacc, m, l, alpha, 0, row_a, wrow0, off, Skv, sl2);
  SplitP(sacc, phi, plo);  // O is still zero: no rescale
  for (int t = 1; t < nvis; ++t) {
    Top(t, ntiles, sKV, bars, kmap, vmap, h, b);
    const unsigned cK = sKV + (t % STAGES) * STAGE_BYTES;
    const unsigned pV = sKV + ((t - 1) % STAGES) * STAGE_BYTES + 2 * HALF_KV;
    Turn(wg);
    WgmmaFence();
    MmaS(sacc, aQ, cK);
    WgmmaCommit();
    // The previous tile's O += P V runs on the tensor cores while this
    // tile's softmax runs on the ALUs.
    PV(oacc, phi, plo, pV);
    WgmmaCommit();
    Pass(wg);
    WgmmaWait<1>();  // S is done
    Pin(sacc);
    Softmax(sacc, m, l, alpha, t * BN, row_a, wrow0, off, Skv, sl2);
    WgmmaWait<0>();  // P V is done: its P registers and O are free again
#pragma unroll
    for (int c = 0; c < HD / PVN; ++c) Pin(oacc[c]);
    Release(t - 1, empty_bars);
    Rescale(oacc, alpha);
    SplitP(sacc, phi, plo);
  }
  Turn(wg);
  WgmmaFence();
  PV(oacc, phi, plo, sKV + ((nvis - 1) % STAGES) * STAGE_BYTES + 2 * HALF_KV);
  WgmmaCommit();
#if PP
  if (!(wg == 1 && nvis + 1 == nturns)) Pass(wg);
  for (int i = nvis + 1; i < nturns; ++i) {
    Turn(wg);
    if (!(wg == 1 && i == nturns - 1)) Pass(wg);
  }
#endif
  WgmmaWait<0>();
#pragma unroll
  for (int c = 0; c < HD / PVN; ++c) Pin(oacc[c]);
  Release(nvis - 1, empty_bars);
  for (int t = nvis; t < ntiles; ++t) {  // the other warpgroup's tiles
    Top(t, ntiles, sKV, bars, kmap, vmap, h, b);
    Release(t, empty_bars);
  }

#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float lsum = l[hf];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
    const int i = row_a + 8 * hf;
    if (i >= Sq) continue;
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    __nv_bfloat16* dst = o + ((long long)b * Sq + i) * pos + (long long)h * HD;
#pragma unroll
    for (int c = 0; c < HD / PVN; ++c)
#pragma unroll
      for (int j = 0; j < PVN / 8; ++j)
        *reinterpret_cast<__nv_bfloat162*>(dst + c * PVN + 8 * j + 2 * t4) =
            __floats2bfloat162_rn(oacc[c][4 * j + 2 * hf] * inv, oacc[c][4 * j + 2 * hf + 1] * inv);
  }
#if PW
  }  // consumers
#endif
}
