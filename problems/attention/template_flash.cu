// attention, FlashAttention-2-style template for sm_80+ (tuned on Hopper):
// causal softmax(q k^T / sqrt(D)) v, bottom-right mask, bf16 in and out,
// fp32 accumulation and an fp32 online softmax, o rounded once. D = 128.
//
// q, o: [B, Sq, H, D]; k, v: [B, Skv, H, D], contiguous row-major: position i
// of head h of batch b is at ((b*S + i)*H + h)*D, so consecutive positions of
// one head are H*D elements apart. Query i sees key j when j <= i + (Skv - Sq)
// and j < Skv.
//
// One block of BM/(16*MT) warps per (BM-query tile, head, batch); each warp
// owns 16*MT query rows (MT m-tiles sharing every K and V fragment it loads), keeps its Q fragments, the fp32 output accumulator (16 x 128)
// and the running max and sum of its rows in registers. K and V tiles of BN
// keys stream through STAGES shared-memory buffers with cp.async (zero-filled
// past Skv), each row of 256 bytes stored with its 16-byte chunks XOR-swizzled
// by the row index so that ldmatrix is free of bank conflicts. S = Q K^T and
// O += P V run on tensor cores (mma.sync m16n8k16, bf16 inputs, fp32
// accumulators). Key tiles past the last key the tile's bottom row sees are
// never loaded; only tiles that cross the diagonal or the end of the keys are
// masked. Query tiles are issued heaviest first.
//
// PSPLIT: how P (fp32) enters the P V product. 0 rounds P to bf16 once, as
// FlashAttention does: about 2^-9 relative error per weight, which moves o
// off the correctly rounded bf16 value in far more elements than an fp32
// kernel does (it fails the strict check). 1 splits each probability into a
// bf16 part and a bf16 remainder (about 16 bits, two MMAs per step), 2 into
// three parts (about 24 bits, three MMAs): fp32 precision, at 1.5x or 2x the
// tensor-core work of the plain scheme.
//
// Accuracy history (H200, 2026-12-01): the first version failed the strict
// check at Sq = Skv = 8192 on the `sharp` set (about 150 of 33.5M elements
// off by up to 5e-4 x their row's RMS, 1e-4 allowed), from a rescale factor
// that was not exactly 1 while the row max stayed (see the softmax below and
// docs/notes/attention-templates.md). The fix is not yet measured on a GPU.
//
// Entry points:
//   attn_flash(q, k, v, o, B, H, Sq, Skv)                   grid (ceil_div(Sq, BM), H, B)
//   attn_flash_split(q, k, v, po, pm, pl, B, H, Sq, Skv, NSPLIT)  grid (ceil_div(Sq, BM), H, B * NSPLIT):
//       split s covers keys [s*chunk, (s+1)*chunk), chunk = ceil_div(ceil_div(Skv, NSPLIT), BN) * BN,
//       and writes its unnormalized fp32 accumulator po [NSPLIT][B][Sq][H][D], its row max pm and
//       sum pl [NSPLIT][B][Sq][H] (every row, empty splits as -inf / 0 / 0);
//   attn_combine(po, pm, pl, o, B, H, Sq, NSPLIT)           one warp per (b, i, h), 4 warps per block:
//       o = sum_s w_s po_s / sum_s w_s pl_s, w_s = exp(scale (pm_s - max_s pm_s)).
// Dynamic shared memory of both flash kernels: 256 * (BM + 2 * STAGES * BN) bytes.
#include <cuda_bf16.h>

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef PSPLIT
#define PSPLIT 1
#endif
#ifndef MINB
#define MINB 1
#endif
#ifndef MT
#define MT 1
#endif

#define HD 128
#define NW (BM / (16 * MT))
#define NT (NW * 32)
#define ROWB (HD * 2)  // bytes of one row in shared memory

#if BM % (16 * MT) != 0 || BN % 16 != 0 || STAGES < 2 || (BN * 16) % NT != 0 || (BM * 16) % NT != 0 || PSPLIT < 0 || PSPLIT > 2
#error "attn_flash: BM must be a multiple of 16*MT and BN of 16, STAGES >= 2, PSPLIT 0..2, and a tile's 16-byte chunks must split evenly over the threads"
#endif
#define NP (PSPLIT + 1)  // bf16 terms each probability is split into

namespace {

__device__ __forceinline__ unsigned swz(int row, int chunk) {
  return (unsigned)(row * ROWB + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void cp_async16(unsigned saddr, const void* g, bool valid) {
  const int n = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(g), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Splits (x0, x1) into NP pairs of bf16 whose sum is (x0, x1) to about 8*NP
// bits: part 0 is the rounded value, each further part the rounded remainder.
__device__ __forceinline__ void split_bf16(float x0, float x1, unsigned* parts) {
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);  // .x (low half) = the lower column
    parts[p] = *reinterpret_cast<unsigned*>(&h);
    x0 -= __low2float(h);
    x1 -= __high2float(h);
  }
}

// Loads rows [r0, r0 + ROWS) of a [positions][H][HD] tensor (rows `pos`
// elements apart) into a swizzled tile; rows at or past `limit` are zeros.
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned sdst, const __nv_bfloat16* base, long long pos, int r0,
                                          int limit) {
#pragma unroll
  for (int c = threadIdx.x; c < ROWS * 16; c += NT) {
    const int r = c >> 4, ch = c & 15, row = r0 + r;
    const bool ok = row < limit;
    cp_async16(sdst + swz(r, ch), base + (ok ? row : 0) * pos + ch * 8, ok);
  }
}

template <bool SPLIT>
__device__ __forceinline__ void flash_body(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                           const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o,
                                           float* __restrict__ po, float* __restrict__ pm, float* __restrict__ pl,
                                           int B, int H, int Sq, int Skv, int nsplit) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sQ = (unsigned)__cvta_generic_to_shared(smem);
  const unsigned sK = sQ + BM * ROWB;
  const unsigned sV = sK + STAGES * BN * ROWB;
  const float NEG_INF = -__int_as_float(0x7f800000);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3;  // the mma fragment's row group and column pair
  const int qtile = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y;
  const int b = SPLIT ? blockIdx.z / nsplit : blockIdx.z;
  const int split = SPLIT ? blockIdx.z % nsplit : 0;
  const int q0 = qtile * BM, off = Skv - Sq;
  const int w0 = warp * 16 * MT;  // the warp's first row in the tile
  const long long pos = (long long)H * HD;
  const __nv_bfloat16* qb = q + ((long long)b * Sq * H + h) * HD;
  const __nv_bfloat16* kb = k + ((long long)b * Skv * H + h) * HD;
  const __nv_bfloat16* vb = v + ((long long)b * Skv * H + h) * HD;
  const float sl2 = rsqrtf((float)HD) * 1.4426950408889634f;  // softmax scale times log2(e)

  int kbeg = 0, kend = min(Skv, q0 + BM + off);  // keys [kbeg, kend) are visible to some row here
  if (SPLIT) {
    const int chunk = ((Skv + nsplit - 1) / nsplit + BN - 1) / BN * BN;
    kbeg = split * chunk;
    kend = min(kend, kbeg + chunk);
  }
  const int ntiles = kend > kbeg ? (kend - kbeg + BN - 1) / BN : 0;

  load_tile<BM>(sQ, qb, pos, q0, Sq);
  if (ntiles > 0) {
    load_tile<BN>(sK, kb, pos, kbeg, Skv);
    load_tile<BN>(sV, vb, pos, kbeg, Skv);
  }
  cp_commit();
#pragma unroll
  for (int s = 1; s < STAGES - 1; ++s) {
    if (s < ntiles) {
      load_tile<BN>(sK + s * BN * ROWB, kb, pos, kbeg + s * BN, Skv);
      load_tile<BN>(sV + s * BN * ROWB, vb, pos, kbeg + s * BN, Skv);
    }
    cp_commit();
  }

  // Per m-tile mt (rows w0 + 16 mt + g and + 8): the output accumulator, the
  // running max m and this thread's part of the running sum l.
  float oacc[MT][HD / 8][4];
  float m[MT][2], l[MT][2];
  unsigned qf[MT][HD / 16][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) oacc[mt][n][0] = oacc[mt][n][1] = oacc[mt][n][2] = oacc[mt][n][3] = 0.0f;
    m[mt][0] = m[mt][1] = NEG_INF;
    l[mt][0] = l[mt][1] = 0.0f;
  }
  const int mi = lane >> 3, mr = lane & 7;  // which 8x8 matrix of an x4 ldmatrix this lane addresses

  for (int t = 0; t < ntiles; ++t) {
    cp_wait<STAGES - 2>();
    __syncthreads();  // tile t has landed, and every warp is done with tile t - 1
    {
      const int nt = t + STAGES - 1;
      if (nt < ntiles) {
        const int st = nt % STAGES;
        load_tile<BN>(sK + st * BN * ROWB, kb, pos, kbeg + nt * BN, Skv);
        load_tile<BN>(sV + st * BN * ROWB, vb, pos, kbeg + nt * BN, Skv);
      }
      cp_commit();
    }
    if (t == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < HD / 16; ++kk)
          ldsm_x4(sQ + swz(w0 + mt * 16 + mr + ((mi & 1) << 3), kk * 2 + (mi >> 1)), qf[mt][kk][0], qf[mt][kk][1],
                  qf[mt][kk][2], qf[mt][kk][3]);
    }
    const unsigned cK = sK + (t % STAGES) * BN * ROWB, cV = sV + (t % STAGES) * BN * ROWB;

    float sacc[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) sacc[mt][n][0] = sacc[mt][n][1] = sacc[mt][n][2] = sacc[mt][n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < BN / 16; ++nn) {
        unsigned b0, b1, b2, b3;
        ldsm_x4(cK + swz(nn * 16 + mr + ((mi >> 1) << 3), kk * 2 + (mi & 1)), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(sacc[mt][2 * nn], qf[mt][kk], b0, b1);
          mma_bf16(sacc[mt][2 * nn + 1], qf[mt][kk], b2, b3);
        }
      }
    }

    const int k0 = kbeg + t * BN;
    if (k0 + BN > Skv || k0 + BN - 1 > q0 + off) {  // the tile crosses the diagonal or the end of the keys
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = q0 + w0 + mt * 16 + g + ((e >> 1) << 3), j = k0 + n * 8 + 2 * t4 + (e & 1);
            if (!(j < Skv && j <= i + off)) sacc[mt][n][e] = NEG_INF;
          }
    }

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = NEG_INF;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n) mx = fmaxf(mx, fmaxf(sacc[mt][n][2 * hf], sacc[mt][n][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[mt][hf], mx);
        const float m_use = m_new == NEG_INF ? 0.0f : m_new;  // a row that sees no key yet
        // p = 2^(s*sl2 - base) with base = m*sl2 rounded once (__fmul_rn: never
        // contracted into an FMA), and the rescale factor is the exact ratio of
        // the old and new bases: exactly 1 while the max stays, so the weights
        // of early and late tiles telescope. (Computing alpha as
        // 2^(fma(m_old, sl2, -base)) gave 2^(rounding error of m*sl2) != 1 on
        // every tile: a drift of (1 + 5e-6)^tiles between early and late keys,
        // up to 5e-4 x the row RMS at Skv = 8192 on the sharp set.)
        const float base = __fmul_rn(m_use, sl2);
        const float alpha = exp2f(__fmul_rn(m[mt][hf], sl2) - base);  // m = -inf: 0 (nothing accumulated)
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int e = 2 * hf; e < 2 * hf + 2; ++e) {
            const float p = exp2f(fmaf(sacc[mt][n][e], sl2, -base));  // -inf: 0
            sacc[mt][n][e] = p;
            sum += p;
          }
        l[mt][hf] = l[mt][hf] * alpha + sum;
        m[mt][hf] = m_new;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n) {
          oacc[mt][n][2 * hf] *= alpha;
          oacc[mt][n][2 * hf + 1] *= alpha;
        }
      }

#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned a[MT][4][NP];  // the A fragment of P, split into NP bf16 terms
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        split_bf16(sacc[mt][2 * kk][0], sacc[mt][2 * kk][1], a[mt][0]);
        split_bf16(sacc[mt][2 * kk][2], sacc[mt][2 * kk][3], a[mt][1]);
        split_bf16(sacc[mt][2 * kk + 1][0], sacc[mt][2 * kk + 1][1], a[mt][2]);
        split_bf16(sacc[mt][2 * kk + 1][2], sacc[mt][2 * kk + 1][3], a[mt][3]);
      }
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        unsigned b0, b1, b2, b3;
        ldsm_x4_t(cV + swz(kk * 16 + mr + ((mi & 1) << 3), dn * 2 + (mi >> 1)), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int p = 0; p < NP; ++p) {
            const unsigned ap[4] = {a[mt][0][p], a[mt][1][p], a[mt][2][p], a[mt][3][p]};
            mma_bf16(oacc[mt][2 * dn], ap, b0, b1);
            mma_bf16(oacc[mt][2 * dn + 1], ap, b2, b3);
          }
      }
    }
  }
  cp_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float lsum = l[mt][hf];
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
      lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
      const int i = q0 + w0 + mt * 16 + g + 8 * hf;
      if (i >= Sq) continue;
      if (SPLIT) {
        const long long row = (((long long)split * B + b) * Sq + i) * H + h;
        float* dst = po + row * HD;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n)
          *reinterpret_cast<float2*>(dst + n * 8 + 2 * t4) = make_float2(oacc[mt][n][2 * hf], oacc[mt][n][2 * hf + 1]);
        if (t4 == 0) {
          pm[row] = m[mt][hf];
          pl[row] = lsum;
        }
      } else {
        const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
        __nv_bfloat16* dst = o + ((long long)b * Sq + i) * pos + (long long)h * HD;
#pragma unroll
        for (int n = 0; n < HD / 8; ++n)
          *reinterpret_cast<__nv_bfloat162*>(dst + n * 8 + 2 * t4) =
              __floats2bfloat162_rn(oacc[mt][n][2 * hf] * inv, oacc[mt][n][2 * hf + 1] * inv);
      }
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(NT, MINB)
attn_flash(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
           const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o, int B, int H, int Sq, int Skv) {
  flash_body<false>(q, k, v, o, nullptr, nullptr, nullptr, B, H, Sq, Skv, 1);
}

extern "C" __global__ void __launch_bounds__(NT, MINB)
attn_flash_split(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                 const __nv_bfloat16* __restrict__ v, float* __restrict__ po, float* __restrict__ pm,
                 float* __restrict__ pl, int B, int H, int Sq, int Skv, int nsplit) {
  flash_body<true>(q, k, v, nullptr, po, pm, pl, B, H, Sq, Skv, nsplit);
}

extern "C" __global__ void __launch_bounds__(128)
attn_combine(const float* __restrict__ po, const float* __restrict__ pm, const float* __restrict__ pl,
             __nv_bfloat16* __restrict__ o, int B, int H, int Sq, int nsplit) {
  const float NEG_INF = -__int_as_float(0x7f800000);
  const long long rows = (long long)B * Sq * H;
  const long long row = blockIdx.x * 4ll + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float sl2 = rsqrtf((float)HD) * 1.4426950408889634f;
  float mx = NEG_INF;
  for (int s = 0; s < nsplit; ++s) mx = fmaxf(mx, pm[s * rows + row]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, den = 0.0f;
  if (mx != NEG_INF) {
    for (int s = 0; s < nsplit; ++s) {
      const float ms = pm[s * rows + row];
      if (ms == NEG_INF) continue;  // this split saw no key of the row
      const float w = exp2f(__fmul_rn(ms, sl2) - __fmul_rn(mx, sl2));  // the bases the split's p used
      den += w * pl[s * rows + row];
      const float4 x = *reinterpret_cast<const float4*>(po + (s * rows + row) * HD + lane * 4);
      acc[0] += w * x.x;
      acc[1] += w * x.y;
      acc[2] += w * x.z;
      acc[3] += w * x.w;
    }
  }
  const float inv = den > 0.0f ? 1.0f / den : 0.0f;
  __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(o + row * HD + lane * 4);
  dst[0] = __floats2bfloat162_rn(acc[0] * inv, acc[1] * inv);
  dst[1] = __floats2bfloat162_rn(acc[2] * inv, acc[3] * inv);
}
