// attention_engine, Hopper prefill template: causal softmax(q k^T / sqrt(D)) v
// with the bottom-right mask, bf16 in and out, fp32 scores, an fp32 online
// softmax and fp32 accumulators, the probabilities P rounded to bf16 once
// before P V (as cuDNN and FlashAttention do), on warpgroup MMA (wgmma,
// sm_90a only). D = 128.
//
// q, o: [B, Sq, H, D]; k, v: [B, Skv, H, D], contiguous row-major: position i
// of head h of batch b is at ((b*S + i)*H + h)*D. Query i sees key j when
// j <= i + (Skv - Sq) and j < Skv.
//
// Persistent: a grid of min(pairs, CTAS) CTAs walks the units (a unit is a
// 128-query tile of one head of one batch):
//   - items are a head's p-th heaviest query tile (the most keys) with its
//     p-th lightest, which cost about the same (nq + 1 key tiles), and, with
//     SCHED 1 (the default), the last section's units one by one, heaviest
//     first, handed out by a ticket counter in the workspace: the CTAs that
//     finish first take the heavy ones and the light ones fill the last round
//     (SCHED 0: pairs only, CTA c of G taking items c, c + G, ...: the last
//     round of 1024 pairs on 132 CTAs runs 100 of them);
//   - items are numbered head section by head section, a section holding
//     about SECT MiB of K and V, so that the CTAs running at one time share
//     the keys of few heads (L2 hits).
// Each CTA: a producer warpgroup (setmaxnreg 24) and two consumer warpgroups
// (setmaxnreg 240), warpgroup w owning rows 64w .. 64w + 63 of the unit.
//   producer  one thread: the unit's Q tile by TMA (into one of QBUF Q
//             buffers, once both consumers are done with the unit that used
//             it before), then each key tile's K and V by TMA into
//             STAGES-deep K and V rings, a stage refilled once all 8
//             consumer warps have released it; it runs ahead across units,
//             so the next unit's Q and first tiles are in flight while the
//             consumers finish this one.
//   S = Q K^T wgmma m64nBNk16, A = Q and B = K from shared memory (K-major).
//   softmax   on the fp32 accumulators in registers, exp2 with the scale and
//             log2(e) folded into one factor.
//   O += P V  wgmma m64n128k16 with A = P from registers (the S accumulator
//             blocks 2kk, 2kk+1 are the A fragment of keys 16kk..16kk+15,
//             rounded to bf16 once: no shared-memory round trip) and B = V
//             from shared memory, MN-major through the transpose bit.
// Step t of a warpgroup issues S_t and then the previous tile's P V, and runs
// tile t's softmax while that P V is on the tensor cores (intra-warpgroup
// overlap); the two warpgroups take turns issuing their MMAs (named barriers
// 2 and 3, ping-pong), so that one's softmax runs under the other's MMAs.
// The turns run on across units. Key tiles past the last key a unit's bottom
// row sees are never loaded; a warpgroup skips the trailing tiles none of its
// rows sees and masks only the tiles that cross its diagonal or the end of the
// keys. No wgmma sits in a branch (ptxas would serialize them): tile 0 is
// peeled.
//
// The rescale factor follows docs/notes/attention-templates.md (flash v3):
// base = rn(m * scale), p = 2^(fma(s, scale, -base)), alpha = 2^(base_old -
// base_new), exactly 1 while a row's max stays. The row sums add the fp32
// probabilities (before their rounding), as FlashAttention does.
//
// Shared memory (1024-byte aligned): QBUF Q tiles (128 rows each), then
// STAGES K tiles and STAGES V tiles (BN rows each), then (EPI 1) 32 KiB of
// output staging, 16 KiB per consumer warpgroup. Every tile is stored as two
// 64-column halves, each a stack of 128-byte rows in the 128-byte swizzle
// (16-byte chunk c of row r at chunk c ^ (r % 8)), written so by TMA and read
// so by the descriptors (the staging: written so by the consumers, read so
// by TMA).
//
// Epilogue, EPI = 1 (the default since 2026-12-03: 4% faster at prefill and
// 2% at long than EPI = 0 on the H200): each consumer warpgroup writes its
// 64 rows of O / l as bf16 into its staging halves, and one of its threads
// stores them with two TMA copies (shared to global, clipped at Sq), which
// drain while the warpgroup goes on; a warpgroup rewrites its halves only
// after its previous copies have read them. EPI = 0 stores each thread's
// bf16 pairs straight from registers (4-byte stores, half of every 32-byte
// sector written per warp store).
//
// Entry: attn_engine_wgmma(qmap, kmap, vmap, omap, B, H, Sq, Skv, tickets), grid
// (min(ceil_div(ceil_div(Sq, 128), 2) * H * B, CTAS)), block 384, dynamic
// shared memory 1024 + 256 * (128 * QBUF + 2 * STAGES * BN) + 32768 * EPI
// bytes; qmap is {"tensor_map": "q", "box": [64, 1, "min(128, Sq)", 1],
// "swizzle": "128B"}, kmap and vmap {"tensor_map": "k" / "v", "box": [64, 1,
// "BN", 1], "swizzle": "128B"} (Skv >= BN), omap {"tensor_map": "o", "box":
// [64, 1, "min(64, Sq)", 1], "swizzle": "128B"} (with EPI = 0 the pointer o);
// tickets is one i32 of workspace, any value at the launch (CTA 0 sets it).
// Design and measurements: docs/notes/attention-templates.md, "attention_engine".
#include <cuda_bf16.h>

#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef CTAS
#define CTAS 132
#endif
#ifndef SECT
#define SECT 16
#endif
#ifndef QBUF
#define QBUF 2
#endif
#ifndef SCHED
#define SCHED 1  // 1: the last section in single units, handed out by tickets; 0: pairs, CTA c takes c, c + G, ...
#endif
#ifndef EPI
#define EPI 1  // 1: O staged in shared memory and stored by TMA (the plan passes an o map); 0: stored from registers
#endif

#define HD 128
#define BM 128                     // query rows of a unit: two consumer warpgroups of 64
#define THREADS 256                // consumer threads
#define NT_ALL (THREADS + 128)     // and a producer warpgroup
#define CONSUMER_REGS 240          // setmaxnreg: 128 * 24 + 256 * 240 <= 65536
#define HALF_Q (BM * 128)          // bytes of one 64-column half of the Q tile
#define HALF_KV (BN * 128)         // bytes of one 64-column half of a K or V tile
#define TILE_BYTES (2 * HALF_KV)   // one K or one V tile
#define Q_BYTES (2 * HALF_Q)       // one Q buffer

#if (BN != 64 && BN != 128) || STAGES < 2 || STAGES > 4 || CTAS < 1 || SECT < 1 || QBUF < 1 || QBUF > 2 || \
    (EPI != 0 && EPI != 1) || (SCHED != 0 && SCHED != 1)
#error "attn_engine_wgmma: BN is 64 or 128, STAGES 2..4, QBUF 1 or 2, EPI and SCHED 0 or 1, CTAS and SECT positive"
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

// O (m64n128, fp32) += P (registers, bf16) V (shared memory, MN-major).
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
// distance between the two 64-column halves along N, the stride byte offset
// again the distance between 8-row groups along K.
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

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define WGMMA_S CAT(WgmmaSS, BN)

// CUtensorMap's layout: 128 opaque bytes, 64-byte aligned (cuda.h is a host
// header). The plan's maps view q, k and v as [B][S][H][D] (innermost first:
// D, H, S, B); one box is one 64-column half of a tile, rows past the end
// zero-filled.
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

__device__ __forceinline__ void ExpectBytes(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
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

// One arrival per consumer warp on an "empty" barrier (counted 8).
__device__ __forceinline__ void Release(unsigned bar) {
  if ((threadIdx.x & 31) == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Ping-pong: the two consumer warpgroups take turns issuing their MMAs.
// Turn(wg) waits for the other warpgroup's pass; Pass(wg) hands the turn on.
__device__ __forceinline__ void Turn(int wg) { asm volatile("bar.sync %0, 256;" ::"r"(2 + wg) : "memory"); }
__device__ __forceinline__ void Pass(int wg) { asm volatile("bar.arrive %0, 256;" ::"r"(3 - wg) : "memory"); }

// The schedule. An item is one or two units of one (batch, head). A pair
// item holds a head's p-th heaviest query tile (the most keys) and its p-th
// lightest (nq - 1 - p and p: together nq + 1 key tiles at Sq = Skv, so that
// every pair costs about the same; one tile alone when the two coincide).
// Items are numbered section by section (hs heads a section), so that the
// CTAs running at one time share the keys of few heads.
//   SCHED 0: every section in pairs; CTA c of G takes items c, c + G, ...:
//            balanced to within one pair (3% at prefill and long: 1024
//            pairs on 132 CTAs end in a round of 100).
//   SCHED 1: every section but the last in pairs, the last one in single
//            units, heaviest first; CTA c takes items c and c + G, then the
//            next ticket of a counter in the workspace (CTA 0 sets it to 2G
//            at its start), so that the CTAs that finish first take the
//            heavy singles and the light ones fill the last round (a list
//            schedule: within 0.4% of an even split at prefill and long,
//            counted in MMA turns, against 3.1%).
struct Items {
  int nq, npair, HB, hs, npi, tail0, theads, nitems;

  __device__ __forceinline__ Items(int Sq, int Skv, int H, int B) {
    nq = (Sq + BM - 1) / BM;
    npair = (nq + 1) / 2;
    HB = H * B;
    // Heads per L2 section: SECT MiB of K and V (512 bytes per key and head).
    hs = (int)max(1ll, min((long long)HB, ((long long)SECT << 20) / ((long long)Skv * 512)));
#if SCHED
    tail0 = (HB - 1) / hs * hs;  // the last section's first head
    theads = HB - tail0;
    npi = tail0 * npair;         // pair items: every section but the last
    nitems = npi + theads * nq;
#else
    tail0 = HB;
    theads = 0;
    npi = nitems = npair * HB;
#endif
  }
  // Item v's units (its heavier query tile q1, the other q2 or -1) and head.
  __device__ __forceinline__ void Get(int v, int& q1, int& q2, int& hb) const {
    if (v < npi) {
      const int per = hs * npair, sec = v / per, r = v - sec * per;
      const int heads = min(hs, HB - sec * hs);
      const int p = r / heads;
      hb = sec * hs + r % heads;
      q1 = nq - 1 - p;
      q2 = p == q1 ? -1 : p;
    } else {
      const int r = v - npi;
      q1 = nq - 1 - r / theads;
      q2 = -1;
      hb = tail0 + r % theads;
    }
  }
};

// The producer's cursor over its CTA's units. With SCHED 1 the ticket of the
// next item is drawn while the producer streams the key tiles of the item's
// last unit (Prefetch, once the last tile's K stage is free: the consumers
// are then about two MMA turns from the unit's end), so that the CTAs
// finishing first take the next items and the atomic's latency stays off
// the path to the next unit (drawn one whole item ahead instead, it lost
// 0.8% at prefill: a CTA took its next item before it knew when the current
// one would end).
// A CTA draws from its second item on, long after CTA 0 set the counter at
// its start. A ticket outside [0, nitems) ends the CTA's work. Whatever the
// counter held at the launch, every item is run: the tickets drawn after
// CTA 0's reset run from 2G upward, and CTA 0 itself draws until one runs
// past the end; an earlier draw can only end a CTA early or repeat an item
// (which writes the same bytes again).
struct Feed {
  Items it;
  int* tickets;
  int v, pre, q1, q2, hb, w;  // the item, the next one (-1: not drawn yet), the item's units and head, which

  __device__ __forceinline__ Feed(const Items& items, int* counter)
      : it(items), tickets(counter), v(blockIdx.x), pre(blockIdx.x + gridDim.x), q1(0), q2(-1), hb(0), w(0) {
    if (Valid()) it.Get(v, q1, q2, hb);
  }
  __device__ __forceinline__ bool Valid() const { return v >= 0 && v < it.nitems; }
  __device__ __forceinline__ void Unit(int& qtile, int& h) const {
    qtile = w == 0 ? q1 : q2;
    h = hb;
  }
  __device__ __forceinline__ void Prefetch() {
#if SCHED
    if (pre < 0 && (w == 1 || q2 < 0)) pre = atomicAdd(tickets, 1);
#endif
  }
  __device__ __forceinline__ void Advance() {
    if (w == 0 && q2 >= 0) {
      w = 1;
      return;
    }
    w = 0;
#if SCHED
    v = pre;
    pre = -1;
#else
    v += gridDim.x;
#endif
    if (Valid()) it.Get(v, q1, q2, hb);
  }
};

// One unit: a 128-query tile of one (batch, head) and its key tiles.
struct Unit {
  int q0, h, b, ntiles;
};
__device__ __forceinline__ Unit MakeUnit(int qtile, int hb, int H, int Sq, int Skv) {
  Unit x;
  x.q0 = qtile * BM;
  x.b = hb / H;
  x.h = hb - x.b * H;
  const int kend = min(Skv, x.q0 + BM + (Skv - Sq));  // keys [0, kend) are visible to some row
  x.ntiles = (kend + BN - 1) / BN;
  return x;
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

__device__ __forceinline__ void Rescale(float (&oacc)[64], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    oacc[4 * j] *= alpha[0];
    oacc[4 * j + 1] *= alpha[0];
    oacc[4 * j + 2] *= alpha[1];
    oacc[4 * j + 3] *= alpha[1];
  }
}

// P rounded to bf16 as the A operand: for keys 16kk .. 16kk + 15 the
// m16n8k16-style fragment {(g, 2t4), (g + 8, 2t4), (g, 2t4 + 8),
// (g + 8, 2t4 + 8)}, i.e. accumulator blocks 2kk and 2kk + 1 of S.
__device__ __forceinline__ void RoundP(const float (&sacc)[BN / 2], unsigned (&p)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int d0 = 8 * kk + 2 * r;  // = 4 * (2kk + (r >> 1)) + 2 * (r & 1)
      __nv_bfloat162 h = __floats2bfloat162_rn(sacc[d0], sacc[d0 + 1]);  // .x (low half) = the lower column
      p[kk][r] = *reinterpret_cast<unsigned*>(&h);
    }
}

// O += P V for one key tile, V MN-major (transposed by the tensor cores).
__device__ __forceinline__ void PV(float (&oacc)[64], const unsigned (&p)[BN / 16][4], unsigned cV) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) WgmmaRS128(oacc, p[kk], Desc(cV + kk * 16 * 128, HALF_KV));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(NT_ALL, 1)
attn_engine_wgmma(const __grid_constant__ TensorMap qmap, const __grid_constant__ TensorMap kmap,
                  const __grid_constant__ TensorMap vmap,
#if EPI
                  const __grid_constant__ TensorMap omap,
#else
                  __nv_bfloat16* __restrict__ o,
#endif
                  int B, int H, int Sq, int Skv, int* __restrict__ tickets) {
  extern __shared__ unsigned char shared_raw[];
  const unsigned sQ = ((unsigned)__cvta_generic_to_shared(shared_raw) + 1023u) & ~1023u;
  const unsigned sK = sQ + QBUF * Q_BYTES, sV = sK + STAGES * TILE_BYTES;
  // EPI 1: each consumer warpgroup's 64 output rows, two 64-column halves of
  // 8 KiB in the 128-byte swizzle (the o map's), after the V ring.
  const unsigned sO = sV + STAGES * TILE_BYTES;
  const float NEG_INF = -__int_as_float(0x7f800000);

  const int off = Skv - Sq;

  // Full barriers: one arrival and the bytes; empty barriers: one arrival per
  // consumer warp (8).
  __shared__ __align__(8) unsigned long long k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES];
  __shared__ __align__(8) unsigned long long q_full[QBUF], q_empty[QBUF];
  __shared__ int unit_info[QBUF][2];  // the unit of each Q buffer: query tile (-1: none, the end), head
  const unsigned kf = (unsigned)__cvta_generic_to_shared(k_full), ke = (unsigned)__cvta_generic_to_shared(k_empty);
  const unsigned vf = (unsigned)__cvta_generic_to_shared(v_full), ve = (unsigned)__cvta_generic_to_shared(v_empty);
  const unsigned qf = (unsigned)__cvta_generic_to_shared(q_full), qe = (unsigned)__cvta_generic_to_shared(q_empty);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(kf + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(vf + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(ke + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(ve + 8 * s));
    }
#pragma unroll
    for (int s = 0; s < QBUF; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(qf + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 8;" ::"r"(qe + 8 * s));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int wg = threadIdx.x >> 7;
  if (wg == 2) {  // the producer warpgroup: one thread streams every tile
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory");
    if (threadIdx.x == THREADS) {
      const unsigned qbytes = 2u * (unsigned)min(BM, Sq) * 128u;  // the Q box is min(128, Sq) rows
#if SCHED
      if (blockIdx.x == 0) atomicExch(tickets, 2 * (int)gridDim.x);
#endif
      int n = 0;  // key tiles issued so far
      Feed feed(Items(Sq, Skv, H, B), tickets);
      for (int nu = 0;; ++nu) {
        // Unit nu's Q goes to buffer nu % QBUF, once both warpgroups are done
        // with the unit QBUF before, and with it the unit's query tile and
        // head, which the consumers read once the Q copy has landed; past the
        // CTA's last unit, the end (-1) with a plain arrival.
        const int qb = nu % QBUF;
        if (nu >= QBUF) WaitBar(qe + 8 * qb, ((nu / QBUF) - 1) & 1);
        if (nu > 0) feed.Advance();
        if (!feed.Valid()) {
          unit_info[qb][0] = -1;
          asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(qf + 8 * qb) : "memory");
          break;
        }
        int qtile, hb;
        feed.Unit(qtile, hb);
        const Unit x = MakeUnit(qtile, hb, H, Sq, Skv);
        unit_info[qb][0] = qtile;
        unit_info[qb][1] = hb;
        ExpectBytes(qf + 8 * qb, qbytes);
        TmaHalf(sQ + qb * Q_BYTES, qmap, 0, x.h, x.q0, x.b, qf + 8 * qb);
        TmaHalf(sQ + qb * Q_BYTES + HALF_Q, qmap, 64, x.h, x.q0, x.b, qf + 8 * qb);
        for (int t = 0; t < x.ntiles; ++t, ++n) {
          const int s = n % STAGES;
          const unsigned ph = ((n / STAGES) - 1) & 1;
          if (n >= STAGES) WaitBar(ke + 8 * s, ph);
          if (t == x.ntiles - 1) feed.Prefetch();
          ExpectBytes(kf + 8 * s, TILE_BYTES);
          TmaHalf(sK + s * TILE_BYTES, kmap, 0, x.h, t * BN, x.b, kf + 8 * s);
          TmaHalf(sK + s * TILE_BYTES + HALF_KV, kmap, 64, x.h, t * BN, x.b, kf + 8 * s);
          if (n >= STAGES) WaitBar(ve + 8 * s, ph);
          ExpectBytes(vf + 8 * s, TILE_BYTES);
          TmaHalf(sV + s * TILE_BYTES, vmap, 0, x.h, t * BN, x.b, vf + 8 * s);
          TmaHalf(sV + s * TILE_BYTES + HALF_KV, vmap, 64, x.h, t * BN, x.b, vf + 8 * s);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS) : "memory");
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int g = lane >> 2, t4 = lane & 3;
#if !EPI
    const long long pos = (long long)H * HD;
#endif
    const float sl2 = rsqrtf((float)HD) * 1.4426950408889634f;  // softmax scale times log2(e)
    if (wg == 1) Pass(1);                                        // warpgroup 0 takes the first turn
    int n = 0;  // key tiles consumed so far
    for (int nu = 0;; ++nu) {
      const int qb = nu % QBUF;
      WaitBar(qf + 8 * qb, (nu / QBUF) & 1);  // the unit's Q, and which unit it is (-1: the CTA's end)
      const int qtile = unit_info[qb][0];
      if (qtile < 0) break;
      const Unit x = MakeUnit(qtile, unit_info[qb][1], H, Sq, Skv);
      const int wrow0 = x.q0 + wg * 64;           // this warpgroup's first query row
      const int row_a = wrow0 + warp * 16 + g;    // this thread's rows: row_a and row_a + 8
      // Key tiles [0, nvis) hold keys some row of this warpgroup sees (at
      // least tile 0); the other warpgroup may need more (up to x.ntiles),
      // and both take x.ntiles + 1 turns (S_0, S_t with P_{t-1} V_{t-1}, the
      // last P V, then empty ones).
      const int nvis = min(x.ntiles, (wrow0 + 63 + off) / BN + 1);
      const int nturns = x.ntiles + 1;

      float oacc[64];
#pragma unroll
      for (int i = 0; i < 64; ++i) oacc[i] = 0.0f;
      float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
      unsigned p[BN / 16][4];  // P of the last tile, as the A operand
      float sacc[BN / 2], alpha[2];

      const unsigned aQ = sQ + qb * Q_BYTES + wg * 64 * 128;  // this warpgroup's 64 rows of Q
      WaitBar(kf + 8 * (n % STAGES), (n / STAGES) & 1);
      Turn(wg);
      WgmmaFence();
      MmaS(sacc, aQ, sK + (n % STAGES) * TILE_BYTES);
      WgmmaCommit();
      Pass(wg);
      WgmmaWait<0>();
      Pin(sacc);
      Release(ke + 8 * (n % STAGES));
      if (nvis == 1) Release(qe + 8 * qb);
      Softmax(sacc, m, l, alpha, 0, row_a, wrow0, off, Skv, sl2);
      RoundP(sacc, p);  // O is still zero: no rescale
      for (int t = 1; t < nvis; ++t) {
        const int nk = n + t, nv = nk - 1;
        WaitBar(kf + 8 * (nk % STAGES), (nk / STAGES) & 1);
        WaitBar(vf + 8 * (nv % STAGES), (nv / STAGES) & 1);
        Turn(wg);
        WgmmaFence();
        MmaS(sacc, aQ, sK + (nk % STAGES) * TILE_BYTES);
        WgmmaCommit();
        // The previous tile's O += P V runs on the tensor cores while this
        // tile's softmax runs on the ALUs.
        PV(oacc, p, sV + (nv % STAGES) * TILE_BYTES);
        WgmmaCommit();
        Pass(wg);
        WgmmaWait<1>();  // S is done: its K stage (and, after the last S, Q) is free
        Pin(sacc);
        Release(ke + 8 * (nk % STAGES));
        if (t == nvis - 1) Release(qe + 8 * qb);
        Softmax(sacc, m, l, alpha, t * BN, row_a, wrow0, off, Skv, sl2);
        WgmmaWait<0>();  // P V is done: its P registers, O and its V stage are free
        Pin(oacc);
        Release(ve + 8 * (nv % STAGES));
        Rescale(oacc, alpha);
        RoundP(sacc, p);
      }
      const int nv = n + nvis - 1;
      WaitBar(vf + 8 * (nv % STAGES), (nv / STAGES) & 1);
      Turn(wg);
      WgmmaFence();
      PV(oacc, p, sV + (nv % STAGES) * TILE_BYTES);
      WgmmaCommit();
      Pass(wg);
      for (int i = nvis + 1; i < nturns; ++i) {
        Turn(wg);
        Pass(wg);
      }
      WgmmaWait<0>();
      Pin(oacc);
      Release(ve + 8 * (nv % STAGES));
      for (int t = nvis; t < x.ntiles; ++t) {  // the other warpgroup's tiles: released once landed
        const int nt = n + t;
        WaitBar(kf + 8 * (nt % STAGES), (nt / STAGES) & 1);
        Release(ke + 8 * (nt % STAGES));
        WaitBar(vf + 8 * (nt % STAGES), (nt / STAGES) & 1);
        Release(ve + 8 * (nt % STAGES));
      }
      n += x.ntiles;

#if EPI
      // O / l into this warpgroup's staging halves (a warp's 32 four-byte
      // stores hit 32 banks: row r's 16-byte chunk c sits at chunk c ^ (r % 8)),
      // then one thread stores both halves with TMA, which clips at Sq. The
      // halves are rewritten only after the previous unit's copies read them.
      const unsigned stage = sO + wg * 16384;
      if ((threadIdx.x & 127) == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      asm volatile("bar.sync %0, 128;" ::"r"(4 + wg) : "memory");
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float lsum = l[hf];
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
        const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
        const int r = warp * 16 + g + 8 * hf;  // the row within the warpgroup's 64
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          __nv_bfloat162 h2 = __floats2bfloat162_rn(oacc[4 * j + 2 * hf] * inv, oacc[4 * j + 2 * hf + 1] * inv);
          const unsigned a = stage + (j >> 3) * 8192 + r * 128 + ((((j & 7) ^ (r & 7))) << 4) + 4 * t4;
          asm volatile("st.shared.b32 [%0], %1;" ::"r"(a), "r"(*reinterpret_cast<unsigned*>(&h2)) : "memory");
        }
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("bar.sync %0, 128;" ::"r"(4 + wg) : "memory");
      if ((threadIdx.x & 127) == 0 && wrow0 < Sq) {
#pragma unroll
        for (int half = 0; half < 2; ++half)
          asm volatile(
              "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(
                  reinterpret_cast<unsigned long long>(&omap)),
              "r"(64 * half), "r"(x.h), "r"(wrow0), "r"(x.b), "r"(stage + half * 8192)
              : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
#else
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float lsum = l[hf];
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
        const int i = row_a + 8 * hf;
        if (i >= Sq) continue;
        const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
        __nv_bfloat16* dst = o + ((long long)x.b * Sq + i) * pos + (long long)x.h * HD;
#pragma unroll
        for (int j = 0; j < 16; ++j)
          *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j + 2 * t4) =
              __floats2bfloat162_rn(oacc[4 * j + 2 * hf] * inv, oacc[4 * j + 2 * hf + 1] * inv);
      }
#endif
    }
    if (wg == 0) Turn(0);  // warpgroup 1's last pass: every barrier ends balanced
#if EPI
    if ((threadIdx.x & 127) == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
  }
}
