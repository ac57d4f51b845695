// matmul template "split": C = A * B at fp32 accuracy on the tensor cores, by
// splitting every fp32 operand into a "big" and a "small" part and summing
// big*big + big*small + small*big (small*small is below fp32's rounding and is
// dropped). Each product term is an mma.sync with fp32 accumulation.
//
// Tunable through the -D params:
//   BM, BN            rows and columns of C computed by one block
//   BK                depth of one pipeline stage (a multiple of 16)
//   WARPS_M, WARPS_N  warp grid of the block; a warp owns a
//                     (BM / WARPS_M) x (BN / WARPS_N) tile of C
//   STAGES            cp.async pipeline depth (shared-memory stages)
//   SPLIT             how the operands are split:
//     0  3xTF32: big = tf32(x), small = tf32(x - big); three m16n8k8 TF32 mmas
//        per 8 k. Independent of the data's scale (tf32 has fp32's exponent range).
//     1  TF32 big*big plus one m16n8k16 fp16 mma that carries both cross terms
//        (its 16 k slots are the 8 k's big/small pairs). Two mma issues per
//        8 k instead of three.
//     2  fp16 split of both parts: hi = fp16(x), lo = fp16(x - hi), and the
//        three products hi*hi, hi*lo, lo*hi as m16n8k16 fp16 mmas over 16 k:
//        1.5 mma issues per 8 k.
//        fp16 has tf32's 11 significant bits but a narrow exponent range, so
//        SPLIT 1 and 2 first scale each k step's operands by powers of two
//        taken from the warp's largest |value| (see scale_exponent): their
//        accuracy then does not depend on the data's scale. They need FLUSH.
//   FLUSH             1: each k step's mmas start from zero and are added to
//                     the running sums with fp32 adds (see add4, fma4);
//                     0: the mmas accumulate into the running sums directly
//                     (SPLIT 0 only).
//
// Block: WARPS_M * WARPS_N * 32 threads. Grid: (ceil_div(N, BN), ceil_div(M, BM)).
// Dynamic shared memory: STAGES * (BM * (BK + 4) + BK * (BN + 8)) * 4 bytes.
// A is M x K, B is K x N, C is M x N, contiguous row-major; any M, N, K >= 1:
// tiles past the edges are zero-filled by cp.async and stores are guarded.
// When K or N is not a multiple of 4 the rows are not 16-byte aligned and the
// loads fall back to 4-byte copies (a uniform branch; never taken at 4096).

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef FLUSH
#define FLUSH 1
#endif

#define THREADS (WARPS_M * WARPS_N * 32)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MT (WM / 16)  // m16 tiles per warp
#define NT (WN / 8)   // n8 tiles per warp
// Row strides of the shared tiles, in floats. A rows are BK + 4 long, so the 8
// rows an ldmatrix reads start 4 banks apart and fill all 32 banks once. B rows
// are BN + 8 long (BN is a multiple of 32), so the fragment read B[k + t][n + g]
// of the lanes (g = lane / 4, t = lane % 4) hits bank 8t + g: all distinct.
#define AS (BK + 4)
#define BS (BN + 8)
#define A_STAGE (BM * AS)
#define B_STAGE (BK * BS)

#if SPLIT != 0 && !FLUSH
#error "the fp16 paths (SPLIT 1, 2) unscale each k step's partial sum, so they need FLUSH"
#endif
#if (BM % (16 * WARPS_M)) || (BN % (8 * WARPS_N)) || (BK % 16) || (BN % 32)
#error "tile shape: BM % (16 * WARPS_M), BN % (8 * WARPS_N), BK % 16 and BN % 32 must be 0"
#endif
#if ((BM * BK / 4) % THREADS) || ((BK * BN / 4) % THREADS) || (THREADS % (BN / 4))
#error "every thread must copy the same number of 16-byte chunks per stage"
#endif

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte copy with zero fill past `bytes` (0..16); `src` must be a valid
// address even when bytes == 0.
__device__ __forceinline__ void cp_async16(unsigned dst, const float* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(unsigned dst, const float* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

// Copies the 4 floats at (row, col .. col + 3) of a rows x cols matrix with
// leading dimension ld into shared memory at dst; elements outside are zero.
__device__ __forceinline__ void copy_chunk(unsigned dst, const float* base, int row, int col,
                                           int rows, int cols, int ld, bool aligned) {
  if (aligned) {
    int n = cols - col;
    n = (row < rows) ? (n < 0 ? 0 : (n > 4 ? 4 : n)) : 0;
    const float* src = n > 0 ? base + (long long)row * ld + col : base;
    cp_async16(dst, src, n * 4);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const bool ok = row < rows && col + i < cols;
      cp_async4(dst + 4 * i, ok ? base + (long long)row * ld + col + i : base, ok ? 4 : 0);
    }
  }
}

__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// Two floats as one f16x2 register; `lo` lands in the low half (the element
// with the smaller k index of an mma fragment pair).
__device__ __forceinline__ unsigned pack_f16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ void unpack_f16(unsigned h, float& lo, float& hi) {
  asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "r"(h));
}

__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// FLUSH: the fp32 adds inside an mma truncate (round toward zero) on NVIDIA
// tensor cores, so a running sum carried through the mmas drifts toward zero
// by up to an ulp of the sum per mma; a model of 3xTF32 at K = 4096 gives
// ~4e-5 relative L2 error, 30x the plain-fp32 level (docs/notes). With FLUSH
// the mmas of one k step start from zero, where their truncation is relative
// to the small partial sum, and an ordinary round-to-nearest FADD adds that
// partial sum to the running total.
__device__ __forceinline__ void add4(float* acc, const float* part) {
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] += part[e];
}

// fp16 has tf32's 11 significant bits but only 5 exponent bits. The fp16
// paths (SPLIT 1, 2) therefore scale each k step's operands by powers of two
// (exact) chosen from the largest |value| the warp holds for that step,
// bringing it to [2^14, 2^15): the hi/big parts stay below fp16's 65504 and
// the lo/small parts keep full precision down to 2^-17 of that largest value,
// whatever the data's scale. The partial sum of the step is unscaled by the
// inverse product of the two scales as it is added to the running sum.
__device__ __forceinline__ float warp_max(float m) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

// Exponent e of the scale 2^e for a warp maximum m >= 0: 14 - floor(log2 m),
// kept within fp32's normal exponents (m = 0 gives 2^127: all values are 0).
__device__ __forceinline__ int scale_exponent(float m) {
  const int e = 14 - ((__float_as_int(m) >> 23) - 127);
  return e < -126 ? -126 : (e > 127 ? 127 : e);
}

__device__ __forceinline__ float pow2(int e) { return __int_as_float((e + 127) << 23); }

// Inverse of 2^ea * 2^eb, flushed to 0 below fp32's normal range (a step
// whose scaled partial sum times it would be below 2^-100 anyway).
__device__ __forceinline__ float inv_pow2_sum(int ea, int eb) {
  const int e = -(ea + eb);
  return e < -126 ? 0.0f : pow2(e > 127 ? 127 : e);
}

// A shared-memory load the compiler may not merge with another load of the
// same address (the maxima pass must not keep B values alive until the split).
__device__ __forceinline__ float lds_once(const float* p) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(smem_addr(p)));
  return v;
}

__device__ __forceinline__ void fma4(float* acc, const float* part, float scale) {
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] = fmaf(part[e], scale, acc[e]);
}

// A fragment of one m16 x k8 tile as fp32 bits: x[0] = A(g, t), x[1] = A(g + 8, t),
// x[2] = A(g, t + 4), x[3] = A(g + 8, t + 4). ldmatrix on 16-byte rows hands lane
// l the word (l / 4, l % 4) of each 8 x 4 fp32 matrix, which is exactly this.
__device__ __forceinline__ void load_a(float* x, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3])
               : "r"(addr));
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
matmul_split(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
             int M, int N, int K) {
  extern __shared__ __align__(16) float smem[];
  float* As = smem;                     // STAGES x [BM][AS]
  float* Bs = smem + STAGES * A_STAGE;  // STAGES x [BK][BS]

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int wm0 = (warp / WARPS_N) * WM;
  const int wn0 = (warp % WARPS_N) * WN;
  const int row0 = blockIdx.y * BM;
  const int col0 = blockIdx.x * BN;
  const bool aligned = ((K | N) & 3) == 0;

  // Each thread copies the 16-byte chunks (ra + i * A_RSTEP, qa) of the A tile
  // and (rb + i * B_RSTEP, qb) of the B tile: consecutive threads take
  // consecutive chunks of a row, so every warp reads whole 128-byte lines.
  constexpr int A_RSTEP = THREADS / (BK / 4);
  constexpr int B_RSTEP = THREADS / (BN / 4);
  const int ra = tid / (BK / 4), qa = (tid % (BK / 4)) * 4;
  const int rb = tid / (BN / 4), qb = (tid % (BN / 4)) * 4;
  const float* a_src = A + (long long)(row0 + ra) * K + qa;
  const float* b_src = B + (long long)rb * N + col0 + qb;
  const unsigned a_dst0 = smem_addr(As + ra * AS + qa);
  const unsigned b_dst0 = smem_addr(Bs + rb * BS + qb);
  // Interior blocks of aligned matrices need no bounds (all of them at 4096).
  const bool interior = aligned && row0 + BM <= M && col0 + BN <= N;
  const long long a_step = (long long)A_RSTEP * K, b_step = (long long)B_RSTEP * N;

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    const unsigned a_dst = a_dst0 + stage * (A_STAGE * 4);
    const unsigned b_dst = b_dst0 + stage * (B_STAGE * 4);
    if (interior && k0 + BK <= K) {
      // Pointers stepped chunk by chunk rather than one hoisted address per
      // chunk: the main loop has no registers to spare.
      const float* pa = a_src + k0;
#pragma unroll
      for (int i = 0; i < (BM * BK / 4) / THREADS; ++i, pa += a_step)
        cp_async16(a_dst + i * (A_RSTEP * AS * 4), pa, 16);
      const float* pb = b_src + (long long)k0 * N;
#pragma unroll
      for (int i = 0; i < (BK * BN / 4) / THREADS; ++i, pb += b_step)
        cp_async16(b_dst + i * (B_RSTEP * BS * 4), pb, 16);
    } else {
      const float* Ablk = A + (long long)row0 * K;
      const float* Bblk = B + col0;
#pragma unroll
      for (int i = 0; i < (BM * BK / 4) / THREADS; ++i)
        copy_chunk(a_dst + i * (A_RSTEP * AS * 4), Ablk, ra + i * A_RSTEP, k0 + qa, M - row0, K, K,
                   aligned);
#pragma unroll
      for (int i = 0; i < (BK * BN / 4) / THREADS; ++i)
        copy_chunk(b_dst + i * (B_RSTEP * BS * 4), Bblk, k0 + rb + i * B_RSTEP, qb, K, N - col0, N,
                   aligned);
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const int ktiles = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }

  // Per-lane ldmatrix row address offset inside an A stage: lanes 0-15 give
  // rows 0-15 at k 0..3, lanes 16-31 rows 0-15 at k 4..7.
  const int a_lane_off = (wm0 + (lane & 15)) * AS + (lane >> 4) * 4;
  const int b_lane_off = t * BS + wn0 + g;

  for (int kt = 0; kt < ktiles; ++kt) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
    __syncthreads();
    // The stage refilled here was read in iteration kt - 1, which every warp
    // has finished: they all passed the barrier above.
    {
      const int next = kt + STAGES - 1;
      if (next < ktiles) load_stage(next % STAGES, next);
      asm volatile("cp.async.commit_group;\n" ::);
    }
    const int stage = kt % STAGES;
    const unsigned a_base = smem_addr(As + stage * A_STAGE + a_lane_off);
    const float* b_base = Bs + stage * B_STAGE + b_lane_off;

#if SPLIT == 2
    // Not unrolled: unrolled, ptxas hoists the next step's fragment loads and
    // spills at 255 registers.
#pragma unroll 1
    for (int ks = 0; ks < BK; ks += 16) {
      // Two k8 steps in one k16 mma: the lane's k slots 2t, 2t+1, 2t+8, 2t+9
      // hold k = t, t+4 of the first step and t, t+4 of the second, for A and
      // B alike, so the k16 sum is the 16-term dot product in a permuted order.
      // A and B are read twice (once here for their maxima, once below to
      // split them) rather than held: there are no registers for them.
      float ma = 0.0f, mb = 0.0f;
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        float x[8];
        load_a(x, a_base + (i * 16 * AS + ks) * 4);
        load_a(x + 4, a_base + (i * 16 * AS + ks + 8) * 4);
#pragma unroll
        for (int r = 0; r < 8; ++r) ma = fmaxf(ma, fabsf(x[r]));
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float* bp = b_base + ks * BS + j * 8;
        mb = fmaxf(mb, fmaxf(fmaxf(fabsf(lds_once(bp)), fabsf(lds_once(bp + 4 * BS))),
                             fmaxf(fabsf(lds_once(bp + 8 * BS)), fabsf(lds_once(bp + 12 * BS)))));
      }
      const int ea = scale_exponent(warp_max(ma)), eb = scale_exponent(warp_max(mb));
      const float sa = pow2(ea), sb = pow2(eb), unscale = inv_pow2_sum(ea, eb);
      unsigned ahi[MT][4], alo[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        float x0[4], x1[4];
        load_a(x0, a_base + (i * 16 * AS + ks) * 4);
        load_a(x1, a_base + (i * 16 * AS + ks + 8) * 4);
        const float xs[4][2] = {{x0[0] * sa, x0[2] * sa},
                                {x0[1] * sa, x0[3] * sa},
                                {x1[0] * sa, x1[2] * sa},
                                {x1[1] * sa, x1[3] * sa}};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          ahi[i][r] = pack_f16(xs[r][0], xs[r][1]);
          float h0, h1;
          unpack_f16(ahi[i][r], h0, h1);
          alo[i][r] = pack_f16(xs[r][0] - h0, xs[r][1] - h1);
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float* bp = b_base + ks * BS + j * 8;
        const float ys[2][2] = {{bp[0] * sb, bp[4 * BS] * sb}, {bp[8 * BS] * sb, bp[12 * BS] * sb}};
        unsigned bhi[2], blo[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          bhi[r] = pack_f16(ys[r][0], ys[r][1]);
          float h0, h1;
          unpack_f16(bhi[r], h0, h1);
          blo[r] = pack_f16(ys[r][0] - h0, ys[r][1] - h1);
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_f16(part, alo[i], bhi);
          mma_f16(part, ahi[i], blo);
          mma_f16(part, ahi[i], bhi);
          fma4(acc[i][j], part, unscale);
        }
      }
    }
#else
    // Not unrolled: unrolled, ptxas hoists the next step's fragment loads and
    // spills at 255 registers.
#pragma unroll 1
    for (int ks = 0; ks < BK; ks += 8) {
      float xa[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) load_a(xa[i], a_base + (i * 16 * AS + ks) * 4);
#if SPLIT == 0
      unsigned abig[MT][4], asmall[MT][4];
      const float sa = 1.0f, sb = 1.0f;
#else
      unsigned abig[MT][4], apair[MT][4];  // apair: f16x2 (big, small) per element
      float ma = 0.0f, mb = 0.0f;
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) ma = fmaxf(ma, fabsf(xa[i][r]));
      // B is read twice (once here for its maximum, once below to split it)
      // rather than held: there are no registers for it.
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float* bp = b_base + ks * BS + j * 8;
        mb = fmaxf(mb, fmaxf(fabsf(lds_once(bp)), fabsf(lds_once(bp + 4 * BS))));
      }
      const int ea = scale_exponent(warp_max(ma)), eb = scale_exponent(warp_max(mb));
      const float sa = pow2(ea), sb = pow2(eb), unscale = inv_pow2_sum(ea, eb);
#endif
#pragma unroll
      for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float x = xa[i][r] * sa;
          abig[i][r] = to_tf32(x);
          const float rest = x - __uint_as_float(abig[i][r]);
#if SPLIT == 0
          asmall[i][r] = to_tf32(rest);
#else
          apair[i][r] = pack_f16(__uint_as_float(abig[i][r]), rest);
#endif
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float* bp = b_base + ks * BS + j * 8;
        const float y[2] = {bp[0] * sb, bp[4 * BS] * sb};
        unsigned bbig[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) bbig[r] = to_tf32(y[r]);
#if SPLIT == 0
        unsigned bsmall[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) bsmall[r] = to_tf32(y[r] - __uint_as_float(bbig[r]));
        // Small terms first (as in the fp16 path).
#if FLUSH
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_tf32(part, asmall[i], bbig);
          mma_tf32(part, abig[i], bsmall);
          mma_tf32(part, abig[i], bbig);
          add4(acc[i][j], part);
        }
#else
        // One pass per term over the MT accumulators keeps two mmas on the
        // same accumulator MT issues apart.
#pragma unroll
        for (int i = 0; i < MT; ++i) mma_tf32(acc[i][j], asmall[i], bbig);
#pragma unroll
        for (int i = 0; i < MT; ++i) mma_tf32(acc[i][j], abig[i], bsmall);
#pragma unroll
        for (int i = 0; i < MT; ++i) mma_tf32(acc[i][j], abig[i], bbig);
#endif
#else
        // The A pair (big, small) meets the B pair (small, big): one k16 mma
        // sums big*small + small*big over the 8 k's.
        unsigned bpair[2];
#pragma unroll
        for (int r = 0; r < 2; ++r)
          bpair[r] = pack_f16(y[r] - __uint_as_float(bbig[r]), __uint_as_float(bbig[r]));
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_f16(part, apair[i], bpair);
          mma_tf32(part, abig[i], bbig);
          fma4(acc[i][j], part, unscale);
        }
#endif
      }
    }
#endif
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");

  // Accumulator (i, j) holds C rows wm0 + 16i + g (+ 8) and columns
  // wn0 + 8j + 2t (+ 1).
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + wm0 + i * 16 + g + h * 8;
      if (r >= M) continue;
      float* crow = C + (long long)r * N;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int c = col0 + wn0 + j * 8 + 2 * t;
        const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (c + 1 < N && (N & 1) == 0) {
          *reinterpret_cast<float2*>(crow + c) = make_float2(v0, v1);
        } else {
          if (c < N) crow[c] = v0;
          if (c + 1 < N) crow[c + 1] = v1;
        }
      }
    }
  }
}
