// conv2d template "tc3": y = conv2d(x, weight, bias) at fp32 accuracy on the
// tensor cores, as an implicit GEMM with a 3xTF32 split. Specialized to the
// problem's geometry (C = 3, 11 x 11 filter, stride 4, padding 2, OC = 96,
// OW = 55; problem.json's constraints pin these dims; N, H, W, OH are runtime).
//
// GEMM view: M = output pixels, N = the 96 channels, K = c * 121 + kh * 11 + kw
// (363, padded with zero weights to 46 k steps of 8 = 368, or 48 when KC is 4). Every operand is
// split into big = tf32(v) and small = tf32(v - big); each k step of 8 sums
// small*big + big*small + big*big in mma.sync m16n8k8 from zero, and that
// partial sum is added to the running sum with an fp32 add (FLUSH): tensor
// cores truncate their internal additions, so a running sum carried through
// the mmas drifts (see problems/matmul/template_split.cu and its notes).
//
// B (weights) is split once by conv2d_tc3_wsplit into `wsp`, already in
// fragment order: for k step s, n tile j (8 channels) and lane (g, t) the four
// floats {big(k, n), big(k + 4, n), small(k, n), small(k + 4, n)} with
// k = 8s + t, n = 8j + g. A warp's B fragments of one (s, j) are then one
// 512-byte LDS.128 (4 wavefronts, no conflicts), and the block streams B from
// L2 in chunks of KC k steps with a STAGES-deep cp.async pipeline.
//
// A is never materialized: a tile (image, band of R output rows, all 55
// columns, all 96 channels) stages its 3 x (4R + 7) input rows in shared
// memory (zero-padded, like the regwin template), and a lane gathers A(m, k)
// from there: the address is rowoff(m) + koff(k), where rowoff(m) = 4 * XW * r
// + 4 * ow for pixel m = (r, ow) of the tile and koff(k) = c * plane + kh * XW
// + kw comes from a small shared table. The 8 lanes of an A fragment column
// read pixels 4 floats apart and the 4 k's are adjacent: bank 4g + t, no
// conflicts inside an input row.
//
// A warp owns MT m16 tiles (16 MT consecutive pixels of the tile) x 96
// channels: 48 MT accumulators per lane. WARPS = ceil(55 R / (16 MT)); pixels
// past 55 R and rows past OH are computed on valid addresses and not stored.
//
// Tunable through the -D params:
//   R       output rows per tile
//   MT      m16 tiles per warp
//   KC      k steps per B pipeline stage (divides 48)
//   STAGES  B pipeline depth
//   NCTA    persistent blocks (the grid)
// Block: 32 * WARPS threads. Dynamic shared memory: see SMEM_BYTES (and the
// plan's expression, which must equal it).

#ifndef R
#define R 4
#endif
#ifndef MT
#define MT 2
#endif
#ifndef KC
#define KC 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef NCTA
#define NCTA 132
#endif
// Register cap: MINB blocks of THREADS threads must fit the SM's 65536
// registers (allocated per warp in units of 8 per thread). Two blocks per SM
// when the grid asks for them (NCTA 264 on the H200's 132 SMs). An explicit
// cap rather than __launch_bounds__: with it ptxas spilled MT = 1 at 128
// registers, and uncapped it took 254 registers (with spills) for MT = 2.
#define MINB (NCTA > 132 ? 2 : 1)
// The SM's registers are four quadrants of 16384 and a block's warps are
// spread over them, so the quadrant holding the most warps sets the limit
// (a 14-warp block gets 128 per thread, not 65536 / 448 = 146).
#define REGLIM (16384 / (32 * ((MINB * WARPS + 3) / 4)) / 8 * 8)
#define REGWANT (MT == 1 ? 160 : 200)  // no spills at these (NVRTC 13.0); more only hoists loads
#define REGCAP (REGLIM > REGWANT ? REGWANT : REGLIM)

#define CONV_C 3
#define CONV_K 11
#define CONV_S 4
#define CONV_P 2
#define CONV_OC 96
#define CONV_OW 55
#define TAPS (CONV_C * CONV_K * CONV_K)  // 363
#define WSTEPS 48                        // k steps of 8 in wsp (384 >= 363)
#define NSTEP ((46 + KC - 1) / KC * KC)  // k steps run: 46 (368) rounded up to KC
#define NT (CONV_OC / 8)                 // n8 tiles: 12

#define PIX (R * CONV_OW)  // real pixels of a tile
#define WARPS ((PIX + 16 * MT - 1) / (16 * MT))
#define THREADS (WARPS * 32)
// Input rows are stored from column -PAD: index = column + 2. The last pixel
// (ow 54) reads up to index 4 * 54 + 10 = 226; XW = 228 is 4 banks mod 32.
#define XW 228
#define XROWS ((R - 1) * CONV_S + CONV_K)
#define XPLANE (XROWS * XW)
#define X_FLOATS (CONV_C * XPLANE)
#define KT_INTS (WSTEPS * 8)                   // koff table: [s][t] = (koff(8s+t), koff(8s+t+4))
#define B_STEP_FLOATS (NT * 32 * 4)           // 1536 floats = 6 KB per k step
#define B_STAGE_FLOATS (KC * B_STEP_FLOATS)
#define NCHUNK (NSTEP / KC)
#define SMEM_FLOATS (X_FLOATS + KT_INTS + STAGES * B_STAGE_FLOATS)

#if WSTEPS % KC
#error "KC must divide 48"
#endif
#if THREADS > 1024
#error "more than 1024 threads per block"
#endif
#if STAGES < 2
#error "STAGES >= 2"
#endif

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async8(unsigned dst, const float* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Shared loads through 32-bit shared addresses (NVRTC otherwise keeps 64-bit
// generic addresses for shared pointers, a register pair each).
__device__ __forceinline__ float lds32(unsigned addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ int2 lds64i(unsigned addr) {
  int2 v;
  asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint4 lds128u(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// wsp[s][j][lane][4] (see the header). k >= 363 is zero in both parts.
extern "C" __global__ void __launch_bounds__(256)
conv2d_tc3_wsplit(const float* __restrict__ weight, float* __restrict__ wsp) {
  const int e = blockIdx.x * 256 + threadIdx.x;  // (s, j, lane)
  if (e >= WSTEPS * NT * 32) return;
  const int lane = e % 32;
  const int j = e / 32 % NT;
  const int s = e / (32 * NT);
  const int k = 8 * s + lane % 4;
  const int n = 8 * j + lane / 4;
  float v[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) v[h] = k + 4 * h < TAPS ? weight[n * TAPS + k + 4 * h] : 0.0f;
  float4 o;
  o.x = __uint_as_float(to_tf32(v[0]));
  o.y = __uint_as_float(to_tf32(v[1]));
  o.z = __uint_as_float(to_tf32(v[0] - o.x));
  o.w = __uint_as_float(to_tf32(v[1] - o.y));
  reinterpret_cast<float4*>(wsp)[e] = o;
}

extern "C" __global__ void __maxnreg__(REGCAP)
conv2d_tc3(const float* __restrict__ x, const float* __restrict__ wsp,
           const float* __restrict__ bias, float* __restrict__ y, int N, int H, int W, int OH) {
  extern __shared__ __align__(16) float smem[];
  float* xs = smem;                                            // [C][XROWS][XW]
  int* kt = reinterpret_cast<int*>(smem + X_FLOATS);           // [NSTEP][4][2]
  float* bs = smem + X_FLOATS + KT_INTS;                       // STAGES x [KC][NT][32][4]

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int bands = (OH + R - 1) / R;
  const int tiles = N * bands;

  // koff(k) for k = 8s + t (+ 4); padded k read offset 0 (a finite input
  // value) against zero weights.
  for (int e = tid; e < WSTEPS * 8; e += THREADS) {
    const int s = e / 8, tt = e % 8 / 2, h = e % 2;
    const int k = 8 * s + tt + 4 * h;
    int off = 0;
    if (k < TAPS) {
      const int c = k / (CONV_K * CONV_K), rem = k % (CONV_K * CONV_K);
      off = c * XPLANE + rem / CONV_K * XW + rem % CONV_K;
    }
    kt[e] = off;
  }

  // Pixel rows of this lane's A fragments: m = 16 (MT warp + i) + g (+ 8).
  // Padding pixels (m >= PIX) read pixel 0's window and are not stored.
  int rowoff[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int m = 16 * (MT * warp + i) + g + 8 * h;
      if (m >= PIX) m = 0;
      rowoff[i][h] = m / CONV_OW * CONV_S * XW + m % CONV_OW * CONV_S;
    }

  const unsigned xs_a = smem_addr(xs);
  const unsigned kt_a = smem_addr(kt) + 8 * t;
  const unsigned bs_a = smem_addr(bs);

  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int n = tile / bands;
    const int oh0 = tile % bands * R;
    __syncthreads();  // the previous tile's reads of xs and bs are done

    // Input rows 4 oh0 - 2 .. + XROWS - 1 of each channel, as 8-byte column
    // pairs (PAD and W even: a pair is wholly inside or outside the image).
    {
      const int ih0 = oh0 * CONV_S - CONV_P;
      for (int e = tid; e < X_FLOATS / 2; e += THREADS) {
        const int c = e / (XPLANE / 2);
        const int q = e % (XPLANE / 2);
        const int ih = ih0 + q / (XW / 2);
        const int iw = q % (XW / 2) * 2 - CONV_P;
        const bool ok = ih >= 0 && ih < H && iw >= 0 && iw < W;
        const float* src = ok ? x + (((long long)n * CONV_C + c) * H + ih) * W + iw : x;
        cp_async8(xs_a + 8 * e, src, ok ? 8 : 0);
      }
    }
    auto issue_b = [&](int chunk) {
      const float* src = wsp + chunk * B_STAGE_FLOATS;
      const unsigned dst = bs_a + (chunk % STAGES) * (B_STAGE_FLOATS * 4);
      for (int e = tid; e < B_STAGE_FLOATS / 4; e += THREADS) cp_async16(dst + 16 * e, src + 4 * e);
    };
#pragma unroll
    for (int p = 0; p < STAGES - 1; ++p) {
      if (p < NCHUNK) issue_b(p);
      cp_async_commit();  // the input rows ride in group 0
    }

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll 1
    for (int ch = 0; ch < NCHUNK; ++ch) {
      asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
      __syncthreads();  // chunk ch (and the input) landed; chunk ch - 1's buffer is free
      if (ch + STAGES - 1 < NCHUNK) issue_b(ch + STAGES - 1);
      cp_async_commit();
      const unsigned bstage = bs_a + (ch % STAGES) * (B_STAGE_FLOATS * 4) + 16 * lane;
#pragma unroll 1
      for (int ks = 0; ks < KC; ++ks) {
        const int s = ch * KC + ks;
        const int2 ko = lds64i(kt_a + 32 * s);
        unsigned abig[MT][4], asmall[MT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          float a[4];
          a[0] = lds32(xs_a + 4 * (rowoff[i][0] + ko.x));
          a[1] = lds32(xs_a + 4 * (rowoff[i][1] + ko.x));
          a[2] = lds32(xs_a + 4 * (rowoff[i][0] + ko.y));
          a[3] = lds32(xs_a + 4 * (rowoff[i][1] + ko.y));
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            abig[i][e] = to_tf32(a[e]);
            asmall[i][e] = to_tf32(a[e] - __uint_as_float(abig[i][e]));
          }
        }
        const unsigned bstep = bstage + ks * (B_STEP_FLOATS * 4);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const uint4 b = lds128u(bstep + j * (32 * 16));
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_tf32(part, asmall[i], b.x, b.y);
            mma_tf32(part, abig[i], b.z, b.w);
            mma_tf32(part, abig[i], b.x, b.y);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += part[e];
          }
        }
      }
    }

    // Accumulator (i, j, e): pixel 16 (MT warp + i) + g + 8 (e / 2), channel
    // 8j + 2t + (e % 2).
    const int plane = OH * CONV_OW;
    float* ybase = y + (long long)n * CONV_OC * plane;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = 16 * (MT * warp + i) + g + 8 * h;
        const int oh = oh0 + m / CONV_OW;
        if (m < PIX && oh < OH) {
          float* dst = ybase + oh * CONV_OW + m % CONV_OW;
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int oc = 8 * j + 2 * t + e;
              dst[oc * plane] = acc[i][j][2 * h + e] + bias[oc];
            }
        }
      }
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
