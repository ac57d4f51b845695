// linear, prefill template "tma": Y = X · Wᵀ on Hopper with the Tensor Memory
// Accelerator feeding warpgroup MMA, warp-specialized and persistent.
//
// X is M x K, W is N x K (nn.Linear), Y is M x N, all bf16 row-major; both
// operands are K-major, the layout wgmma reads without transposition.
//
// A CTA of three warpgroups (384 threads). Warpgroup 0 is the producer: it
// gives its registers away (setmaxnreg 40) and one of its threads issues the
// TMA copies (cp.async.bulk.tensor) of 64-wide K slices of X (128 rows) and W
// (BN rows) into a ring of STAGES shared-memory buffers, each stored in the
// 128-byte swizzled layout (the tensor maps' "128B" swizzle, which is the
// layout the wgmma descriptors name; every buffer 1024-byte aligned).
// Warpgroups 1 and 2 are the consumers (setmaxnreg 232): each computes 64
// rows of the 128 x BN output tile with wgmma.mma_async m64nBNk16 (bf16 in,
// fp32 accumulators in registers, BN / 2 per thread), one wgmma group in
// flight. Two mbarriers per stage: "full" (one arrival, the producer's
// expect_tx, plus the copies' bytes) and "empty" (one arrival per consumer
// warp of every CTA that the stage's copies write into, made once that warp's
// wgmma's reading the stage have completed).
//
// Persistent: the grid is at most SMS CTAs, and each walks the output tiles
// with a stride of the grid, in groups of GM tile rows (down a group's rows
// first) so that the tiles in progress at one time share rows of X and W in
// L2. The ring's position carries over from tile to tile, so the producer
// loads the next tile's first stages while the consumers store this one.
//
// CL = 2 pairs CTAs in a cluster on vertically adjacent tiles (the same
// columns n0 .. n0 + BN - 1): each CTA copies its own X tile and half of the
// W tile, multicast into both CTAs' buffers, which cuts the L2 -> SM traffic
// per CTA from (128 + BN) to (128 + BN / 2) rows per K slice. A stage is
// then free only when the consumers of both CTAs released it. CL = 4 (not in
// the tuning space; measured at half the speed on the H200: 32 four-CTA
// clusters do not stay resident) is the same with four CTAs on four
// vertically adjacent tiles, each copying a quarter of the W tile: 128 +
// BN / 4 rows per K slice (plan: SMS 128, so that 32 clusters of four fit).
//
// TAIL = 1 (the default; CL = 2, EPI = 1, BN 128 or 256; 1.5-2% faster at
// prefill on the H200 than TAIL = 0, docs/notes/linear-templates.md) cuts a
// last round at most half full into strips of BN / 2 columns, one per
// cluster, so that it takes about half a round on twice as many SMs, with no
// workspace and no second launch (see the Tail helpers below). The plan is
// the same with TAIL = 0.
//
// BN = 320 (opt-in, with TAIL = 0 and STAGES = 3, the most that fit; CL 2 or
// 4, so that a CTA's W box is at most 256 rows) is the tile width cuBLASLt
// picks at prefill: 22 rounds of 128 x 320 tiles instead of 28 of 128 x 256
// (14336 = 44.8 x 320). Each consumer issues two m64n160k16 a k step. With
// three stages it measured 2% slower than the default at prefill on the H200
// (and STAGES = 3 at BN 256 3.7% slower than 4): the ring is too short.
//
// SK = 1 (opt-in, with TAIL = 0: 1% faster at prefill, slower at square on the H200) splits the last round of tiles along K when it
// is at most half full, through fp32 partials in the workspace "ws" and a
// second kernel, linear_tma_fixup (see Tail below). STAG > 0 (opt-in:
// no measurable gain with EPI = 1) staggers the two consumers by STAG K slices in each tile so that
// one's epilogue overlaps the other's MMAs.
//
// Epilogue, EPI = 0: each accumulator is rounded once to bf16 (round to
// nearest even) and stored straight from registers, with bounds checks on M and N. Rows
// and columns of a box past the tensor's edge are zero-filled by TMA (or, for
// a box clipped to min(128, M) rows, left unwritten): they only reach outputs
// that are never stored.
//
// EPI = 1 (the default; 8% faster at prefill and 11% at square than EPI = 0
// on the H200, docs/notes/linear-templates.md) stages the epilogue instead: each consumer rounds its 64 x BN
// rows into two 8 KB 128B-swizzled 64 x 64 boxes in turn and one thread
// stores each box with a TMA copy (cp.async.bulk.tensor, shared to global,
// which clips at the tensor's edge), so the consumers move on to the next
// tile's MMAs while the copies drain. Its plan passes a Y map instead of the
// pointer ({"tensor_map": "Y", "box": [64, "min(64, M)"], "swizzle": "128B"};
// N % 8 == 0) and 32768 more bytes of dynamic shared memory. MC = 0 (a
// diagnostic, with CL = 2 and a full-BN W box) keeps the clusters but copies
// without multicast.
//
// Plan (SK = 0, EPI = 1): grid min(ceil_div(M, 128 * CL) * ceil_div(N, BN), SMS / CL) * CL,
// block 384, dynamic shared memory STAGES * (128 + BN) * 128 + 32768 + 1024
// bytes; tensor maps X box {64, min(128, M)}, W box {64, min(BN / CL, N)} and
// Y box {64, min(64, M)}, 128B swizzle. Needs K % 64 == 0 and N % 8 == 0 (any
// N with EPI = 0); any M >= 1. sm_90a only.
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
#ifndef EPI
#define EPI 1  // 1: the epilogue through shared memory and TMA stores (needs the Y map, N % 8 == 0)
#endif
#ifndef MC
#define MC 1  // diagnostic: MC 0 with CL 2 pairs the CTAs but copies all of W in each (plan box BN)
#endif
#ifndef SK
#define SK 0  // 1: split the last, partial round of units along K (fp32 partials in workspace "ws", linear_tma_fixup)
#endif
#ifndef SKMIN
#define SKMIN 8  // with SK 1: the fewest K slices (of 64) a cluster's share of the split round may have
#endif
#ifndef SMS
#define SMS 132
#endif
#ifndef STAG
#define STAG 0  // > 0: consumer 2 starts each tile only after consumer 1 issued STAG K slices of it
#endif
#ifndef TAIL
#define TAIL 0  // 1 (the plan's default): a last round at most 1 / CL full is cut into tiles of BN / CL columns
#endif

#define BM 128
#define X_STAGE_BYTES (BM * 128)
#define STAGE_BYTES ((BM + BN) * 128)
#if MC
#define WB (BN / CL)  // rows of W each CTA of a cluster copies
#define SHARERS CL    // CTAs whose consumers read a stage's copies
#else
#define WB BN
#define SHARERS 1
#endif

#if CL != 1 && CL != 2 && CL != 4
#error "CL must be 1, 2 or 4"
#endif
#if STAGES < 2
#error "STAGES must be at least 2"
#endif
#if SK != 0 && SK != 1
#error "SK must be 0 or 1"
#endif
#if STAG < 0 || STAG >= STAGES
#error "STAG must be in 0 .. STAGES - 1"
#endif
#if TAIL != 0 && TAIL != 1
#error "TAIL must be 0 or 1"
#endif
#if BN == 320 && (CL == 1 || !MC || SK)
#error "BN 320 needs CL 2 or 4 (a W box is at most 256 rows), MC 1 and SK 0"
#endif
#if TAIL && (CL != 2 || SK || !EPI || !MC || (BN != 128 && BN != 256))
#error "TAIL needs CL 2, SK 0, EPI 1, MC 1 and BN 128 or 256"
#endif

// CUtensorMap's layout: 128 opaque bytes, 64-byte aligned.
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
#elif BN == 320
// Half H of the m64n320 product: m64n160k16 into accumulators 80H .. 80H + 79
// (columns 160H .. 160H + 159 of the tile), B at the descriptor of its rows.
template <int H>
__device__ __forceinline__ void WgmmaHalf(float (&d)[160], unsigned long long a, unsigned long long b,
                                          int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
      "}, %80, %81, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[80 * H + 0]), "+f"(d[80 * H + 1]), "+f"(d[80 * H + 2]), "+f"(d[80 * H + 3]),
        "+f"(d[80 * H + 4]), "+f"(d[80 * H + 5]), "+f"(d[80 * H + 6]), "+f"(d[80 * H + 7]),
        "+f"(d[80 * H + 8]), "+f"(d[80 * H + 9]), "+f"(d[80 * H + 10]), "+f"(d[80 * H + 11]),
        "+f"(d[80 * H + 12]), "+f"(d[80 * H + 13]), "+f"(d[80 * H + 14]), "+f"(d[80 * H + 15]),
        "+f"(d[80 * H + 16]), "+f"(d[80 * H + 17]), "+f"(d[80 * H + 18]), "+f"(d[80 * H + 19]),
        "+f"(d[80 * H + 20]), "+f"(d[80 * H + 21]), "+f"(d[80 * H + 22]), "+f"(d[80 * H + 23]),
        "+f"(d[80 * H + 24]), "+f"(d[80 * H + 25]), "+f"(d[80 * H + 26]), "+f"(d[80 * H + 27]),
        "+f"(d[80 * H + 28]), "+f"(d[80 * H + 29]), "+f"(d[80 * H + 30]), "+f"(d[80 * H + 31]),
        "+f"(d[80 * H + 32]), "+f"(d[80 * H + 33]), "+f"(d[80 * H + 34]), "+f"(d[80 * H + 35]),
        "+f"(d[80 * H + 36]), "+f"(d[80 * H + 37]), "+f"(d[80 * H + 38]), "+f"(d[80 * H + 39]),
        "+f"(d[80 * H + 40]), "+f"(d[80 * H + 41]), "+f"(d[80 * H + 42]), "+f"(d[80 * H + 43]),
        "+f"(d[80 * H + 44]), "+f"(d[80 * H + 45]), "+f"(d[80 * H + 46]), "+f"(d[80 * H + 47]),
        "+f"(d[80 * H + 48]), "+f"(d[80 * H + 49]), "+f"(d[80 * H + 50]), "+f"(d[80 * H + 51]),
        "+f"(d[80 * H + 52]), "+f"(d[80 * H + 53]), "+f"(d[80 * H + 54]), "+f"(d[80 * H + 55]),
        "+f"(d[80 * H + 56]), "+f"(d[80 * H + 57]), "+f"(d[80 * H + 58]), "+f"(d[80 * H + 59]),
        "+f"(d[80 * H + 60]), "+f"(d[80 * H + 61]), "+f"(d[80 * H + 62]), "+f"(d[80 * H + 63]),
        "+f"(d[80 * H + 64]), "+f"(d[80 * H + 65]), "+f"(d[80 * H + 66]), "+f"(d[80 * H + 67]),
        "+f"(d[80 * H + 68]), "+f"(d[80 * H + 69]), "+f"(d[80 * H + 70]), "+f"(d[80 * H + 71]),
        "+f"(d[80 * H + 72]), "+f"(d[80 * H + 73]), "+f"(d[80 * H + 74]), "+f"(d[80 * H + 75]),
        "+f"(d[80 * H + 76]), "+f"(d[80 * H + 77]), "+f"(d[80 * H + 78]), "+f"(d[80 * H + 79])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
}

// The 64 x 320 product of one warpgroup as two m64n160k16 (wgmma's widest N
// is 256): the same A, B rows 0 .. 159 and 160 .. 319 (160 rows of 128 bytes
// further on: 20 whole 1024-byte swizzle atoms).
__device__ __forceinline__ void Wgmma(float (&d)[160], unsigned long long a, unsigned long long b, int accumulate) {
  WgmmaHalf<0>(d, a, b, accumulate);
  WgmmaHalf<1>(d, a, b + ((160 * 128) >> 4), accumulate);
}
#else
#error "BN must be 128, 192, 256 or 320"
#endif

#if TAIL
// The MMA of a tail tile (BN / CL = BN / 2 columns): m64n(BN/2)k16 into the
// first BN / 4 accumulators.
__device__ __forceinline__ void WgmmaStrip(float (&d)[BN / 2], unsigned long long a, unsigned long long b,
                                           int accumulate) {
#if BN == 256
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
#else
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate)
      : "memory");
#endif
}
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

#if TAIL
// The tail (TAIL = 1). With C clusters and U = R * C + rem units (R >= 0,
// 0 < rem, rem * CL <= C: a last round at most 1 / CL full), the first
// R * C units go C to a round as before, and each of the last rem units is
// cut into CL strips of BN / CL columns, one per cluster: strip s of unit
// R * C + i goes to cluster i * CL + s. A strip is a 128 x BN / CL tile in
// each CTA of its cluster, its W rows copied by rank 0 and multicast (the
// plan's W box), so the last round takes about 1 / CL of a whole tile's
// time on CL times as many clusters. Otherwise every unit is whole.
__device__ __forceinline__ int TailStrips(int units, int clusters) {
  const int rounds = units / clusters, rem = units - rounds * clusters;
  return rem > 0 && rem * CL <= clusters ? rem * CL : 0;
}

// Item `it` of cluster c: its unit and strip (-1: the whole unit); false
// past the cluster's last item.
__device__ __forceinline__ bool TailItem(int it, int c, int units, int clusters, int strips, int& unit, int& strip) {
  const int whole = strips ? units - strips / CL : units;
  unit = c + it * clusters;
  strip = -1;
  if (unit < whole) return true;
  const int first_tail = (whole - c + clusters - 1) / clusters;  // it of c's first item past the whole units
  if (it != first_tail || c >= strips) return false;
  unit = whole + c / CL;
  strip = c % CL;
  return true;
}
#endif

#if SK
// The split of the last round (SK = 1). With C clusters and U = R * C + rem
// units, R >= 1 and 0 < rem <= C / 2 (a last round at most half full), the
// first R * C units are whole tiles, C to a round as before, and the rem * tk
// K slices of the last rem units are cut into P equal ranges, one per
// cluster c < P (P = min(C, max(rem, rem * tk / SKMIN)), so a range is at
// most tk slices and meets at most two units). A cluster's piece of a unit
// that covers all its K slices is stored as bf16 like any tile; any other
// piece goes as fp32 into workspace slot 2c + j (its j-th piece), and
// linear_tma_fixup sums a unit's pieces in the order of their clusters.
struct Tail {
  int head, rem, parts;  // whole-tile units, split units, clusters sharing them (rem == 0: no split)
  long long slices;      // rem * tk
};

__device__ __forceinline__ Tail MakeTail(int units, int clusters, int tk) {
  Tail t;
  const int rounds = units / clusters, rem = units - rounds * clusters;
  t.rem = (rounds >= 1 && rem > 0 && 2 * rem <= clusters) ? rem : 0;
  t.head = units - t.rem;
  t.slices = (long long)t.rem * tk;
  t.parts = (int)min((long long)clusters, max((long long)t.rem, t.slices / SKMIN));
  return t;
}

// Work item `it` of cluster c: its unit, K slices [k0, k1) and partial slot
// (-1: a whole tile, stored as bf16); false past the cluster's last item.
__device__ __forceinline__ bool Item(const Tail& t, int it, int c, int clusters, int tk, int& unit, int& k0,
                                     int& k1, int& slot) {
  const int whole = (t.head - c + clusters - 1) / clusters;  // c < clusters <= head
  if (it < whole) {
    unit = c + it * clusters;
    k0 = 0;
    k1 = tk;
    slot = -1;
    return true;
  }
  if (t.rem == 0 || c >= t.parts) return false;
  const long long s0 = c * t.slices / t.parts, s1 = (c + 1) * t.slices / t.parts;
  const int j = it - whole;
  const long long u = s0 / tk + j;  // split unit, counted from the first
  if (j > 1 || u * tk >= s1) return false;
  k0 = (int)(max(s0, u * tk) - u * tk);
  k1 = (int)(min(s1, (u + 1) * tk) - u * tk);
  unit = t.head + (int)u;
  slot = (k0 == 0 && k1 == tk) ? -1 : 2 * c + j;
  return true;
}
#endif


// The K slices [k0, k1) of one item for a consumer warpgroup: wait for each
// slice's stage, issue its four k16 MMAs (m64nBN, or the tail's
// m64n(BN/2) when kStrip) as one group with one group left in flight, and
// release the stage of the slice before once that one's MMAs are done.
// `stage`, `phase` and `prev` carry the ring's position across items; with
// STAG, consumer 0 arrives on named barrier 3 after slice stag_at.
template <bool kStrip>
__device__ __forceinline__ void MainLoop(float (&d)[BN / 2], int k0, int k1, int cw, int lane, unsigned base,
                                         unsigned full0, unsigned empty0, int stag_at, int& stage,
                                         unsigned& phase, int& prev) {
  for (int kt = k0; kt < k1; ++kt) {
    BarrierWait(full0 + 8 * stage, phase);
    const unsigned a = base + stage * STAGE_BYTES + cw * 64 * 128;
    const unsigned b = base + stage * STAGE_BYTES + X_STAGE_BYTES;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
#if TAIL
      if (kStrip) {
        WgmmaStrip(d, Descriptor(a + ks * 32), Descriptor(b + ks * 32), kt > k0 || ks > 0);
        continue;
      }
#endif
      Wgmma(d, Descriptor(a + ks * 32), Descriptor(b + ks * 32), kt > k0 || ks > 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#if STAG
    if (cw == 0 && kt == stag_at) asm volatile("bar.arrive 3, 256;" ::: "memory");
#else
    (void)stag_at;
#endif
    WaitWgmma<1>();
    Pin(d);
    // The previous slice's wgmma's have completed: its buffer is free.
    if (kt > k0 && lane == 0) ReleaseStage(empty0 + 8 * prev);
    prev = stage;
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
}
}  // namespace

#if EPI != 0 && EPI != 1
#error "EPI must be 0 or 1"
#endif
#if EPI
#define Y_PARAM const __grid_constant__ TensorMap y_map
#else
#define Y_PARAM __nv_bfloat16* __restrict__ Y
#endif

#if SK
#define WS_PARAM , float* __restrict__ ws
#else
#define WS_PARAM
#endif

extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(384, 1)
    linear_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map, Y_PARAM WS_PARAM,
               int M, int N, int K);

// The definition spells each variant's parameters out, the default's first
// (a source-level signature check reads the first); the declaration above
// carries the cluster shape.
#if EPI == 1 && SK == 0  // TAIL 0 or 1: the same parameters
extern "C" __global__ void __launch_bounds__(384, 1)
    linear_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map,
               const __grid_constant__ TensorMap y_map, int M, int N, int K)
#elif EPI == 0 && SK == 0
extern "C" __global__ void __launch_bounds__(384, 1)
    linear_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map,
               __nv_bfloat16* __restrict__ Y, int M, int N, int K)
#elif EPI == 0 && SK == 1
extern "C" __global__ void __launch_bounds__(384, 1)
    linear_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map,
               __nv_bfloat16* __restrict__ Y, float* __restrict__ ws, int M, int N, int K)
#elif EPI == 1 && SK == 1
extern "C" __global__ void __launch_bounds__(384, 1)
    linear_tma(const __grid_constant__ TensorMap x_map, const __grid_constant__ TensorMap w_map,
               const __grid_constant__ TensorMap y_map, float* __restrict__ ws, int M, int N, int K)
#endif
{
  extern __shared__ unsigned char shared_raw[];
  __shared__ __align__(8) unsigned long long full_bar[STAGES], empty_bar[STAGES];
  const unsigned base = ((unsigned)__cvta_generic_to_shared(shared_raw) + 1023u) & ~1023u;
  const unsigned full0 = (unsigned)__cvta_generic_to_shared(full_bar);
  const unsigned empty0 = (unsigned)__cvta_generic_to_shared(empty_bar);

  unsigned rank = 0;
#if CL > 1
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
  const int units_m = (M + BM * CL - 1) / (BM * CL), units_n = (N + BN - 1) / BN;
  const int units = units_m * units_n;
  const int cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
  const int tiles_k = K / 64;
  const int wg = threadIdx.x / 128;
#if SK
  const Tail tail = MakeTail(units, clusters, tiles_k);
#define FOR_EACH_ITEM             \
  for (int it = 0;; ++it) {       \
    int u, k0, k1, slot;          \
    if (!Item(tail, it, cluster, clusters, tiles_k, u, k0, k1, slot)) break;
#elif TAIL
  const int strips = TailStrips(units, clusters);
#define FOR_EACH_ITEM                                                  \
  for (int it = 0;; ++it) {                                            \
    int u, strip;                                                      \
    if (!TailItem(it, cluster, units, clusters, strips, u, strip)) break; \
    const int k0 = 0, k1 = tiles_k;
#else
#define FOR_EACH_ITEM                                  \
  for (int u = cluster; u < units; u += clusters) {    \
    const int k0 = 0, k1 = tiles_k, slot = -1;         \
    (void)slot;
#endif

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
      // The box heights of the plan's maps: min(128, M) rows of X, min(BN / CL, N) of W.
      const unsigned stage_tx = (unsigned)(min(BM, M) + SHARERS * min(WB, N)) * 128u;
      int stage = 0;
      unsigned phase = 0;
      FOR_EACH_ITEM
        int um, un;
        UnitOrigin(u, units_m, units_n, um, un);
        const int m0 = (um * CL + (int)rank) * BM, n0 = un * BN;
#if TAIL
        // A strip's W rows are one box, copied by rank 0 to both CTAs.
        const unsigned item_tx = strip < 0 ? stage_tx : (unsigned)(min(BM, M) + min(WB, N)) * 128u;
#else
        const unsigned item_tx = stage_tx;
#endif
        for (int kt = k0; kt < k1; ++kt) {
          BarrierWait(empty0 + 8 * stage, phase ^ 1);
          const unsigned full = full0 + 8 * stage;
          const unsigned buf = base + stage * STAGE_BYTES;
          ArriveExpect(full, item_tx);
          TmaLoad(buf, x_map, full, kt * 64, m0);
#if SHARERS == 1
          TmaLoad(buf + X_STAGE_BYTES, w_map, full, kt * 64, n0);
#else
#if TAIL
          if (strip >= 0) {
            if (rank == 0) TmaLoadMulticast(buf + X_STAGE_BYTES, w_map, full, kt * 64, n0 + strip * WB);
          } else
#endif
            TmaLoadMulticast(buf + X_STAGE_BYTES + rank * WB * 128, w_map, full, kt * 64, n0 + (int)rank * WB);
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
#if EPI
    // Two 64 x 64 boxes of this warpgroup's output, 8 KB each, used in turn.
    const unsigned out_buf = base + STAGES * STAGE_BYTES + cw * 16384;
    const bool leader = (threadIdx.x & 127) == 0;
    unsigned boxes = 0;
#else
    const bool pairs = (N & 1) == 0;
#endif
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
    int stage = 0;
    unsigned phase = 0;
    FOR_EACH_ITEM
      int um, un;
      UnitOrigin(u, units_m, units_n, um, un);
#if TAIL
      const int m0 = (um * CL + (int)rank) * BM, n0 = un * BN + (strip < 0 ? 0 : strip * WB);
      const int out_boxes = strip < 0 ? BN / 64 : WB / 64;
#else
      const int m0 = (um * CL + (int)rank) * BM, n0 = un * BN;
#endif
      int prev = 0;
#if STAG
      // Stagger: consumer 2 starts a whole tile only once consumer 1 has
      // issued its first STAG slices, so each one's epilogue runs while the
      // other's MMAs (on slices already loaded) keep the tensor cores busy.
      // Named barrier 3, one arrival of consumer 1 per whole tile. Only whole
      // tiles of at least STAGES slices take part: consumer 1 cannot then
      // reach the next such tile's arrival before consumer 2 has passed this
      // one's wait (that needs the stages consumer 2 frees in this tile), so
      // two arrivals never pile up on the barrier.
      const int stag_at = (k0 == 0 && k1 == tiles_k && tiles_k >= STAGES) ? STAG - 1 : -1;
      if (cw == 1 && stag_at >= 0) asm volatile("bar.sync 3, 256;" ::: "memory");
#define STAG_AT stag_at
#else
#define STAG_AT -1
#endif
#if TAIL
      // One instruction shape per loop (a shape chosen inside the loop makes
      // ptxas fence the accumulators around every wgmma).
      if (strip >= 0) {
        MainLoop<true>(d, k0, k1, cw, lane, base, full0, empty0, STAG_AT, stage, phase, prev);
      } else
#endif
      {
        MainLoop<false>(d, k0, k1, cw, lane, base, full0, empty0, STAG_AT, stage, phase, prev);
      }
      WaitWgmma<0>();
      Pin(d);
      if (lane == 0) ReleaseStage(empty0 + 8 * prev);

      // Accumulator layout of m64nBN: warp q of the warpgroup holds rows 16q ..
      // 16q + 15; in each 8-column block j, lane (g, t) holds (g, 2t), (g, 2t+1),
      // (g+8, 2t), (g+8, 2t+1) in d[4j .. 4j+3].
#if SK
      if (slot >= 0) {
        // A piece of a split unit: fp32, unrounded, into this CTA's 128 x BN
        // rows of the slot (every element written; linear_tma_fixup clips).
        float* p = ws + ((long long)(slot * CL + (int)rank) * BM + cw * 64 + q * 16 + (lane >> 2)) * BN +
                   2 * (lane & 3);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h)
            *reinterpret_cast<float2*>(p + 8 * h * BN + 8 * j) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
        }
        continue;
      }
#endif
#if EPI
      // Box b is columns 64b .. 64b + 63 of the warpgroup's 64 rows, written
      // into shared memory in the 128B-swizzled layout of the Y map (16-byte
      // chunk c of row r at c ^ (r % 8): a warp's 32 four-byte stores land in
      // 32 banks) and stored by one TMA copy, which clips rows past M and
      // columns past N. A buffer is rewritten only after the copy issued from
      // it two boxes earlier has read it (wait_group.read 1).
#pragma unroll
      for (int b = 0; b < BN / 64; ++b, ++boxes) {
#if TAIL
        if (b >= out_boxes) break;  // a strip's BN / CL columns
#endif
        if (n0 + 64 * b >= N) break;  // wholly past N: in the last tile column when N % BN <= BN - 64
        const unsigned buf = out_buf + (boxes & 1) * 8192;
        if (leader) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
        for (int jj = 0; jj < 8; ++jj) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int j = 8 * b + jj;
            const unsigned r = q * 16 + (lane >> 2) + 8 * h;
            const __nv_bfloat162 v = __floats2bfloat162_rn(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            const unsigned addr = buf + r * 128 + (((unsigned)jj ^ (r & 7)) << 4) + 4 * (lane & 3);
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(*reinterpret_cast<const unsigned*>(&v))
                         : "memory");
          }
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
        if (leader) {
          asm volatile(
              "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                  reinterpret_cast<unsigned long long>(&y_map)),
              "r"(n0 + 64 * b), "r"(m0 + cw * 64), "r"(buf)
              : "memory");
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
      }
#else
      const int row = m0 + cw * 64 + q * 16 + (lane >> 2);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = n0 + 8 * j + 2 * (lane & 3);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = row + 8 * h;
          if (m >= M || col >= N) continue;
          const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
          __nv_bfloat16* out = Y + (long long)m * N + col;
          if (pairs && col + 1 < N) {
            *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
          } else {
            out[0] = __float2bfloat16_rn(v0);
            if (col + 1 < N) out[1] = __float2bfloat16_rn(v1);
          }
        }
      }
#endif
    }
#if EPI
    // The shared buffers stay allocated until the last copies are done.
    if (leader) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
  }
#if CL > 1
  // No CTA of the cluster leaves while a peer may still arrive on its
  // barriers or multicast into its buffers.
  __syncwarp();
  ClusterSync();
#endif
}

#if SK
// The second launch with SK = 1: unit rem's split units, each summed from
// its pieces' fp32 slots in the order of their clusters (a fixed order, so
// the result does not depend on timing), rounded once and stored with bounds
// checks. Block (t, y) sums rows 8y .. 8y + 7 of split unit t; a unit that
// one cluster computed whole was stored by linear_tma, and blocks past the
// split units (or all, when linear_tma did not split) return at once.
// Plan: grid [min(units, SMS / CL) / 2 + 1, 16 * CL, 1], block 256, args
// ws, Y, M, N, K (the same dims and params as linear_tma's launch).
extern "C" __global__ void __launch_bounds__(256)
    linear_tma_fixup(const float* __restrict__ ws, __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  const int units_m = (M + BM * CL - 1) / (BM * CL), units_n = (N + BN - 1) / BN;
  const int units = units_m * units_n, clusters = min(units, SMS / CL), tiles_k = K / 64;
  const Tail tail = MakeTail(units, clusters, tiles_k);
  const int t = blockIdx.x;
  if (t >= tail.rem) return;
  // Owner of slice s: the last cluster c with c * slices / parts <= s.
  const int first = (int)((((long long)t * tiles_k + 1) * tail.parts - 1) / tail.slices);
  const int last = (int)(((long long)(t + 1) * tiles_k * tail.parts - 1) / tail.slices);
  if (first == last) return;
  int um, un;
  UnitOrigin(tail.head + t, units_m, units_n, um, un);
  const bool pairs = (N & 1) == 0;
  for (int e = threadIdx.x; e < 8 * BN / 4; e += 256) {
    const int r = 8 * blockIdx.y + e / (BN / 4), c4 = 4 * (e % (BN / 4));
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int c = first; c <= last; ++c) {
      const int j = t - (int)(c * tail.slices / tail.parts / tiles_k);
      const float4 v = *reinterpret_cast<const float4*>(
          ws + ((long long)((2 * c + j) * CL + r / BM) * BM + r % BM) * BN + c4);
      acc.x += v.x;
      acc.y += v.y;
      acc.z += v.z;
      acc.w += v.w;
    }
    const int m = um * CL * BM + r, n = un * BN + c4;
    if (m >= M) continue;
    __nv_bfloat16* out = Y + (long long)m * N + n;
    const float vals[4] = {acc.x, acc.y, acc.z, acc.w};
    if (pairs && n + 3 < N) {
      reinterpret_cast<__nv_bfloat162*>(out)[0] = __floats2bfloat162_rn(acc.x, acc.y);
      reinterpret_cast<__nv_bfloat162*>(out)[1] = __floats2bfloat162_rn(acc.z, acc.w);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (n + i < N) out[i] = __float2bfloat16_rn(vals[i]);
    }
  }
}
#endif
