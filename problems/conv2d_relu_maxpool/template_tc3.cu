// conv2d_relu_maxpool template "tc3": y = max_pool2d(relu(conv2d(x, weight,
// bias)), 3, 2) at fp32 accuracy on the tensor cores, fused. The convolution
// is conv2d's "tc3" template (see problems/conv2d/template_tc3.cu: implicit
// GEMM, 3xTF32 split with per-k-step flush, weights pre-split in fragment
// order and streamed by cp.async, input rows staged in shared memory and
// gathered as A), for the same geometry (C = 3, 11 x 11, stride 4, padding 2,
// OC = 96, OW = 55; pool 3 x 3 stride 2, PW = 27; constraints in problem.json).
//
// A tile is a band of R conv rows (R even) of one image, all 96 channels. After
// its K loop the block writes relu(acc + bias) to a shared [96][R][56] tile
// (over the staging buffers) and pools from there. Bands do not overlap, so no
// conv row is computed twice: a pooled row whose 3 conv rows straddle two
// bands gets a partial max from each, merged in y with an integer atomicMax
// (ReLU makes every value >= +0, and non-negative floats order like their
// bit patterns). y must therefore start at +0: the first launch zeroes it
// (and splits the weights). Pooled rows wholly inside a band are stored.
//
// Tunable through the -D params:
//   R       conv rows per tile (even)
//   MT      m16 tiles per warp
//   KC      k steps per B pipeline stage (divides 48)
//   STAGES  B pipeline depth
//   NCTA    persistent blocks (the grid)
// Block: 32 * WARPS threads. Dynamic shared memory: SMEM_BYTES below (the
// plan's expression must equal it).

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
#define CT_PITCH 56                    // conv tile row pitch (55 columns)
#define CT_FLOATS (CONV_OC * R * CT_PITCH)
#define PW_ 27
// Shared layout: the koff table (written once), then either the staging
// buffers (input rows, B stages) or, between a tile's K loop and the next
// tile, the conv tile.
#define STAGING_FLOATS (X_FLOATS + STAGES * B_STAGE_FLOATS)
#define SMEM_FLOATS (KT_INTS + (STAGING_FLOATS > CT_FLOATS ? STAGING_FLOATS : CT_FLOATS))

#if WSTEPS % KC
#error "KC must divide 48"
#endif
#if R % 2
#error "R must be even"
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
__device__ __forceinline__ void sts32(unsigned addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v));
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

// wsp[s][j][lane][4] (see conv2d's template), k >= 363 zero in both parts;
// and y = +0 (the pooled rows merged by atomicMax start from it). Grid-stride
// over both jobs.
extern "C" __global__ void __launch_bounds__(256)
conv2d_relu_maxpool_tc3_prep(const float* __restrict__ weight, float* __restrict__ wsp,
                             float* __restrict__ y, int N) {
  const int stride = gridDim.x * 256;
  for (int e = blockIdx.x * 256 + threadIdx.x; e < WSTEPS * NT * 32; e += stride) {
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
  // 96 * 27 * 27 is a multiple of 4 and y is 16-byte aligned.
  const long long n4 = (long long)N * CONV_OC * PW_ * PW_ / 4;
  for (long long e = blockIdx.x * 256 + threadIdx.x; e < n4; e += stride)
    reinterpret_cast<float4*>(y)[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

extern "C" __global__ void __maxnreg__(REGCAP)
conv2d_relu_maxpool_tc3(const float* __restrict__ x, const float* __restrict__ wsp,
                        const float* __restrict__ bias, float* __restrict__ y, int N, int H, int W,
                        int OH, int PH) {
  extern __shared__ __align__(16) float smem[];
  int* kt = reinterpret_cast<int*>(smem);  // [WSTEPS][4][2]
  float* xs = smem + KT_INTS;               // [C][XROWS][XW]
  float* bs = xs + X_FLOATS;                // STAGES x [KC][NT][32][4]

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
    // 8j + 2t + (e % 2). The conv tile overlays the staging buffers, which
    // every warp must be done reading (no copies are in flight: the last
    // NCHUNK issue nothing).
    __syncthreads();
    // The conv tile [96][R][CT_PITCH] overlays xs; 32-bit shared addresses
    // (generic pointers would cost a register pair each).
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = 16 * (MT * warp + i) + g + 8 * h;
        if (m < PIX) {
          const unsigned dst = xs_a + 4 * (m / CONV_OW * CT_PITCH + m % CONV_OW + 2 * t * (R * CT_PITCH));
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int oc = 8 * j + 2 * t + e;
              sts32(dst + 4 * (8 * j + e) * (R * CT_PITCH), fmaxf(acc[i][j][2 * h + e] + bias[oc], 0.0f));
            }
        }
      }
    __syncthreads();
    // Pooled rows p = oh0 / 2 - 1 .. oh0 / 2 + R / 2 - 1 touch this band: the
    // first through the band's first conv row only, the last through the
    // band's last two (its third row is the next band's first).
    const int p0 = oh0 / 2 - 1;
    float* ybase = y + (long long)n * CONV_OC * PH * PW_;
    for (int e = tid; e < CONV_OC * (R / 2 + 1) * PW_; e += THREADS) {
      const int pw = e % PW_;
      const int q = e / PW_ % (R / 2 + 1);
      const int oc = e / (PW_ * (R / 2 + 1));
      const int p = p0 + q;
      if (p < 0 || p >= PH) continue;
      float mx = 0.0f;
      int rows = 0;
#pragma unroll
      for (int dy = 0; dy < 3; ++dy) {
        const int lr = 2 * p + dy - oh0;
        if (lr < 0 || lr >= R) continue;
        ++rows;
        const unsigned src = xs_a + 4 * ((oc * R + lr) * CT_PITCH + 2 * pw);
        mx = fmaxf(mx, fmaxf(fmaxf(lds32(src), lds32(src + 4)), lds32(src + 8)));
      }
      float* dst = ybase + ((long long)oc * PH + p) * PW_ + pw;
      if (rows == 3)
        *dst = mx;
      else
        atomicMax(reinterpret_cast<int*>(dst), __float_as_int(mx));
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
