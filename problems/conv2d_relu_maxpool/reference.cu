// conv2d_relu_maxpool reference (trusted):
//   y = max_pool2d(relu(conv2d(x, weight, bias, stride, padding)), POOL, POOL_STRIDE)
// fp32 in and out, fp64 accumulation.
//
// NCHW, contiguous: x is N x C x H x W, weight is OC x C x KH x KW, bias is OC.
// The convolution (zero padding, cross-correlation, as PyTorch) gives
// N x OC x OH x OW values, OH = (H + 2 * PAD - KH) / STRIDE + 1, likewise OW;
// they are kept in double in the workspace `conv`. The pool takes the maximum
// of each POOL x POOL window at stride POOL_STRIDE (no padding, floor mode):
// y is N x OC x PH x PW, PH = (OH - POOL) / POOL_STRIDE + 1, likewise PW; ReLU
// is applied to that maximum (max and ReLU commute).
// Launches:
//   conv2d_ref_f64     grid (ceil_div(OH * OW, BLOCK), OC, N), block (BLOCK, 1, 1)
//   relu_maxpool_ref   grid (ceil_div(PH * PW, BLOCK), OC, N), block (BLOCK, 1, 1)

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
conv2d_ref_f64(const float* __restrict__ x, const float* __restrict__ weight,
               const float* __restrict__ bias, double* __restrict__ conv,
               int N, int C, int H, int W, int OC, int KH, int KW,
               int STRIDE, int PAD, int OH, int OW) {
  const int p = blockIdx.x * BLOCK + threadIdx.x;  // output pixel within the plane
  const int oc = blockIdx.y;
  const int n = blockIdx.z;
  if (p >= OH * OW || oc >= OC || n >= N) return;
  const int oh = p / OW;
  const int ow = p % OW;

  double acc = 0.0;
  for (int c = 0; c < C; ++c) {
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * STRIDE - PAD + kh;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow * STRIDE - PAD + kw;
        if (iw < 0 || iw >= W) continue;
        const double xv = (double)x[(((long long)n * C + c) * H + ih) * W + iw];
        const double wv = (double)weight[(((long long)oc * C + c) * KH + kh) * KW + kw];
        acc += xv * wv;
      }
    }
  }
  acc += (double)bias[oc];
  conv[(((long long)n * OC + oc) * OH + oh) * OW + ow] = acc;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
relu_maxpool_ref(const double* __restrict__ conv, float* __restrict__ y,
                 int N, int OC, int OH, int OW, int POOL, int POOL_STRIDE, int PH, int PW) {
  const int p = blockIdx.x * BLOCK + threadIdx.x;  // pooled pixel within the plane
  const int oc = blockIdx.y;
  const int n = blockIdx.z;
  if (p >= PH * PW || oc >= OC || n >= N) return;
  const int ph = p / PW;
  const int pw = p % PW;
  const double* plane = conv + ((long long)n * OC + oc) * OH * OW;

  double m = 0.0;  // ReLU: the result is max(0, window maximum)
  for (int i = 0; i < POOL; ++i) {
    const int oh = ph * POOL_STRIDE + i;
    if (oh >= OH) continue;
    for (int j = 0; j < POOL; ++j) {
      const int ow = pw * POOL_STRIDE + j;
      if (ow >= OW) continue;
      const double v = plane[(long long)oh * OW + ow];
      if (v > m) m = v;
    }
  }
  y[(((long long)n * OC + oc) * PH + ph) * PW + pw] = (float)m;
}
