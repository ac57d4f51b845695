// conv2d reference, fp32 twin: y = conv2d(x, weight, bias, stride, padding) in
// plain fp32 arithmetic.
//
// The same kernel as reference.cu with float in place of double. The evaluator
// compares it with reference.cu to measure how accurate plain fp32 is for this
// op; the strict tolerance is a multiple of that error.
//
// NCHW, contiguous: x is N x C x H x W, weight is OC x C x KH x KW, bias is OC,
// y is N x OC x OH x OW with OH = (H + 2 * PAD - KH) / STRIDE + 1 and
// OW = (W + 2 * PAD - KW) / STRIDE + 1. Zero padding; cross-correlation (no
// kernel flip), as PyTorch:
//   y[n][oc][oh][ow] = bias[oc] + sum over c, kh, kw of
//       x[n][c][oh * STRIDE - PAD + kh][ow * STRIDE - PAD + kw] * weight[oc][c][kh][kw]
// (terms whose input position falls outside the image are zero).
// One thread per output, the sum in float, in the order reference.cu uses.
// Grid (ceil_div(OH * OW, BLOCK), OC, N), block (BLOCK, 1, 1).

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
conv2d_ref_fp32(const float* __restrict__ x, const float* __restrict__ weight,
                const float* __restrict__ bias, float* __restrict__ y,
                int N, int C, int H, int W, int OC, int KH, int KW,
                int STRIDE, int PAD, int OH, int OW) {
  const int p = blockIdx.x * BLOCK + threadIdx.x;  // output pixel within the plane
  const int oc = blockIdx.y;
  const int n = blockIdx.z;
  if (p >= OH * OW || oc >= OC || n >= N) return;
  const int oh = p / OW;
  const int ow = p % OW;

  float acc = 0.0f;
  for (int c = 0; c < C; ++c) {
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * STRIDE - PAD + kh;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow * STRIDE - PAD + kw;
        if (iw < 0 || iw >= W) continue;
        const float xv = x[(((long long)n * C + c) * H + ih) * W + iw];
        const float wv = weight[(((long long)oc * C + c) * KH + kh) * KW + kw];
        acc += xv * wv;
      }
    }
  }
  acc += bias[oc];
  y[(((long long)n * OC + oc) * OH + oh) * OW + ow] = acc;
}
