// linear_swiglu, prefill template "tma": Y = silu(X · Wgᵀ) · (X · Wuᵀ) on
// Hopper, one GEMM over the merged weight [Wg; Wu] whose epilogue combines
// the two halves: linear's "tma" GEMM (problems/linear/template_tma.cu: a
// producer warpgroup issuing TMA copies of X and W into a ring of STAGES
// 128B-swizzled buffers, two consumer warpgroups each computing 64 rows of a
// 128 x BN tile with wgmma m64nBNk16, persistent CTAs walking the tiles in
// groups of GM tile rows, CL = 2 pairing vertically adjacent tiles in a
// cluster that multicasts W; see that file and docs/notes/linear-templates.md).
//
// X is M x K, W is 2N x K (rows 0 .. N-1 gate, N .. 2N-1 up), Y is M x N,
// all bf16 row-major. The B tile of output columns n0 .. n0 + BN/2 - 1 is
// BN/2 gate rows n0 .. and BN/2 up rows N + n0 .. (two TMA boxes; with CL = 2
// each CTA of the pair copies one and multicasts it), so a thread's
// accumulators hold gate column c in block j and up column c in block
// j + BN/16: the epilogue computes silu(g) * u in fp32 from registers,
// rounds once, and stores through 64 x 64 staging boxes with TMA as linear's
// EPI 1 does. Gate rows past N that a box reaches belong to the up half or
// are zero; they only feed columns past N, which the store clips.
//
// Plan: grid min(ceil_div(M, 128 * CL) * ceil_div(N, BN / 2), SMS / CL) * CL,
// block 384, dynamic shared memory STAGES * (128 + BN) * 128 + 32768 + 1024
// bytes; tensor maps X box {64, min(128, M)}, W box {64, min(BN / 2, N)} and
// Y box {64, min(64, M)}, all 128B swizzle. Needs K % 64 == 0, N % 8 == 0 and
// BN 128 or 256; any M >= 1. sm_90a only.
#include <cuda_bf16.h>

#ifndef BN
#define BN 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GM
#define GM 8
#endif
#ifndef CL
#define CL 2
#endif
#ifndef SMS
#define SMS 132
#endif

#define BM 128
#define X_STAGE_BYTES (BM * 128)
#define STAGE_BYTES ((BM + BN) * 128)
#define HALF (BN / 2)     // gate (and up) rows of a W tile: its output columns
#define SHARERS CL        // CTAs whose consumers read a stage's copies
#define OUT_BOXES (HALF / 64)  // 64-column output boxes of a consumer's rows

#if BN != 128 && BN != 256
#error "BN must be 128 or 256 (whole 64-column output boxes)"
#endif
#if CL != 1 && CL != 2
#error "CL must be 1 or 2"
#endif
#if STAGES < 2
#error "STAGES must be at least 2"
#endif

struct __align__(64) TensorMap {
  unsigned long long opaque[16];
};

namespace {

#if BN == 256
__device__ __forceinline__ void Wgmma(float (&d)[128], unsigned long long a, unsigned long long b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
}
#elif BN == 192
__device__ __forceinline__ void Wgmma(float (&d)[96], unsigned long long a, unsigned long long b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
      "}, %96, %97, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
}
#elif BN == 128
__device__ __forceinline__ void Wgmma(float (&d)[64], unsigned long long a, unsigned long long b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
}
#else
#error "BN must be 128, 192 or 256"
#endif

// Shared-memory matrix descriptor: K-major, 128-byte swizzle, rows of 128
// bytes, 8-row groups 1024 bytes apart (stride byte offset); the leading byte
// offset is unused in this layout (set to 1).
__device__ __forceinline__ unsigned long long Descriptor(unsigned address) {
  return (unsigned long long)((address & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void BarrierInit(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void BarrierWait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void ArriveExpect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// One arrival on the barrier at the same offset in every CTA of the cluster
// (this CTA's own with CL = 1).
__device__ __forceinline__ void ReleaseStage(unsigned bar) {
#if SHARERS == 1
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#else
#pragma unroll
  for (unsigned r = 0; r < SHARERS; ++r) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(r));
    // Default semantics (release at CTA scope): the stage's only readers are
    // this warp's completed wgmma's, so no cluster-scope fence is needed.
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
  }
#endif
}

__device__ __forceinline__ void TmaLoad(unsigned dst, const TensorMap& map, unsigned bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

#if SHARERS > 1
// The same box into the same offset of every CTA of the cluster; each CTA's
// barrier at `bar`'s offset is credited with the bytes it receives.
__device__ __forceinline__ void TmaLoadMulticast(unsigned dst, const TensorMap& map, unsigned bar, int x, int y) {
  const unsigned short mask = (1u << CL) - 1;
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(bar), "h"(mask)
      : "memory");
}
#endif

#if CL > 1
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
#endif

template <int N>
__device__ __forceinline__ void WaitWgmma() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator registers across a wgmma wait.
__device__ __forceinline__ void Pin(float (&d)[BN / 2]) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Output unit u (a CL*128 x BN block of Y) -> its first row and column, in
// groups of GM unit rows walked down the rows first.
__device__ __forceinline__ void UnitOrigin(int u, int units_m, int units_n, int& um, int& un) {
  const int group = u / (GM * units_n), first = group * GM;
  const int rows = min(units_m - first, GM);
  const int in_group = u - group * (GM * units_n);
  um = first + in_group % rows;
  un = in_group / rows;
}


__device__ __forceinline__ void TmaStore(const TensorMap& map, unsigned src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<unsigned long long>(&map)),
               "r"(x), "r"(y), "r"(src)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

}  // namespace

extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(384, 1)
    linear_swiglu_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map,
                      const __grid_constant__ TensorMap y_map, int M, int N, int K);

// The definition (the declaration above carries the cluster shape).
extern "C" __global__ void __launch_bounds__(384, 1)
    linear_swiglu_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map,
                      const __grid_constant__ TensorMap y_map, int M, int N, int K) {
  extern __shared__ unsigned char shared_raw[];
  __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(shared_raw) + 1023u) & ~1023u;
  const unsigned full0 = (unsigned)__cvta_generic_to_shared(full_bar);
  const unsigned empty0 = (unsigned)__cvta_generic_to_shared(empty_bar);

  unsigned rank = 0;
#if CL > 1
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  const int units_m = (M + BM * CL - 1) / (BM * CL), units_n = (N + HALF - 1) / HALF;
  const int units = units_m * units_n;
  const int cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
  const int tiles_k = K / 64;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      BarrierInit(full0 + 8 * s, 1);
      BarrierInit(empty0 + 8 * s, 8 * SHARERS);  // 8 consumer warps in each CTA the stage's copies reach
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
#if CL > 1
  ClusterSync();
#else
  __syncthreads();
#endif

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
    if (threadIdx.x == 0) {
      // The box heights of the plan's maps: min(128, M) rows of X, min(BN / 2, N) of W
      // (a gate box and an up box reach every CTA).
      const unsigned stage_tx = (unsigned)(min(BM, M) + 2 * min(HALF, N)) * 128u;
      int stage = 0;
      unsigned phase = 0;
      for (int u = cluster; u < units; u += clusters) {
        int um, un;
        UnitOrigin(u, units_m, units_n, um, un);
        const int m0 = (um * CL + (int)rank) * BM, n0 = un * HALF;
        for (int kt = 0; kt < tiles_k; ++kt) {
          BarrierWait(empty0 + 8 * stage, phase ^ 1);
          const unsigned full = full0 + 8 * stage;
          const unsigned buf = base + stage * STAGE_BYTES;
          ArriveExpect(full, stage_tx);
          TmaLoad(buf, x_map, full, kt * 64, m0);
#if SHARERS == 1
          TmaLoad(buf + X_STAGE_BYTES, w_map, full, kt * 64, n0);
          TmaLoad(buf + X_STAGE_BYTES + HALF * 128, w_map, full, kt * 64, N + n0);
#else
          // Rank 0 copies the gate rows, rank 1 the up rows, each to both CTAs.
          TmaLoadMulticast(buf + X_STAGE_BYTES + rank * HALF * 128, w_map, full, kt * 64, (int)rank * N + n0);
#endif
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
    const int cw = wg - 1;  // which 64 rows of the tile
    const int lane = threadIdx.x & 31, q = (threadIdx.x >> 5) & 3;
    // Two 64 x 64 staging boxes of this warpgroup's output, 8 KB each, used in turn.
    const unsigned out_buf = base + STAGES * STAGE_BYTES + cw * 16384;
    const bool leader = (threadIdx.x & 127) == 0;
    unsigned boxes = 0;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
    int stage = 0;
    unsigned phase = 0;
    for (int u = cluster; u < units; u += clusters) {
      int um, un;
      UnitOrigin(u, units_m, units_n, um, un);
      const int m0 = (um * CL + (int)rank) * BM, n0 = un * HALF;
      int prev = 0;
      for (int kt = 0; kt < tiles_k; ++kt) {
        BarrierWait(full0 + 8 * stage, phase);
        const unsigned a = base + stage * STAGE_BYTES + cw * 64 * 128;
        const unsigned b = base + stage * STAGE_BYTES + X_STAGE_BYTES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) Wgmma(d, Descriptor(a + ks * 32), Descriptor(b + ks * 32), kt > 0 || ks > 0);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        WaitWgmma<1>();
        Pin(d);
        // The previous slice's wgmma's have completed: its buffer is free.
        if (kt > 0 && lane == 0) ReleaseStage(empty0 + 8 * prev);
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      WaitWgmma<0>();
      Pin(d);
      if (lane == 0) ReleaseStage(empty0 + 8 * prev);

      // Accumulator layout of m64nBN: warp q of the warpgroup holds rows 16q ..
      // 16q + 15; in each 8-column block j, lane (g, t) holds (g, 2t), (g, 2t+1),
      // (g+8, 2t), (g+8, 2t+1) in d[4j .. 4j+3]. Gate column c is in block j,
      // its up column in block j + BN / 16 of the same thread. Output box ob is
      // columns 64ob .. 64ob + 63, written into shared memory in the
      // 128B-swizzled layout of the Y map (16-byte chunk c of row r at
      // c ^ (r % 8): a warp's 32 four-byte stores hit 32 banks) and stored by
      // one TMA copy, which clips rows past M and columns past N. A buffer is
      // rewritten only after the copy issued from it two boxes earlier has
      // read it (wait_group.read 1).
#pragma unroll
      for (int ob = 0; ob < OUT_BOXES; ++ob, ++boxes) {
        const unsigned buf = out_buf + (boxes & 1) * 8192;
        if (leader) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int j = 8 * ob + jj, ju = j + BN / 16;
            const unsigned r = q * 16 + (lane >> 2) + 8 * h;
            const float g0 = d[4 * j + 2 * h], g1 = d[4 * j + 2 * h + 1];
            const __nv_bfloat162 v = __floats2bfloat162_rn(g0 / (1.0f + expf(-g0)) * d[4 * ju + 2 * h],
                                                           g1 / (1.0f + expf(-g1)) * d[4 * ju + 2 * h + 1]);
            const unsigned addr = buf + r * 128 + (((unsigned)jj ^ (r & 7)) << 4) + 4 * (lane & 3);
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(*reinterpret_cast<const unsigned*>(&v))
                         : "memory");
          }
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
        if (leader) TmaStore(y_map, buf, n0 + 64 * ob, m0 + cw * 64);
      }
    }
    // The shared buffers stay allocated until the last copies are done.
    if (leader) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
#if CL > 1
  // No CTA of the cluster leaves while a peer may still arrive on its
  // barriers or multicast into its buffers.
  __syncwarp();
  ClusterSync();
#endif
}
