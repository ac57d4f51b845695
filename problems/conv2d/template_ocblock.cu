// conv2d template "ocblock": y = conv2d(x, weight, bias, stride, padding) in fp32.
// Each thread computes one output pixel for OCB output channels at once, so
// every input value it loads is used OCB times; the block's OCB filters are
// staged in (dynamic) shared memory. Tunable through the -D params:
//   BLOCK  threads per block = output pixels per block (<= 1024)
//   OCB    output channels per thread (the filters of OCB channels must fit in
//          shared memory: OCB * C * KH * KW * 4 bytes)
// Grid (ceil_div(OH * OW, BLOCK), ceil_div(OC, OCB), N), block (BLOCK, 1, 1),
// shared_bytes OCB * C * KH * KW * 4. NCHW, contiguous, zero padding; each
// output is a float sum over (c, kh, kw) in increasing order plus the bias.

#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef OCB
#define OCB 8
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
conv2d_ocblock(const float* __restrict__ x, const float* __restrict__ weight,
               const float* __restrict__ bias, float* __restrict__ y,
               int N, int C, int H, int W, int OC, int KH, int KW,
               int STRIDE, int PAD, int OH, int OW) {
  extern __shared__ float w_s[];  // [OCB][C * KH * KW]
  const int taps = C * KH * KW;
  const int oc0 = blockIdx.y * OCB;
  const int n = blockIdx.z;
  for (int e = threadIdx.x; e < OCB * taps; e += BLOCK) {
    const int o = e / taps;
    w_s[e] = (oc0 + o < OC) ? weight[(long long)(oc0 + o) * taps + e % taps] : 0.0f;
  }
  __syncthreads();

  const int p = blockIdx.x * BLOCK + threadIdx.x;
  if (p >= OH * OW || n >= N) return;
  const int oh = p / OW;
  const int ow = p % OW;

  float acc[OCB];
#pragma unroll
  for (int o = 0; o < OCB; ++o) acc[o] = 0.0f;

  for (int c = 0; c < C; ++c) {
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * STRIDE - PAD + kh;
      if (ih < 0 || ih >= H) continue;
      const float* xrow = x + (((long long)n * C + c) * H + ih) * W;
      const int tap0 = (c * KH + kh) * KW;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow * STRIDE - PAD + kw;
        if (iw < 0 || iw >= W) continue;
        const float xv = xrow[iw];
#pragma unroll
        for (int o = 0; o < OCB; ++o) acc[o] += xv * w_s[o * taps + tap0 + kw];
      }
    }
  }
#pragma unroll
  for (int o = 0; o < OCB; ++o) {
    const int oc = oc0 + o;
    if (oc < OC) y[(((long long)n * OC + oc) * OH + oh) * OW + ow] = acc[o] + bias[oc];
  }
}
