// conv2d template "regwin": y = conv2d(x, weight, bias) in fp32 on the FP32
// cores, as a register-blocked direct convolution specialized to the problem's
// geometry (C = 3, 11 x 11 filter, stride 4, padding 2, OC = 96, OW = 55; the
// template's constraints in problem.json pin these dims; N, H, W and OH are
// runtime arguments).
//
// Each thread owns PX consecutive output columns of one output row for OCT
// output channels (PX * OCT fp32 accumulators). For one input row (c, kh) it
// reads the (PX - 1) * 4 + 11 input values its PX windows cover into registers
// with 16-byte shared loads, then for each kw takes OCT weights (a broadcast
// within the lanes of one channel group) and does PX * OCT FMAs whose x operand
// is register xv[4 * j + kw]: the stride-4 window reuse costs no loads. For
// PX = 5, OCT = 12 that is 660 FMAs against 40 shared loads per input row.
//
// A block is persistent: it walks tiles (image n, band of ROWS output rows,
// block of OCB output channels) with a stride of gridDim.x. The K loop of a
// tile is its three input channels; each stage (tile, channel) holds that
// channel's 121 x OCB weights (from the transposed copy `wt`, written by
// conv2d_regwin_wt) and the tile's 4 * ROWS + 7 input rows, zero-padded, in
// shared memory. Two stages are in
// flight: cp.async fills one while the block computes on the other, and the
// next tile's first stage is prefetched under the current tile's last one.
// Each output is a float sum over (c, kh, kw) in that order plus the bias.
//
// Tunable through the -D params:
//   ROWS  output rows per tile (= thread rows of the block)
//   OCB   output channels per tile (divides 96)
//   OCT   output channels per thread (divides OCB, a multiple of 4)
//   PX    output columns per thread (the last column group is masked)
//   KHU   unroll factor of the kh loop (1 keeps the body at 11 * PX * OCT FMAs)
//   NCTA  persistent blocks (the grid); the SM count is the natural choice
// Block: (OCB / OCT) * ceil_div(55, PX) * ROWS threads, grid NCTA, dynamic
// shared memory 8 * (121 * OCB + (4 * ROWS + 7) * XW) bytes (XW below).

#ifndef ROWS
#define ROWS 3
#endif
#ifndef OCT
#define OCT 8
#endif
#ifndef OCB
#define OCB 48
#endif
#ifndef PX
#define PX 4
#endif
#ifndef KHU
#define KHU 1
#endif

#define CONV_C 3
#define CONV_K 11
#define CONV_S 4
#define CONV_P 2
#define CONV_OC 96
#define CONV_OW 55

#define OCG (OCB / OCT)               // channel groups of a tile
#define OBS (CONV_OC / OCB)           // channel blocks (tiles per band)
#define PG ((CONV_OW + PX - 1) / PX)  // column groups
#define THREADS (OCG * PG * ROWS)
#define SEG ((PX - 1) * CONV_S + CONV_K)  // input columns one thread reads per row
#define SEG4 ((SEG + 3) / 4)              // ... in 16-byte loads
// Shared input rows hold columns -PAD .. at index col + PAD, so a column
// group's window starts at index 4 * PX * pg: 16-byte aligned. XW is the row
// pitch, exactly what the last column group reads; for PX = 5 it is 228,
// which is 4 banks mod 32, so neighbouring rows do not collide.
#define XW ((((PG * PX - 1) * CONV_S + CONV_K) + 3) / 4 * 4)
#define XROWS ((ROWS - 1) * CONV_S + CONV_K)
#define W_STAGE (CONV_K * CONV_K * OCB)  // floats of one channel's weights
#define X_STAGE (XROWS * XW)
#define STAGE (W_STAGE + X_STAGE)

#if (CONV_OC % OCB) || (OCB % OCT) || (OCT % 4)
#error "OCB must divide 96, OCT must divide OCB and be a multiple of 4"
#endif
#if THREADS > 1024
#error "more than 1024 threads per block"
#endif

#define KS_STR2(x) #x
#define KS_STR(x) KS_STR2(x)
#define KS_UNROLL(n) _Pragma(KS_STR(unroll n))

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// 8- and 16-byte asynchronous copies; `bytes` below the size zero-fills the
// rest (`src` must still be a valid address).
__device__ __forceinline__ void cp_async8(unsigned dst, const float* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }
// 16-byte shared load through a 32-bit shared address (NVRTC otherwise keeps
// 64-bit generic addresses for shared pointers, a register pair each).
__device__ __forceinline__ float4 lds128(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}

// wt[c][kh][kw][oc] = weight[oc][c][kh][kw]: a tap's 96 channels are then
// contiguous and 16-byte aligned, so a stage copies its OCB channels of each
// tap with 16-byte cp.async into the [tap][OCB] layout the FMAs read.
extern "C" __global__ void __launch_bounds__(256)
conv2d_regwin_wt(const float* __restrict__ weight, float* __restrict__ wt) {
  const int e = blockIdx.x * 256 + threadIdx.x;
  const int taps = CONV_C * CONV_K * CONV_K;
  if (e >= taps * CONV_OC) return;
  const int oc = e % CONV_OC;
  const int tap = e / CONV_OC;
  wt[e] = weight[oc * taps + tap];
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
conv2d_regwin(const float* __restrict__ x, const float* __restrict__ wt,
              const float* __restrict__ bias, float* __restrict__ y, int N, int H, int W, int OH) {
  extern __shared__ __align__(16) float smem[];  // 2 stages of [W_STAGE weights][X_STAGE input]
  const int t = threadIdx.x;
  const int ocg = t % OCG;
  const int pg = (t / OCG) % PG;
  const int r = t / (OCG * PG);
  const int bands = (OH + ROWS - 1) / ROWS;
  const int tiles = N * bands * OBS;
  const int my_tiles =
      (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  const int stages = my_tiles * CONV_C;

  // Stage s is channel s % 3 of this block's (s / 3)-th tile.
  auto issue = [&](int s) {
    const int tile = blockIdx.x + (s / CONV_C) * gridDim.x;
    const int c = s % CONV_C;
    const int ob = tile % OBS;
    const int n = tile / OBS / bands;
    const int ih0 = (tile / OBS % bands) * ROWS * CONV_S - CONV_P;
    float* buf = smem + (s & 1) * STAGE;
    // Shared weights are [tap][OCB]: row tap is OCB floats of wt's 96.
    const float* wsrc = wt + c * CONV_K * CONV_K * CONV_OC + ob * OCB;
    for (int e = t; e < W_STAGE / 4; e += THREADS)
      cp_async16(smem_addr(buf + 4 * e), wsrc + e / (OCB / 4) * CONV_OC + 4 * (e % (OCB / 4)));
    const float* plane = x + ((long long)n * CONV_C + c) * H * W;
    float* xdst = buf + W_STAGE;
    // Column pairs (2p - 2, 2p - 1): PAD and W are even, so a pair is wholly
    // inside or outside the image and 8-byte aligned in x; half the copies.
    for (int e = t; e < X_STAGE / 2; e += THREADS) {
      const int ih = ih0 + 2 * e / XW;
      const int iw = 2 * e % XW - CONV_P;
      const bool ok = ih >= 0 && ih < H && iw >= 0 && iw < W;
      cp_async8(smem_addr(xdst + 2 * e), ok ? plane + (long long)ih * W + iw : x, ok ? 8 : 0);
    }
    cp_async_commit();
  };

  float acc[PX][OCT];
#pragma unroll
  for (int j = 0; j < PX; ++j)
#pragma unroll
    for (int o = 0; o < OCT; ++o) acc[j][o] = 0.0f;

  if (stages > 0) issue(0);
  for (int s = 0; s < stages; ++s) {
    if (s + 1 < stages) {
      issue(s + 1);
      cp_async_wait_one();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();  // stage s has landed for every thread's copies

    const unsigned ws = smem_addr(smem + (s & 1) * STAGE + ocg * OCT);
    const unsigned xs =
        smem_addr(smem + (s & 1) * STAGE + W_STAGE + r * CONV_S * XW + CONV_S * PX * pg);
    KS_UNROLL(KHU)
    for (int kh = 0; kh < CONV_K; ++kh) {
      float xv[SEG4 * 4];
#pragma unroll
      for (int q = 0; q < SEG4; ++q) {
        const float4 v = lds128(xs + 4 * (kh * XW + 4 * q));
        xv[4 * q] = v.x;
        xv[4 * q + 1] = v.y;
        xv[4 * q + 2] = v.z;
        xv[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int kw = 0; kw < CONV_K; ++kw) {
        float wv[OCT];
#pragma unroll
        for (int q = 0; q < OCT / 4; ++q) {
          const float4 v = lds128(ws + 4 * ((kh * CONV_K + kw) * OCB + 4 * q));
          wv[4 * q] = v.x;
          wv[4 * q + 1] = v.y;
          wv[4 * q + 2] = v.z;
          wv[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < PX; ++j)
#pragma unroll
          for (int o = 0; o < OCT; ++o) acc[j][o] = fmaf(xv[CONV_S * j + kw], wv[o], acc[j][o]);
      }
    }

    if (s % CONV_C == CONV_C - 1) {
      const int tile = blockIdx.x + (s / CONV_C) * gridDim.x;
      const int oc0 = tile % OBS * OCB + ocg * OCT;
      const int n = tile / OBS / bands;
      const int oh = (tile / OBS % bands) * ROWS + r;
      if (oh < OH) {
        // One 64-bit base and 32-bit offsets: a pointer per channel would
        // cost a register pair each and spill at OCT = 16.
        float* dst = y + (((long long)n * CONV_OC + oc0) * OH + oh) * CONV_OW + pg * PX;
        const int plane = OH * CONV_OW;
#pragma unroll
        for (int o = 0; o < OCT; ++o) {
          const float b = bias[oc0 + o];
#pragma unroll
          for (int j = 0; j < PX; ++j)
            if (pg * PX + j < CONV_OW) dst[o * plane + j] = acc[j][o] + b;
        }
      }
#pragma unroll
      for (int j = 0; j < PX; ++j)
#pragma unroll
        for (int o = 0; o < OCT; ++o) acc[j][o] = 0.0f;
    }
    __syncthreads();  // everyone is done reading buffer s & 1 before stage s + 2 refills it
  }
}
